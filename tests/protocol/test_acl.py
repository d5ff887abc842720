"""ACL 1.0's shared parts: the request signature (against values Java 4.9.8 computed), permissions,
what each request needs, and whiteRemoteAddress patterns."""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from finchmq.protocol import RemotingCommand, RequestCode
from finchmq.protocol.acl import (
    ACCESS_KEY,
    DENY,
    PUB,
    SECURITY_TOKEN,
    SIGNATURE,
    SUB,
    AddressPattern,
    AuthorizationHeaderError,
    SessionCredentials,
    V2Authorization,
    cal_signature,
    check_permission,
    combine_request_content,
    parse_access_request,
    parse_perm,
    parse_v2_authorization,
    request_signature,
    sign_request,
    verify_v2_signature,
)
from finchmq.protocol.bodies import ConsumeFromWhere, ConsumerData, ConsumeType, HeartbeatData, MessageModel
from finchmq.protocol.errors import ProtocolError
from finchmq.protocol.filter import build_subscription_data

CREDENTIALS = SessionCredentials("RocketMQ", "12345678")


def test_signature_matches_java() -> None:
    """Java 4.9.8's AclClientRPCHook signed this request (extFields a, b, z, U+FF5E and an emoji
    key; body "hello body"; RocketMQ/12345678) as GFmDj91x...; Java orders keys by UTF-16 code
    units, which puts the emoji (a surrogate pair) before U+FF5E, unlike Python's sort."""
    request = RemotingCommand.request(
        RequestCode.SEND_MESSAGE_V2,
        {
            "a": "pg",
            "b": "TopicTest",
            "z": "\u00e9\U0001f600",
            "\uff5e": "fullwidth-tilde",
            "\U0001f600": "emoji-key",
        },
        b"hello body",
    )
    signed = sign_request(request, CREDENTIALS)
    assert signed.ext_fields[SIGNATURE] == "GFmDj91xR872IJAxuOlpZcrtflw="
    assert signed.ext_fields[ACCESS_KEY] == "RocketMQ"
    assert cal_signature(b"", "12345678") == "beQgVA0KNM4WtCe68fj2DEn3WWU="  # Java AclUtils.calSignature
    assert request.ext_fields.get(SIGNATURE) is None  # the original is untouched


def test_signature_covers_sorted_values_then_body() -> None:
    fields = {"b": "2", "a": "1", SIGNATURE: "old", "c": "3"}
    content = combine_request_content(fields, b"BODY")
    assert content == b"123BODY"
    expected = base64.b64encode(hmac.new(b"secret-key", content, hashlib.sha1).digest()).decode()
    assert request_signature("secret-key", fields, memoryview(b"BODY")) == expected
    # a lone surrogate is written as '?', as Java's getBytes(UTF-8) does; nothing raises
    assert combine_request_content({"k": "x\ud800y"}, None) == b"x?y"


def test_security_token_is_signed() -> None:
    request = RemotingCommand.request(RequestCode.HEART_BEAT, {}, b"{}")
    signed = sign_request(request, SessionCredentials("RocketMQ", "12345678", "token-1"))
    assert signed.ext_fields[SECURITY_TOKEN] == "token-1"
    assert signed.ext_fields[SIGNATURE] == request_signature("12345678", signed.ext_fields, b"{}")


def test_credentials_are_checked_and_the_secret_is_not_shown() -> None:
    assert "12345678" not in repr(CREDENTIALS)
    for access_key, secret_key in [("", "x"), ("ak", " "), (None, "x")]:
        with pytest.raises(ValueError, match="SessionCredentials"):
            SessionCredentials(access_key, secret_key)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "perm"),
    [("PUB", PUB), ("SUB", SUB), ("PUB|SUB", PUB | SUB), ("SUB|PUB", PUB | SUB), ("DENY", DENY),
     (" SUB ", SUB), (None, DENY), ("pub", DENY), ("ANY", DENY)],
)  # fmt: skip
def test_parse_perm_is_javas(text: str | None, perm: int) -> None:
    assert parse_perm(text) == perm


def test_check_permission() -> None:
    assert check_permission(PUB, PUB | SUB)
    assert check_permission(SUB, SUB)
    assert not check_permission(PUB, SUB)
    assert not check_permission(SUB, DENY)
    assert not check_permission(PUB, DENY | PUB)  # DENY wins


def _send_v2(topic: str, group: str = "pg") -> RemotingCommand:
    return RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {"a": group, "b": topic, ACCESS_KEY: "ak"})


