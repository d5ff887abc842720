"""The console's operator pages in a real browser (Debian's chromium, driven by Playwright)
against a live ``finchmq server``: a producer group's online producers, and a consumer group
created, updated and deleted from its forms. Skipped, with the reason, where chromium or
Playwright is missing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from finchmq.client import BlockingAdminClient, BlockingProducer, Message, MQClientError
from tests.waiting import wait_until

from .conftest import ADMIN_USER, Cluster, ConsoleProcess, WebClient
from .test_browser import browser as browser  # noqa: PLC0414  (the module's chromium fixture)
from .test_browser import checked_page, off_loop, visit
from .test_browser_login import log_in

pytest.importorskip(
    "playwright.sync_api", reason="the playwright package is missing (pip install -e '.[dev]')"
)
from playwright.sync_api import Browser, Page, expect


@pytest.fixture
def page(browser: Browser, cluster: Cluster) -> Iterator[Page]:
    yield from checked_page(browser)


def test_producers_page_lists_a_groups_producers(page: Page, cluster: Cluster, name: str) -> None:
    off_loop(cluster.create_topic, name, 1)
    group = f"PG_{name}"
    producer = off_loop(lambda: BlockingProducer(group, namesrv_addr=cluster.namesrv).__enter__())
    try:
        off_loop(producer.send, Message.create(name, b"hello"))
        # the broker knows a producer from its heartbeat, which may come after the first send
        off_loop(
            lambda: wait_until(
                lambda: producer_registered(cluster, group, name), what="the producer's heartbeat"
            )
        )
        visit(page, cluster, "#/producers")
        expect(page.locator("main h1")).to_have_text("Producers")
        expect(page.locator("nav a.active")).to_have_text("Producers")
        page.fill("#producer-topic", name)
        page.fill("#producer-group", group)
        page.click("#producer-search")
        row = page.locator("#producer-results tbody tr")
        expect(row).to_have_count(1)
        expect(row).to_contain_text(producer.producer.instance.client_id)
        expect(row).to_contain_text("PYTHON")
        page.fill("#producer-group", f"{group}_none")
        page.click("#producer-search")
        expect(page.locator("#producer-none")).to_contain_text("not exist")
    finally:
        off_loop(producer.__exit__, None, None, None)


def producer_registered(cluster: Cluster, group: str, topic: str) -> bool:
    """Whether a broker of the cluster lists a producer of ``group`` (a missing group raises)."""
    with BlockingAdminClient(namesrv_addr=cluster.namesrv) as admin:
        try:
            return bool(admin.producer_connection(group, topic).connection_set)
        except MQClientError:
            return False


def group_config(cluster: Cluster, group: str) -> object:
    def read() -> object:
        with BlockingAdminClient(namesrv_addr=cluster.namesrv) as admin:
            return admin.subscription_groups().get(group)

    return off_loop(read)


def test_create_update_delete_a_consumer_group(page: Page, cluster: Cluster, name: str) -> None:
    group = f"G_{name}"
    visit(page, cluster, "#/groups")
    page.fill("#group-name", group)
    page.fill("#group-retryMaxTimes", "5")
    page.uncheck("#group-consumeBroadcastEnable")
    page.click("#group-submit")
    expect(page.locator("#group-result")).to_contain_text(
        f"Created {group} on 127.0.0.1:{cluster.server.broker_port}"
    )
    config = group_config(cluster, group)
    assert config is not None
    assert (config.retry_max_times, config.consume_broadcast_enable) == (5, False)  # type: ignore[attr-defined]

    page.click(f"#group-result >> text={group}")
    expect(page.locator("main h1")).to_have_text(f"Consumer group {group}")
    expect(page.locator("#group-retryMaxTimes")).to_have_value("5")  # the form shows the settings
    expect(page.locator("#group-consumeBroadcastEnable")).not_to_be_checked()
    page.fill("#group-retryQueueNums", "2")
    page.uncheck("#group-consumeEnable")
    page.click("#group-submit")
    expect(page.locator("#group-result")).to_contain_text(f"Updated {group}")
    config = group_config(cluster, group)
    assert (config.retry_queue_nums, config.consume_enable, config.retry_max_times) == (2, False, 5)  # type: ignore[attr-defined]

    page.fill("#group-retryQueueNums", "-3")
    page.click("#group-submit")
    expect(page.locator("#error-text")).to_contain_text("retryQueueNums must be between 0 and 1024, not -3")
    page.click("#error-close")

    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#group-delete")
    expect(page.locator("main h1")).to_have_text("Consumer groups")
    assert group_config(cluster, group) is None


def test_the_charts_show_the_samples_taken_before_a_restart(
    page: Page, cluster: Cluster, users_file: Path, tmp_path: Path
) -> None:
    options = ("--data-dir", str(tmp_path / "samples"), "--sample-interval", "0.5")

    def first_run() -> list[float]:
        with ConsoleProcess(cluster.namesrv, users_file, tmp_path / "a", *options) as first:
            client = WebClient(first.url)
            assert client.login(ADMIN_USER[0], ADMIN_USER[1])[0] == 303
            return wait_until(
                lambda: len(t := client.call("GET", "/api/series/brokers")[1]["time"]) >= 3 and t,
                what="three samples",
            )

    before = off_loop(first_run)
    with ConsoleProcess(cluster.namesrv, users_file, tmp_path / "b", *options) as second:
        page.goto(second.url)
        log_in(page, ADMIN_USER[0], ADMIN_USER[1])
        page.wait_for_function("document.body.dataset.loaded")
        chart = page.locator("#tps-chart")
        expect(chart.locator(".uplot")).to_be_visible()  # drawn at once, not "collecting samples"
        assert float(chart.get_attribute("data-first") or "nan") == before[0]
        assert int(chart.get_attribute("data-points") or "0") >= len(before)
