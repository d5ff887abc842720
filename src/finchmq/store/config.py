"""Store settings: ``MessageStoreConfig`` with RocketMQ's names (snake_case) and defaults.

Owns the store's configuration value and its ``broker.conf`` parsing. Imports:
``finchmq.common`` (settings conversion) and ``finchmq.protocol.topics``.

Strategy:
    One frozen, slotted, keyword-only dataclass (style §3.2). Field names are Java's
    ``MessageStoreConfig`` names in snake_case, typos kept (``destroy_maped_file_interval_forcibly``);
    units are in trailing comments. ``from_properties`` accepts broker.conf camelCase keys and
    returns the keys it did not know so the broker can warn about them. ``inject_put_delay_millis``
    is finchmq's own chaos knob: every append holds the put lock that many ms longer.
    Disk ratios are fractions (RocketMQ 4.9's ``diskSpaceWarningLevelRatio`` system property is
    ``0.90``); ``from_properties`` also accepts 5.x's percent form (``90``).
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from finchmq.common.settings import SettingsError, camel_to_snake, config_from_properties
from finchmq.protocol.topics import SCHEDULE_TOPIC

__all__ = [
    "CQ_STORE_UNIT_SIZE",
    "SCHEDULE_TOPIC",
    "BrokerRole",
    "FlushDiskType",
    "MessageStoreConfig",
    "parse_delay_levels",
]

CQ_STORE_UNIT_SIZE: Final = 20  # RocketMQ ConsumeQueue.CQ_STORE_UNIT_SIZE

_UNITS_MS: Final = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


class FlushDiskType(enum.Enum):
    """RocketMQ ``FlushDiskType``."""

    SYNC_FLUSH = "SYNC_FLUSH"
    ASYNC_FLUSH = "ASYNC_FLUSH"


class BrokerRole(enum.Enum):
    """RocketMQ ``BrokerRole``; the store refuses puts on a SLAVE."""

    ASYNC_MASTER = "ASYNC_MASTER"
    SYNC_MASTER = "SYNC_MASTER"
    SLAVE = "SLAVE"


def parse_delay_levels(text: str) -> tuple[int, ...]:
    """``"1s 5s 1m 2h"`` -> delay in ms per level (index 0 is level 1), as ScheduleMessageService.

    Raises ``ValueError`` naming the bad item.
    """
    levels: list[int] = []
    for item in text.split():
        unit = _UNITS_MS.get(item[-1:])
        if unit is None or not item[:-1].isdigit():
            raise ValueError(f"message_delay_level item {item!r} is not <number><s|m|h|d>")
        levels.append(int(item[:-1]) * unit)
    if not levels:
        raise ValueError(f"message_delay_level {text!r} has no level")
    return tuple(levels)


def _default_root() -> Path:
    return Path.home() / "store"


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageStoreConfig:
    """RocketMQ ``MessageStoreConfig`` (4.9.x), the parts finchmq implements."""

    store_path_root_dir: Path = dataclasses.field(default_factory=_default_root)
    store_path_commit_log: Path | None = None  # None: <store_path_root_dir>/commitlog
    mapped_file_size_commit_log: int = 1024 * 1024 * 1024  # bytes
    mapped_file_size_consume_queue: int = 300_000 * CQ_STORE_UNIT_SIZE  # bytes, rounded up to 20
    flush_interval_commit_log: int = 500  # ms
    commit_interval_commit_log: int = 200  # ms, transient store pool only
    flush_interval_consume_queue: int = 1000  # ms
    clean_resource_interval: int = 10_000  # ms; also the disk-usage check period
    delete_commit_log_files_interval: int = 100  # ms between two file deletions
    delete_consume_queue_files_interval: int = 100  # ms
    destroy_maped_file_interval_forcibly: int = 120_000  # ms
    delete_when: str = "04"  # hours of day, ';'-separated
    disk_max_used_space_ratio: int = 75  # percent; Java clamps to 10..95
    file_reserved_time: int = 72  # hours
    max_message_size: int = 4 * 1024 * 1024  # bytes, one stored record
    check_crc_on_recover: bool = True
    flush_commit_log_least_pages: int = 4
    commit_commit_log_least_pages: int = 4
    flush_consume_queue_least_pages: int = 2
    flush_commit_log_thorough_interval: int = 10_000  # ms
    commit_commit_log_thorough_interval: int = 200  # ms
    flush_consume_queue_thorough_interval: int = 60_000  # ms
    max_transfer_bytes_on_message_in_memory: int = 256 * 1024  # bytes
    max_transfer_count_on_message_in_memory: int = 32
    max_transfer_bytes_on_message_in_disk: int = 64 * 1024  # bytes
    max_transfer_count_on_message_in_disk: int = 8
    access_message_in_memory_max_ratio: int = 40  # percent of physical memory
    message_index_enable: bool = True
    max_hash_slot_num: int = 5_000_000
    max_index_num: int = 5_000_000 * 4
    max_msgs_num_batch: int = 64  # max results of one index query
    message_index_safe: bool = False
    broker_role: BrokerRole = BrokerRole.ASYNC_MASTER
    flush_disk_type: FlushDiskType = FlushDiskType.ASYNC_FLUSH
    sync_flush_timeout: int = 5000  # ms
    # master/slave replication (Java HAService); the broker sets ha_listen_port to listenPort + 1
    ha_listen_port: int = 10912
    ha_send_heartbeat_interval: int = 5000  # ms between offset reports / master heartbeats
    ha_housekeeping_interval: int = 20_000  # ms without a byte before an HA connection is dropped
    ha_transfer_batch_size: int = 32 * 1024  # bytes of commit log per transfer
    ha_master_address: str | None = None  # slave: fixed master HA address, else learnt from name servers
    ha_slave_fallbehind_max: int = 256 * 1024 * 1024  # bytes a slave may lag and still count as in sync
    slave_timeout: int = 3000  # ms a SYNC_MASTER send waits for the slave (Java slaveTimeout)
    message_delay_level: str = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
    clean_file_forcibly_enable: bool = True
    offset_check_in_slave: bool = False
    os_page_cache_busy_time_out_mills: int = 1000  # ms
    default_query_max_num: int = 32
    transient_store_pool_enable: bool = False
    transient_store_pool_size: int = 5  # buffers of mapped_file_size_commit_log bytes
    fast_fail_if_no_buffer_in_store_pool: bool = False
    disk_space_warning_level_ratio: float = 0.90  # fraction; above it puts are refused (disk full)
    disk_space_clean_forcibly_ratio: float = 0.85  # fraction; above it files are deleted early
    inject_put_delay_millis: int = 0  # ms; finchmq chaos knob: extra time holding the put lock
    # 5.x timer messages (TIMER_DELIVER_MS / TIMER_DELAY_SEC / TIMER_DELAY_MS; store/timer/)
    timer_wheel_enable: bool = True
    mapped_file_size_timer_log: int = 100 * 1024 * 1024  # bytes
    timer_precision_ms: int = 1000  # ms; as Java's setter: 100, 200, 500 or 1000 (rounded down)
    timer_roll_window_slot: int = 3600 * 24 * 2  # slots; longer delays roll through the wheel
    timer_flush_interval_ms: int = 1000  # ms
    timer_get_message_thread_num: int = 3
    timer_put_message_thread_num: int = 3
    timer_enable_disruptor: bool = False  # accepted; the queues are Python's
    timer_enable_check_metrics: bool = True  # accepted; the periodic recount is not done
    timer_intercept_delay_level: bool = False  # accepted; unused, as in Java
    timer_max_delay_sec: int = 3600 * 24 * 3  # s; a later delivery is refused (MESSAGE_ILLEGAL)
    timer_stop_enqueue: bool = False
    timer_check_metrics_when: str = "05"
    timer_skip_unknown_error: bool = False
    timer_warm_enable: bool = False  # accepted; Java's warm-up is disabled code
    timer_stop_dequeue: bool = False
    timer_enable_retry_until_success: bool = False
    timer_congest_num_each_slot: int = 2**31 - 1  # timers per slot before sends are refused
    timer_metric_small_threshold: int = 1_000_000
    timer_progress_log_interval_ms: int = 10_000  # ms

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                continue
            if value < 0:
                raise ValueError(f"{f.name} must be >= 0, got {value!r}")
        for name in (
            "mapped_file_size_commit_log",
            "mapped_file_size_consume_queue",
            "max_message_size",
            "flush_interval_commit_log",
            "commit_interval_commit_log",
            "flush_interval_consume_queue",
            "clean_resource_interval",
            "max_hash_slot_num",
            "max_index_num",
            "max_transfer_count_on_message_in_memory",
            "max_transfer_count_on_message_in_disk",
            "transient_store_pool_size",
            "max_msgs_num_batch",
            "ha_send_heartbeat_interval",
            "ha_housekeeping_interval",
            "ha_transfer_batch_size",
            "slave_timeout",
            "mapped_file_size_timer_log",
            "timer_flush_interval_ms",
            "timer_progress_log_interval_ms",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)!r}")
        if self.mapped_file_size_commit_log < 4096:
            raise ValueError(
                f"mapped_file_size_commit_log must be >= 4096, got {self.mapped_file_size_commit_log!r}"
            )
        if self.mapped_file_size_commit_log >= 2**31:
            raise ValueError(
                "mapped_file_size_commit_log must be < 2 GiB (Java int positions), "
                f"got {self.mapped_file_size_commit_log!r}"
            )
        for name in ("disk_space_warning_level_ratio", "disk_space_clean_forcibly_ratio"):
            ratio = getattr(self, name)
            if not 0 < ratio <= 1:
                raise ValueError(f"{name} must be a fraction in (0, 1], got {ratio!r}")
        if not 0 <= self.access_message_in_memory_max_ratio <= 100:
            raise ValueError(
                "access_message_in_memory_max_ratio must be in 0..100, "
                f"got {self.access_message_in_memory_max_ratio!r}"
            )
        parse_delay_levels(self.message_delay_level)
        # Java's setTimerPrecisionMs: the largest of 100, 200, 500, 1000 not above the value
        precision = max((c for c in _TIMER_PRECISIONS if c <= self.timer_precision_ms), default=100)
        object.__setattr__(self, "timer_precision_ms", precision)
        if self.mapped_file_size_timer_log < 1024:
            raise ValueError(
                f"mapped_file_size_timer_log must be >= 1024, got {self.mapped_file_size_timer_log!r}"
            )
        for hour in self.delete_when.split(";"):
            if not (hour.strip().isdigit() and 0 <= int(hour) <= 23):
                raise ValueError(f"delete_when must be ';'-separated hours 00..23, got {self.delete_when!r}")

    # Derived values (Java getters that compute)

    @property
    def commit_log_dir(self) -> Path:
        return self.store_path_commit_log or self.store_path_root_dir / "commitlog"

    @property
    def consume_queue_dir(self) -> Path:
        return self.store_path_root_dir / "consumequeue"

    @property
    def index_dir(self) -> Path:
        return self.store_path_root_dir / "index"

    @property
    def checkpoint_path(self) -> Path:
        return self.store_path_root_dir / "checkpoint"

    @property
    def abort_path(self) -> Path:
        return self.store_path_root_dir / "abort"

    @property
    def lock_path(self) -> Path:
        return self.store_path_root_dir / "lock"

    @property
    def timer_wheel_path(self) -> Path:
        return self.store_path_root_dir / "timerwheel"

    @property
    def timer_log_dir(self) -> Path:
        return self.store_path_root_dir / "timerlog"

    @property
    def timer_check_path(self) -> Path:
        """Java ``BrokerPathConfigHelper.getTimerCheckPath``: ``config/timercheck``."""
        return self.store_path_root_dir / "config" / "timercheck"

    @property
    def timer_metrics_path(self) -> Path:
        return self.store_path_root_dir / "config" / "timermetrics"

    @property
    def consume_queue_file_size(self) -> int:
        """``mapped_file_size_consume_queue`` rounded up to whole 20-byte units (Java getter)."""
        units = -(-self.mapped_file_size_consume_queue // CQ_STORE_UNIT_SIZE)
        return units * CQ_STORE_UNIT_SIZE

    @property
    def disk_max_used_space_fraction(self) -> float:
        """``disk_max_used_space_ratio`` clamped to 10..95 as Java's getter, as a fraction."""
        return min(max(self.disk_max_used_space_ratio, 10), 95) / 100

    @property
    def delay_levels_ms(self) -> tuple[int, ...]:
        return parse_delay_levels(self.message_delay_level)

    @property
    def transient_store_pool_active(self) -> bool:
        """Java ``isTransientStorePoolEnable``: enabled, ASYNC_FLUSH and not a slave."""
        return (
            self.transient_store_pool_enable
            and self.flush_disk_type is FlushDiskType.ASYNC_FLUSH
            and self.broker_role is not BrokerRole.SLAVE
        )

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> tuple[MessageStoreConfig, dict[str, str]]:
        """Build from broker.conf keys (camelCase, e.g. ``mappedFileSizeCommitLog``).

        Returns ``(config, unknown)``: the keys that are not store settings, untouched, so the
        caller can hand them to another component or warn. Raises ``ValueError`` (a
        ``SettingsError``) naming the key for a value that does not parse or validate.
        """
        return cls().with_properties(props)

    def with_properties(self, props: dict[str, str]) -> tuple[MessageStoreConfig, dict[str, str]]:
        """This config with broker.conf ``props`` applied; see ``from_properties``."""
        fields = {f.name for f in dataclasses.fields(self)}
        renamed: dict[str, str] = {}
        for key, raw in props.items():
            name = _ALIASES.get(key, key)
            value = raw
            if camel_to_snake(name) in _FRACTIONS:
                # 5.x writes the disk ratios as percents ("90"); 4.x as fractions ("0.90").
                try:
                    number: float | None = float(raw)
                except ValueError:
                    number = None
                if number is not None and number > 1:
                    value = str(number / 100)
            renamed[name if camel_to_snake(name) in fields or name in fields else key] = value
        try:
            return config_from_properties(self, renamed)
        except SettingsError as exc:
            message = str(exc)
            for original, alias in _ALIASES.items():
                if original in props:
                    message = message.replace(f"for {alias}:", f"for {original}:")
            raise SettingsError(message) from None


_TIMER_PRECISIONS: Final = (100, 200, 500, 1000)  # ms, Java setTimerPrecisionMs's candidates
_FRACTIONS: Final = frozenset({"disk_space_warning_level_ratio", "disk_space_clean_forcibly_ratio"})

# Java names whose snake_case differs from ours (Java 4.x spells "maped").
_ALIASES: Final = {
    "mapedFileSizeCommitLog": "mappedFileSizeCommitLog",
    "mapedFileSizeConsumeQueue": "mappedFileSizeConsumeQueue",
    "checkCRCOnRecover": "check_crc_on_recover",
}