def test_what_requests_need() -> None:
    access = parse_access_request(_send_v2("TopicA"), "10.0.0.1:5555")
    assert access.remote_ip == "10.0.0.1"
    assert access.access_key == "ak"
    assert access.resources == {"TopicA": PUB}
    # a send to a retry topic needs the producer group's SUB (Java reads the group from "a")
    assert parse_access_request(_send_v2("%RETRY%g1", "g1"), "x:1").resources == {"%RETRY%g1": SUB}
    batch = RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, {"a": "pg", "b": "TopicB"})
    assert parse_access_request(batch, "::1:5555").resources == {"TopicB": PUB}
    assert parse_access_request(batch, "::1:5555").remote_ip == "::1"
    pull = RemotingCommand.request(RequestCode.PULL_MESSAGE, {"topic": "T", "consumerGroup": "G"})
    assert parse_access_request(pull, "h:1").resources == {"T": SUB, "%RETRY%G": SUB}
    offset = RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, {"topic": "T", "consumerGroup": "G"})
    assert parse_access_request(offset, "h:1").resources == {"T": SUB, "%RETRY%G": SUB}
    back = RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, {"group": "G"})
    assert parse_access_request(back, "h:1").resources == {"%RETRY%G": SUB}
    unregister = RemotingCommand.request(
        RequestCode.UNREGISTER_CLIENT, {"clientID": "c", "producerGroup": "P"}
    )
    assert parse_access_request(unregister, "h:1").resources == {}  # producers need nothing
    admin = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "T"})
    assert parse_access_request(admin, "h:1").resources == {}
    # 5.x POP: as a pull; an ack of a message from the pop retry topic names the topic it serves
    pop = RemotingCommand.request(RequestCode.POP_MESSAGE, {"topic": "T", "consumerGroup": "G"})
    assert parse_access_request(pop, "h:1").resources == {"T": SUB, "%RETRY%G": SUB}
    ack = RemotingCommand.request(RequestCode.ACK_MESSAGE, {"topic": "%RETRY%G_T", "consumerGroup": "G"})
    assert parse_access_request(ack, "h:1").resources == {"T": SUB, "%RETRY%G": SUB}


def test_a_heartbeat_needs_its_groups_and_topics() -> None:
    heartbeat = HeartbeatData(
        client_id="c1",
        consumer_data_set=(
            ConsumerData(
                group_name="G",
                consume_type=ConsumeType.CONSUME_PASSIVELY,
                message_model=MessageModel.CLUSTERING,
                consume_from_where=ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
                subscription_data_set=(
                    build_subscription_data("T1", "*"),
                    build_subscription_data("%RETRY%G", "*"),
                ),
            ),
        ),
    )
    request = RemotingCommand.request(RequestCode.HEART_BEAT, {}, heartbeat.to_json())
    assert parse_access_request(request, "h:1").resources == {"%RETRY%G": SUB, "T1": SUB}
    with pytest.raises(ProtocolError):
        parse_access_request(RemotingCommand.request(RequestCode.HEART_BEAT, {}, b"{not json"), "h:1")


def _matches(pattern: str, address: str) -> bool:
    return AddressPattern(pattern).matches(ipaddress.ip_address(address))


@pytest.mark.parametrize(
    ("pattern", "address", "matches"),
    [
        ("*", "10.1.2.3", True), ("*.*.*.*", "::1", True), ("*:*:*:*:*:*:*:*", "10.1.2.3", True),
        ("127.0.0.1", "127.0.0.1", True), ("127.0.0.1", "127.0.0.2", False),
        ("192.168.1.*", "192.168.1.77", True), ("192.168.1.*", "192.168.2.77", False),
        ("192.168.*.*", "192.168.200.1", True), ("10.*.*.*", "11.0.0.1", False),
        ("192.168.1.1-10", "192.168.1.10", True), ("192.168.1.1-10", "192.168.1.11", False),
        ("192.168.1-3.*", "192.168.3.9", True), ("192.168.1-3.*", "192.168.4.9", False),
        ("192.168.1.{1,2}", "192.168.1.2", True), ("192.168.1.{1,2}", "192.168.1.3", False),
        ("1.2.3.4,1.2.3.5", "1.2.3.5", True), ("1.2.3.4, 1.2.3.5", "1.2.3.5", True),
        ("::1", "::1", True), ("0:0:0:0:0:0:0:1", "::1", True), ("::1", "127.0.0.1", False),
        ("2001:db8::5:*", "2001:db8::5:abcd", True), ("2001:db8::5:*", "2001:db8::6:abcd", False),
        ("2001:db8::5:1-ff", "2001:db8::5:ff", True), ("2001:db8::5:1-ff", "2001:db8::5:100", False),
        ("2001:db8::1-ff:*", "2001:db8::80:1234", True), ("2001:db8::{1,2}", "2001:db8::2", True),
        ("192.168.1.*", "::1", False), ("2001:db8::5:*", "192.168.1.1", False),
    ],
)  # fmt: skip
def test_address_patterns(pattern: str, address: str, matches: bool) -> None:
    assert _matches(pattern, address) is matches


