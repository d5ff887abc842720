"""``finchmq admin``'s declarations: each command declared once, listed with its help, parsed
with its options (the commands against a cluster: tests/client/test_admin.py and
tests/java/test_java_servers.py)."""

from __future__ import annotations

from collections import Counter

import pytest

from finchmq.cli.__main__ import main
from finchmq.cli.admin.command import Command
from finchmq.cli.admin.startup import COMMANDS


def test_every_command_is_declared_once() -> None:
    assert [name for name, n in Counter(c.name for c in COMMANDS).items() if n > 1] == []
    assert len(COMMANDS) == 68  # 57 (every 4.9.8 command) + the 10 ACL 2.0 commands + migrateAuthFromV1


def test_every_command_of_java_4_9_8_mqadmin_is_there() -> None:
    """MQAdminStartup.initCommand of 4.9.8, by name (and alias)."""
    java = {
        "updateTopic", "deleteTopic", "updateSubGroup", "deleteSubGroup", "updateBrokerConfig", "updateTopicPerm",
        "topicRoute", "topicStatus", "topicClusterList", "brokerStatus", "queryMsgById", "queryMsgByKey",
        "queryMsgByUniqueKey", "queryMsgByOffset", "queryMsgTraceById", "printMsg", "printMsgByQueue",
        "sendMsgStatus", "brokerConsumeStats", "producerConnection", "consumerConnection", "consumerProgress",
        "consumerStatus", "cloneGroupOffset", "producer", "clusterList", "topicList", "updateKvConfig",
        "deleteKvConfig", "wipeWritePerm", "addWritePerm", "resetOffsetByTime", "skipAccumulatedMessage",
        "updateOrderConf", "cleanExpiredCQ", "deleteExpiredCommitLog", "cleanUnusedTopic", "startMonitoring",
        "statsAll", "allocateMQ", "checkMsgSendRT", "clusterRT", "getNamesrvConfig", "updateNamesrvConfig",
        "getBrokerConfig", "getConsumerConfig", "queryCq", "sendMessage", "consumeMessage", "updateAclConfig",
        "deleteAclConfig", "deleteAccessConfig", "clusterAclConfigVersion", "updateGlobalWhiteAddr",
        "exportMetadata", "exportConfigs", "exportMetrics",
    }  # fmt: skip
    ours = {name for c in COMMANDS for name in (c.name, *c.aliases)}
    assert java - ours == set()


def test_delete_access_config_is_an_alias_of_delete_acl_config(capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("deleteAclConfig", "deleteAccessConfig"):
        with pytest.raises(SystemExit) as info:
            main(["admin", name, "--help"])
        assert info.value.code == 0
        assert "delete an ACL account" in capsys.readouterr().out


def test_admin_help_lists_every_command_with_its_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["admin", "--help"])
    assert info.value.code == 0
    listed = " ".join(capsys.readouterr().out.split())  # help wraps at the terminal's width
    for command in COMMANDS:
        name = f"{command.name} ({', '.join(command.aliases)})" if command.aliases else command.name
        assert f"{name} {command.help}" in listed


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c.name)
def test_each_command_help_shows_its_declared_options(
    command: Command, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        main(["admin", command.name, "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    for flag in ("-n", "--namesrvAddr", "--json", *(f for o in command.options for f in o.flags)):
        assert flag in out


def test_a_missing_required_option_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["admin", "topicRoute"])
    assert info.value.code == 2
    assert "-t/--topic" in capsys.readouterr().err


def test_a_bad_boolean_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["admin", "updateTopic", "-t", "T", "-c", "C", "-o", "maybe"])
    assert info.value.code == 2
    assert "expected true or false, got 'maybe'" in capsys.readouterr().err
