"""The broker's stats items (Java ``StatsItem``): what VIEW_BROKER_STATS_DATA and mqadmin
``statsAll`` read. Sampling times are given explicitly, so nothing here depends on the clock."""

from __future__ import annotations

from finchmq.broker.stats import BrokerStats, StatsItem, StatsSnapshot


def test_a_new_item_is_sampled_at_once_against_a_zero_one_period_back() -> None:
    item = StatsItem()
    item.add(3)
    item.sample(1_000_000)
    assert item.minute() == StatsSnapshot(sum=3, tps=3 * 1000 / 10_000, avgpt=3.0)
    assert item.hour() == StatsSnapshot(sum=3, tps=3 * 1000 / 600_000, avgpt=3.0)
    assert item.day() == StatsSnapshot(sum=3, tps=3 * 1000 / 3_600_000, avgpt=3.0)


def test_series_take_samples_only_when_due_and_keep_javas_window() -> None:
    item = StatsItem()
    item.add(3)
    item.sample(1_000_000)
    item.add(5)
    item.sample(1_005_000)  # no series is due: nothing changes
    assert item.minute().sum == 3
    item.sample(1_010_000)  # the minute series is due
    assert item.minute() == StatsSnapshot(sum=8, tps=8 * 1000 / 20_000, avgpt=4.0)
    assert item.hour().sum == 3 and item.day().sum == 3  # not due for 10 min / 1 h
    for k in range(2, 9):
        item.sample(1_000_000 + 10_000 * k)
    # 7 samples kept (1 minute): all taken after the last put, so the last minute saw nothing
    assert item.minute() == StatsSnapshot(sum=0, tps=0.0, avgpt=0.0)
    item.sample(1_600_000)
    assert item.hour().sum == 8


def test_puts_and_pulls_are_counted_per_topic_and_per_topic_at_group() -> None:
    stats = BrokerStats()
    stats.record_put("T", 2, 100)
    stats.record_put("T", 1, 50)
    stats.record_pull("g", "T", 3, 150)
    stats.record_pull("g", "T", 0, 0)  # an empty pull creates nothing
    put_nums = stats.stats_item("TOPIC_PUT_NUMS", "T")
    put_size = stats.stats_item("TOPIC_PUT_SIZE", "T")
    get_nums = stats.stats_item("GROUP_GET_NUMS", "T@g")
    assert put_nums is not None and (put_nums.value, put_nums.times) == (3, 2)
    assert put_size is not None and put_size.value == 150
    assert get_nums is not None and (get_nums.value, get_nums.times) == (3, 1)
    assert stats.stats_item("GROUP_GET_NUMS", "T@other") is None
