from __future__ import annotations

from pathlib import Path

import pytest

from finchmq.store import FlushDiskType, MessageStoreConfig
from finchmq.store.config import parse_delay_levels


def test_defaults_are_rocketmqs() -> None:
    c = MessageStoreConfig()
    assert c.mapped_file_size_commit_log == 1024**3
    assert c.mapped_file_size_consume_queue == 300_000 * 20
    assert c.flush_interval_commit_log == 500
    assert c.flush_commit_log_least_pages == 4
    assert c.commit_interval_commit_log == 200
    assert c.sync_flush_timeout == 5000
    assert c.max_message_size == 4 * 1024 * 1024
    assert c.file_reserved_time == 72
    assert c.delete_when == "04"
    assert c.disk_max_used_space_ratio == 75
    assert c.os_page_cache_busy_time_out_mills == 1000
    assert c.transient_store_pool_size == 5
    assert c.max_hash_slot_num == 5_000_000
    assert c.max_index_num == 20_000_000
    assert c.max_transfer_count_on_message_in_memory == 32
    assert c.max_transfer_bytes_on_message_in_memory == 256 * 1024
    assert c.access_message_in_memory_max_ratio == 40
    assert c.flush_disk_type is FlushDiskType.ASYNC_FLUSH
    assert c.inject_put_delay_millis == 0
    assert c.commit_log_dir == Path.home() / "store" / "commitlog"


def test_from_properties_maps_camel_case_and_returns_unknown_keys(tmp_path: Path) -> None:
    cfg, unknown = MessageStoreConfig.from_properties(
        {
            "storePathRootDir": str(tmp_path),
            "mapedFileSizeCommitLog": "65536",
            "flushDiskType": "SYNC_FLUSH",
            "transientStorePoolEnable": "true",
            "diskSpaceWarningLevelRatio": "95",
            "injectPutDelayMillis": "7",
            "brokerName": "broker-a",
        }
    )
    assert cfg.store_path_root_dir == tmp_path
    assert cfg.mapped_file_size_commit_log == 65536
    assert cfg.flush_disk_type is FlushDiskType.SYNC_FLUSH
    assert cfg.transient_store_pool_enable is True
    assert not cfg.transient_store_pool_active  # only with ASYNC_FLUSH, as Java
    assert cfg.disk_space_warning_level_ratio == pytest.approx(0.95)
    assert cfg.inject_put_delay_millis == 7
    assert unknown == {"brokerName": "broker-a"}


@pytest.mark.parametrize(
    ("props", "needle"),
    [
        ({"maxMessageSize": "abc"}, "maxMessageSize"),
        ({"maxMessageSize": "0"}, "max_message_size"),
        ({"checkCRCOnRecover": "yes"}, "checkCRCOnRecover"),
        ({"deleteWhen": "25"}, "delete_when"),
        ({"messageDelayLevel": "1s 5x"}, "5x"),
    ],
)
def test_bad_values_name_the_field(props: dict[str, str], needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        MessageStoreConfig.from_properties(props)


def test_post_init_validation_names_field_and_value() -> None:
    with pytest.raises(ValueError, match=r"flush_interval_commit_log must be >= 0, got -1"):
        MessageStoreConfig(flush_interval_commit_log=-1)
    with pytest.raises(ValueError, match="disk_space_warning_level_ratio"):
        MessageStoreConfig(disk_space_warning_level_ratio=1.5)


def test_delay_levels() -> None:
    assert parse_delay_levels("1s 5s 1m 2h 1d") == (1000, 5000, 60_000, 7_200_000, 86_400_000)
    assert len(MessageStoreConfig().delay_levels_ms) == 18


def test_consume_queue_file_size_rounds_up_to_units() -> None:
    assert MessageStoreConfig(mapped_file_size_consume_queue=1001).consume_queue_file_size == 1020
