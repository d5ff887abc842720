"""The console's login in a real browser (Debian's chromium, driven by Playwright) against a
``finchmq console`` with accounts: logging in (after a wrong password), seeing the pages, logging
out; a read-only user sees the pages without the buttons that change something, and the server
refuses the change when the page's script is bypassed."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .conftest import ADMIN_USER, READ_ONLY_USER, Cluster, ConsoleProcess
from .test_browser import browser as browser  # noqa: PLC0414  (the module's chromium fixture)
from .test_browser import checked_page, off_loop

pytest.importorskip(
    "playwright.sync_api", reason="the playwright package is missing (pip install -e '.[dev]')"
)
from playwright.sync_api import Browser, Page, expect


@pytest.fixture
def page(browser: Browser, login_console: ConsoleProcess) -> Iterator[Page]:
    yield from checked_page(browser)


def log_in(page: Page, user: str, password: str) -> None:
    page.fill("#login-user", user)
    page.fill("#login-password", password)
    page.click("#login-submit")


def test_log_in_see_the_pages_log_out(page: Page, login_console: ConsoleProcess) -> None:
    page.goto(login_console.url + "#/topics")
    expect(page.locator("#login-submit")).to_be_visible()
    log_in(page, ADMIN_USER[0], "not-the-password")
    expect(page.locator("#login-error")).to_have_text("Wrong user name or password.")
    log_in(page, ADMIN_USER[0], ADMIN_USER[1])
    page.wait_for_function("document.body.dataset.loaded")
    expect(page.locator("main h1")).to_have_text("Cluster")
    expect(page.locator("#user")).to_have_text("alice")
    expect(page.locator("#read-only")).to_have_count(0)
    page.click("nav >> text=Topics")
    expect(page.locator("#topic-submit")).to_be_visible()  # an admin may create topics
    page.click("#logout")
    expect(page.locator("#login-submit")).to_be_visible()
    page.goto(login_console.url + "#/cluster")
    expect(page.locator("#login-submit")).to_be_visible()  # the session is gone


def test_an_expired_session_returns_to_the_login_page_and_back(
    page: Page, login_console: ConsoleProcess
) -> None:
    page.goto(login_console.url)
    log_in(page, ADMIN_USER[0], ADMIN_USER[1])
    page.wait_for_function("document.body.dataset.loaded")
    page.context.clear_cookies()  # as if the session had ended
    page.click("nav >> text=Consumers")  # the page's next request is refused: back to the login
    expect(page).to_have_url(login_console.url + "login?next=%2F%23%2Fgroups")
    log_in(page, ADMIN_USER[0], ADMIN_USER[1])
    expect(page).to_have_url(login_console.url + "#/groups")  # where the user was
    expect(page.locator("main h1")).to_have_text("Consumer groups")


def test_read_only_user_has_no_buttons_that_change(
    page: Page, login_console: ConsoleProcess, cluster: Cluster, name: str
) -> None:
    off_loop(cluster.create_topic, name, 1)
    page.goto(login_console.url)
    log_in(page, READ_ONLY_USER[0], READ_ONLY_USER[1])
    page.wait_for_function("document.body.dataset.loaded")
    expect(page.locator("#read-only")).to_be_visible()
    page.goto(login_console.url + "#/topics")
    page.wait_for_function("document.body.dataset.loaded")
    expect(page.locator("main")).to_contain_text(name)  # sees everything
    expect(page.locator("#topic-submit")).to_have_count(0)
    page.goto(login_console.url + f"#/topic/{name}")
    page.wait_for_function("document.body.dataset.loaded")
    expect(page.locator("main h1")).to_have_text(f"Topic {name}")
    for button in ("#topic-delete", "#topic-submit", "#send-submit"):
        expect(page.locator(button)).to_have_count(0)
    page.goto(login_console.url + "#/group/G_anything")
    page.wait_for_function("document.body.dataset.loaded")
    expect(page.locator("#reset-submit")).to_have_count(0)
    status = page.evaluate(
        """async (topic) => {
            const me = await (await fetch("/api/session")).json();
            const r = await fetch(`/api/topics/${topic}`, { method: "DELETE", body: "{}",
                headers: { "Content-Type": "application/json", "X-CSRF-Token": me.csrfToken } });
            return [r.status, (await r.json()).error];
        }""",
        name,
    )
    assert status == [403, "refused: bob is a read-only account"]
    page.goto(login_console.url + f"#/topic/{name}")
    page.wait_for_function("document.body.dataset.loaded")
    expect(page.locator("#error")).to_be_hidden()  # the topic is still there