def test_a_blank_pattern_matches_nothing() -> None:
    for blank in (None, "", "  "):
        assert not AddressPattern(blank).matches(ipaddress.ip_address("127.0.0.1"))
    assert not AddressPattern("127.0.0.1").matches(None)  # the peer is not an IP address


@pytest.mark.parametrize(
    ("pattern", "why"),
    [
        ("1.2.3", "not an IPv4 or IPv6 address"), ("1.2.3.300", "not an IPv4"),
        ("*.1.2.3", "first part must be a number"), ("1.2.*.4", "after a '\\*' or a range must be '\\*'"),
        ("1.2.3.5-1", "starts after it ends"), ("1.2.3.1-300", "out of range"), ("1.2.3.-5", "not a range"),
        ("1.2.3.{1,2", "not an IPv4"), ("2001:*:*", "may only end the address"), ("abc", "not an IPv4"),
    ],
)  # fmt: skip
def test_bad_patterns_say_why(pattern: str, why: str) -> None:
    with pytest.raises(ValueError, match=f"Netaddress examine Exception netaddress is .*{why}"):
        AddressPattern(pattern)


# -- RocketMQ 5.x gRPC's authorization metadata -----------------------------------------------------

_DATE = "20250101T120000Z"


def _sdk_authorization(access_key: str, secret_key: str, date_time: str = _DATE) -> str:
    """What the 5.x Python SDK sends (``rocketmq/v5/util/signature.py``)."""
    signature = hmac.new(secret_key.encode(), date_time.encode(), hashlib.sha1).hexdigest()
    return f"MQv2-HMAC-SHA1 Credential={access_key}, SignedHeaders=x-mq-date-time, Signature={signature}"


def test_v2_authorization_parse_and_verify() -> None:
    parsed = parse_v2_authorization(_sdk_authorization("ak", "sk"))
    assert parsed.access_key == "ak" and parsed.signature is not None
    assert verify_v2_signature("sk", _DATE, parsed.signature)
    assert not verify_v2_signature("other", _DATE, parsed.signature)
    assert not verify_v2_signature("sk", "20250101T120001Z", parsed.signature)
    assert not verify_v2_signature("sk", _DATE, "zz")
    assert verify_v2_signature("sk", _DATE, parsed.signature.upper())  # hex, whatever its case
    # the Java reading: Credential up to its first '/', other items ignored, items trimmed
    assert parse_v2_authorization("X Credential=ak/2025/region ,Other=1") == V2Authorization("ak", None)
    assert parse_v2_authorization("X Signature=00ff") == V2Authorization(None, "00ff")
    for bad, words in [
        ("MQv2-HMAC-SHA1", "incorrect"),
        ("MQv2-HMAC-SHA1 Credential", "no '='"),
        ("MQv2-HMAC-SHA1 Credential=ak,", "no '='"),
        ("MQv2-HMAC-SHA1 Credential=/", "credential"),
        ("MQv2-HMAC-SHA1 Signature=xyz", "not hex"),
        ("MQv2-HMAC-SHA1 Signature=abc", "not hex"),
        ("MQv2-HMAC-SHA1 Signature=ab cd", "not hex"),
    ]:
        with pytest.raises(AuthorizationHeaderError, match=words):
            parse_v2_authorization(bad)


@given(st.text(max_size=200) | st.builds(
    lambda parts: "MQv2-HMAC-SHA1 " + ",".join(parts),
    st.lists(st.sampled_from(["Credential=", "Signature=", "SignedHeaders=", " ", "/", "=", "ab", "é", ","])
             .flatmap(lambda head: st.text(max_size=12).map(lambda tail: head + tail)), max_size=5),
))  # fmt: skip
def test_v2_authorization_parser_raises_only_its_error(value: str) -> None:
    try:
        parsed = parse_v2_authorization(value)
    except AuthorizationHeaderError:
        return
    if parsed.signature is not None:
        bytes.fromhex(parsed.signature)
        verify_v2_signature("sk", _DATE, parsed.signature)
