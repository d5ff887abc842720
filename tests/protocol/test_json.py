"""_json: the strict fast path, the lenient fallback parser and fastjson's key forms."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from finchmq.protocol import _json
from finchmq.protocol._json import (
    JSONDecodeError,
    ObjectKey,
    dumps,
    dumps_fastjson,
    dumps_fastjson_pretty,
    java_concurrent_hash_order,
    java_hash_order,
    loads,
    loads_lenient,
)

TEXT = st.text(st.characters(codec="utf-8"), max_size=12)
SCALARS = st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | TEXT
SCALARS_F = SCALARS | st.floats(allow_nan=False, allow_infinity=False)
JSON_TREES = st.recursive(
    SCALARS_F,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=20,
)


def test_public_api_unchanged() -> None:
    assert dumps({"b": 1, "a": [True, None, "é"]}) == '{"b":1,"a":[true,null,"é"]}'.encode()
    assert loads(b'{"a":1}\n') == {"a": 1}
    assert isinstance(_json.HAVE_ORJSON, bool)
    with pytest.raises(JSONDecodeError):
        loads(b"{0:1}")
    assert issubclass(JSONDecodeError, ValueError)


def test_lenient_accepts_standard_json_via_the_strict_path() -> None:
    assert loads_lenient(b'{"a":[1,2.5,"x"]}\n') == {"a": [1, 2.5, "x"]}
    assert loads_lenient('{"a":1}') == {"a": 1}
    assert loads_lenient(memoryview(b"[1]")) == [1]


def test_numeric_keys_become_strings_like_jsoncpp() -> None:
    assert loads_lenient(b'{"brokerAddrs":{0:"127.0.0.1:10911", 1 : "b",-7:"c"}}') == {
        "brokerAddrs": {"0": "127.0.0.1:10911", "1": "b", "-7": "c"}
    }


def test_object_keys_become_hashable_object_keys() -> None:
    text = b'{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{"brokerOffset":5}}}'
    tree = loads_lenient(text)
    (key,) = tree["offsetTable"]
    assert isinstance(key, ObjectKey)
    assert key.as_dict() == {"brokerName": "b", "queueId": 0, "topic": "T"}
    assert tree["offsetTable"][key] == {"brokerOffset": 5}
    assert hash(key) == hash(ObjectKey([("brokerName", "b"), ("queueId", 0), ("topic", "T")]))


def test_nested_values_inside_object_keys_are_frozen() -> None:
    tree = loads_lenient(b'{{"a":{"b":[1,{"c":2}]},"e":{}}:1}')
    (key,) = tree
    inner = key.as_dict()
    assert isinstance(inner["a"], ObjectKey)
    assert inner["a"].as_dict()["b"] == (1, ObjectKey([("c", 2)]))
    assert inner["e"] == ObjectKey()


def test_string_contents_are_not_mistaken_for_keys() -> None:
    text = b'{0:"{1:2}","k":"a\\"b:{3:4}\\u0001"}'
    assert loads_lenient(text) == {"0": "{1:2}", "k": 'a"b:{3:4}\x01'}


@pytest.mark.parametrize(
    "bad",
    [
        b"{0:1",  # unterminated
        b"{0:1}}",  # extra data
        b"{0 1}",  # no colon
        b"{0:1,}",  # trailing comma
        b"{0:tru}",  # bad literal
        b'{0:"abc}',  # unterminated string
        b"{x:1}",  # bare identifier keys are not a fastjson output form
        b"\xff{0:1}",  # not UTF-8
        b"",
    ],
)
def test_lenient_rejects_garbage_with_json_decode_error(bad: bytes) -> None:
    with pytest.raises(JSONDecodeError):
        loads_lenient(bad)


def test_deep_nesting_is_a_decode_error_not_a_crash() -> None:
    with pytest.raises(JSONDecodeError, match="nesting"):
        loads_lenient("{0:" + "[" * 5000 + "]" * 5000 + "}")


def test_dumps_fastjson_writes_bare_int_keys_and_object_keys() -> None:
    key = ObjectKey([("brokerName", "b"), ("queueId", 0), ("topic", "T")])
    tree = {"m": {key: 5, "s": [1, {2: "x"}]}, "q": 'a"b'}
    assert (
        dumps_fastjson(tree)
        == b'{"m":{{"brokerName":"b","queueId":0,"topic":"T"}:5,"s":[1,{2:"x"}]},"q":"a\\"b"}'
    )


def test_dumps_fastjson_rejects_other_key_types() -> None:
    with pytest.raises(TypeError, match="map key"):
        dumps_fastjson({True: 1})
    with pytest.raises(TypeError, match="map key"):
        dumps_fastjson({1.5: 1})


@given(JSON_TREES)
def test_fallback_parser_agrees_with_the_stdlib_on_standard_json(tree: Any) -> None:
    # A trailing numeric key forces the lenient fallback over the whole document.
    text = '{"payload":' + json.dumps(tree, ensure_ascii=False) + ",0:1}"
    assert loads_lenient(text) == {"payload": json.loads(json.dumps(tree)), "0": 1}


FASTJSON_KEYS = st.integers(-(2**31), 2**31) | TEXT
FASTJSON_TREES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(FASTJSON_KEYS, inner, max_size=3),
    max_leaves=15,
)


def _normalized(tree: Any) -> Any:
    if isinstance(tree, dict):
        return {(str(k) if isinstance(k, int) else k): _normalized(v) for k, v in tree.items()}
    if isinstance(tree, list):
        return [_normalized(v) for v in tree]
    return tree


@given(FASTJSON_TREES)
def test_fastjson_form_round_trips(tree: Any) -> None:
    # int keys come back as their digits (and an int key meeting an equal str key: last wins).
    assert loads_lenient(dumps_fastjson(tree)) == _normalized(tree)


@given(st.lists(st.tuples(TEXT, st.integers(0, 1000), TEXT), min_size=1, max_size=4))
def test_object_keys_round_trip(mqs: list[tuple[str, int, str]]) -> None:
    tree = {ObjectKey([("brokerName", b), ("queueId", q), ("topic", t)]): q for b, q, t in mqs}
    assert loads_lenient(dumps_fastjson({"t": tree})) == {"t": tree}


def test_doubles_are_written_as_fastjson_writes_them() -> None:
    """fastjson 1.2.69 writes ``Double.toString``'s form (scientific below 1e-3 and from 1e7) and
    null for NaN; the expected bytes were printed by fastjson itself (JSON.toJSONString)."""
    values = {"a": 1.1e-5, "b": 1e7, "c": 0.0016666666666666668, "d": 0.4, "e": 123456789.5, "f": 1e-3}
    expected = b'{"a":1.1E-5,"b":1.0E7,"c":0.0016666666666666668,"d":0.4,"e":1.234567895E8,"f":0.001}'
    assert _json.dumps_fastjson(values) == expected
    assert (
        _json.dumps_fastjson({"tps": float("nan"), "x": -0.0, "y": 100.0})
        == b'{"tps":null,"x":-0.0,"y":100.0}'
    )
    assert _json.dumps_browser_compatible({"a": 1.1e-5}) == b'{"a":1.1E-5}'


def test_concurrent_hash_order_is_java_s_after_a_resize() -> None:
    """The keys mqadmin exportConfigs puts in a ``Properties`` (a ConcurrentHashMap of 16 buckets),
    in the order Java 17 wrote them: the resize at the 12th key swaps fileReservedTime and
    brokerClusterName, which share a bucket (a HashMap would keep them in order)."""
    keys = [
        "brokerClusterName", "brokerId", "brokerName", "brokerRole", "fileReservedTime", "filterServerNums",
        "flushDiskType", "maxMessageSize", "messageDelayLevel", "msgTraceTopicName", "slaveReadEnable", "traceOn",
        "traceTopicEnable", "useTLS", "autoCreateTopicEnable", "autoCreateSubscriptionGroup",
    ]  # fmt: skip
    java = [
        "brokerId", "traceOn", "flushDiskType", "msgTraceTopicName", "traceTopicEnable", "messageDelayLevel",
        "autoCreateTopicEnable", "brokerRole", "slaveReadEnable", "fileReservedTime", "brokerClusterName",
        "brokerName", "filterServerNums", "maxMessageSize", "useTLS", "autoCreateSubscriptionGroup",
    ]  # fmt: skip
    assert java_concurrent_hash_order(keys) == java
    hash_map = java_hash_order(keys)
    assert hash_map.index("brokerClusterName") < hash_map.index("fileReservedTime")
    assert sorted(hash_map) == sorted(java)


def test_fastjson_pretty_form() -> None:
    """``JSON.toJSONString(x, true)``: tabs, no space after the colon, an empty map over two lines."""
    tree = {"a": {"b": 1, "c": [1, "x"]}, "e": {}, "f": None}
    assert (
        dumps_fastjson_pretty(tree)
        == '{\n\t"a":{\n\t\t"b":1,\n\t\t"c":[1,"x"]\n\t},\n\t"e":{\n\t},\n\t"f":null\n}'
    )
