"""Config files, Java properties text and settings conversion."""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from finchmq.common import (
    SettingsError,
    config_from_properties,
    config_to_properties,
    format_properties,
    parse_properties,
    read_config_file,
    write_atomically,
)


def test_parse_properties_like_java() -> None:
    text = (
        "# comment\n! also a comment\n"
        "brokerClusterName = DefaultCluster\n"
        "brokerName:broker-a\n"
        "brokerId 0\n"
        "namesrvAddr=127.0.0.1:9876;\\\n    127.0.0.2:9876\n"
        "path=C\\:\\\\data\n"
        "unicode=\\u00e9t\\u00e9\n"
        "empty=\n"
    )
    assert parse_properties(text) == {
        "brokerClusterName": "DefaultCluster",
        "brokerName": "broker-a",
        "brokerId": "0",
        "namesrvAddr": "127.0.0.1:9876;127.0.0.2:9876",
        "path": "C:\\data",
        "unicode": "été",
        "empty": "",
    }


def test_format_then_parse_round_trips() -> None:
    values = {"a key": "v=1", "path": "C:\\x", "multi": "line1\nline2"}
    assert parse_properties(format_properties(values)) == values


def test_atomic_write_keeps_backup_and_reads_it_back(tmp_path: Path) -> None:
    path = tmp_path / "config" / "topics.json"
    write_atomically(path, b'{"v":1}')
    write_atomically(path, b'{"v":2}')
    assert path.read_bytes() == b'{"v":2}'
    assert path.with_name("topics.json.bak").read_bytes() == b'{"v":1}'
    assert not path.with_name("topics.json.tmp").exists()
    path.write_bytes(b"{torn")  # a torn main file falls back to the backup
    assert read_config_file(path, json.loads) == {"v": 1}
    assert read_config_file(tmp_path / "absent.json", json.loads) is None


class Mode(enum.Enum):
    ASYNC_FLUSH = 0
    SYNC_FLUSH = 1


@dataclass(frozen=True, kw_only=True)
class Sample:
    listen_port: int = 10911
    flush_disk_type: Mode = Mode.ASYNC_FLUSH
    auto_create_topic_enable: bool = True
    store_path_root_dir: Path = Path("/tmp/store")
    disk_max_used_space_ratio: int = 75
    broker_name: str = "broker-a"

    def __post_init__(self) -> None:
        if not 10 <= self.disk_max_used_space_ratio <= 95:
            raise ValueError(
                f"disk_max_used_space_ratio must be in 10..95, got {self.disk_max_used_space_ratio}"
            )


def test_config_from_properties_maps_camel_case_and_reports_unknown_keys() -> None:
    config, unknown = config_from_properties(
        Sample(),
        {
            "listenPort": "10921",
            "flushDiskType": "SYNC_FLUSH",
            "autoCreateTopicEnable": "false",
            "storePathRootDir": "/data/store",
            "broker_name": "b",
            "brokerIP9": "x",
        },
    )
    assert config == Sample(
        listen_port=10921,
        flush_disk_type=Mode.SYNC_FLUSH,
        auto_create_topic_enable=False,
        store_path_root_dir=Path("/data/store"),
        broker_name="b",
    )
    assert unknown == {"brokerIP9": "x"}
    assert config_to_properties(config)["flushDiskType"] == "SYNC_FLUSH"
    assert config_to_properties(config)["autoCreateTopicEnable"] == "false"


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("listenPort", "ten", "bad value for listenPort: 'ten'"),
        ("flushDiskType", "LAZY", "expected one of ASYNC_FLUSH, SYNC_FLUSH"),
        ("autoCreateTopicEnable", "maybe", "expected true or false"),
        ("diskMaxUsedSpaceRatio", "99", "disk_max_used_space_ratio must be in 10..95, got 99"),
    ],
)
def test_bad_values_name_the_key_and_value(key: str, value: str, message: str) -> None:
    with pytest.raises(SettingsError, match=message.replace("(", r"\(").replace(")", r"\)")):
        config_from_properties(Sample(), {key: value})
