"""The console in a real browser (Debian's chromium, driven by Playwright) against a live
``finchmq server``: each page loads, and a user can create a topic, send a message, find it by
key and read it, reset a group's offset and see the lag change, and resend a dead letter.
Skipped, with the reason, where chromium or Playwright is missing."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any, TypeVar

import pytest

from tests.waiting import DEFAULT_TIMEOUT, wait_until

from .conftest import CHROMIUM, Cluster, ConsumedGroup, DeadLetter

try:
    from playwright.sync_api import Browser, Page, expect, sync_playwright
except ImportError:  # pragma: no cover - the dev extra installs it
    sync_playwright = None  # type: ignore[assignment]

# Every wait of the page and every expect(...) assertion (Playwright's own default is 5 s)
TIMEOUT_MS = int(DEFAULT_TIMEOUT * 1000)
_T = TypeVar("_T")


def off_loop(fn: Callable[..., _T], *args: Any) -> _T:
    """Run ``fn`` in another thread: Playwright's sync API keeps an event loop running in this
    one, where finchmq's blocking clients refuse to run."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(fn, *args).result()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One headless chromium for the module."""
    if sync_playwright is None:
        pytest.skip("the playwright package is missing (pip install -e '.[dev]')")
    if not CHROMIUM.exists():
        pytest.skip(
            f"{CHROMIUM} is missing: run 'make chromium' (apt-get install chromium) for the browser tests"
        )
    expect.set_options(timeout=TIMEOUT_MS)
    with sync_playwright() as pw:
        launched = pw.chromium.launch(executable_path=str(CHROMIUM))
        yield launched
        launched.close()


def checked_page(browser: Browser) -> Iterator[Page]:
    """A fresh browser context's page for one test; fails the test if the page's script threw."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    opened.set_default_timeout(TIMEOUT_MS)
    script_errors: list[Any] = []
    opened.on("pageerror", lambda error: script_errors.append(error))  # noqa: PLW0108  (Playwright wants a function)
    yield opened
    context.close()
    assert not script_errors, f"the page's script failed: {script_errors}"


@pytest.fixture
def page(browser: Browser, cluster: Cluster) -> Iterator[Page]:
    yield from checked_page(browser)


def visit(page: Page, cluster: Cluster, hash_path: str) -> None:
    """Open a page of the console and wait until it has loaded its data."""
    page.goto(cluster.url + hash_path)
    page.wait_for_function("document.body.dataset.loaded", timeout=TIMEOUT_MS)


def test_every_page_loads(page: Page, cluster: Cluster) -> None:
    visit(page, cluster, "")
    broker_addr = f"127.0.0.1:{cluster.server.broker_port}"
    expect(page.locator("main table:not(.u-legend)")).to_contain_text(broker_addr)
    expect(page.locator("#tps-chart")).to_be_visible()
    expect(page.locator("main thead").first).to_contain_text("Timers (pending)")
    expect(page.locator(".timer-pending")).to_have_text(re.compile(r"^[\d,]+$"))  # a count, not "-"
    for link, heading in (("Topics", "Topics"), ("Consumers", "Consumer groups"), ("Producers", "Producers"),
                          ("Messages", "Messages"), ("Dead letters", "Dead letters"), ("ACL", "ACL"),
                          ("Cluster", "Cluster")):  # fmt: skip
        page.click(f"nav >> text={link}")
        expect(page.locator("main h1")).to_have_text(heading)
        expect(page.locator("nav a.active")).to_have_text(link)
        page.wait_for_function("document.body.dataset.loaded")
        expect(page.locator("#error")).to_be_hidden()


def test_create_topic_send_find_by_key_and_read_it(page: Page, cluster: Cluster, name: str) -> None:
    visit(page, cluster, "#/topics")
    page.fill("#topic-name", name)
    page.fill("#topic-read", "2")
    page.fill("#topic-write", "2")
    page.click("#topic-submit")
    expect(page.locator(".result")).to_contain_text(
        f"Created {name} on 127.0.0.1:{cluster.server.broker_port}"
    )

    page.click(f".result >> text={name}")
    expect(page.locator("main h1")).to_have_text(f"Topic {name}")
    expect(page.locator("main")).to_contain_text("Status: 0 messages stored")
    page.fill("#send-tags", "TagB")
    page.fill("#send-keys", f"key-{name}")
    page.fill("#send-body", "hello from the browser")
    page.check("#send-trace")
    page.click("#send-submit")
    expect(page.locator("#send-result")).to_contain_text("SEND_OK")

    visit(page, cluster, f"#/messages?by=key&topic={name}&key=key-{name}")
    rows = page.locator("#msg-results tbody tr")

    def found() -> bool:  # the key index is written just after the send: search again until then
        if rows.count() == 0:
            page.click("#msg-search")
            page.wait_for_selector("#msg-results > *")
        return rows.count() == 1

    wait_until(found, what="the message by key")
    expect(rows).to_contain_text("TagB")
    rows.locator("a").click()
    expect(page.locator("#msg-body")).to_have_text("hello from the browser")
    properties = page.locator("section:has(h2:text('Properties'))")
    expect(properties).to_contain_text(f"key-{name}")
    expect(properties).to_contain_text("UNIQ_KEY")

    def traced() -> bool:  # trace records are sent in batches after the message
        section = page.locator("section:has(h2:text('Trace'))")
        if "SELF_TEST_P_GROUP" in section.inner_text():
            return True
        page.reload()
        page.wait_for_function("document.body.dataset.loaded")
        return False

    wait_until(traced, what="the send's trace record")
    expect(page.locator("section:has(h2:text('Trace')) tbody tr").first).to_contain_text("Pub")


def test_reset_offset_by_time_changes_the_lag(page: Page, cluster: Cluster, name: str) -> None:
    consumed = off_loop(ConsumedGroup, cluster, name, 5)
    visit(page, cluster, f"#/group/{consumed.group}")
    expect(page.locator("#lag-total")).to_have_text("0")
    expect(page.locator("#connection-error")).to_contain_text("not online")
    expect(page.locator("#request-modes")).to_contain_text("no mode set")
    page.fill("#reset-topic", name)
    page.fill("#reset-time", datetime.fromtimestamp(consumed.before / 1000).strftime("%Y-%m-%dT%H:%M:%S"))
    page.click("#reset-submit")
    expect(page.locator("#reset-result")).to_contain_text(f"Reset {consumed.group} on {name}")
    expect(page.locator("#lag-total")).to_have_text("5")
    expect(page.locator("#lag tbody")).to_contain_text(name)


def test_resend_a_dead_letter(page: Page, cluster: Cluster, name: str) -> None:
    dead = off_loop(DeadLetter, cluster, name)
    try:
        visit(page, cluster, f"#/dlq?group={dead.group}")
        row = page.locator("#dlq-results tbody tr")
        expect(row).to_have_count(1)
        expect(row).to_contain_text(dead.letter["msgId"])
        expect(row).to_contain_text(name)  # the original topic
        dead.healed.set()
        row.locator("button", has_text="Resend").click()
        expect(row.locator(".resend-result")).to_contain_text(
            f"CR_SUCCESS by {dead.consumer.consumer.client_id}"
        )
        assert ("%DLQ%" + dead.group, "poison") in dead.calls
    finally:
        off_loop(dead.consumer.shutdown)


def test_cluster_errors_are_shown(page: Page, cluster: Cluster, name: str) -> None:
    visit(page, cluster, f"#/topic/{name}")
    expect(page.locator("#error")).to_be_visible()
    expect(page.locator("#error-text")).to_contain_text(
        f"No route info of this topic: {name} [TOPIC_NOT_EXIST]"
    )
    visit(page, cluster, "#/topics")
    expect(page.locator("#error")).to_be_hidden()
    page.fill("#topic-name", "no spaces allowed")
    page.click("#topic-submit")
    expect(page.locator("#error-text")).to_contain_text("illegal characters")
    page.click("#error-close")
    expect(page.locator("#error")).to_be_hidden()
