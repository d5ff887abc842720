"""Regenerate the console screenshots in docs/console/*.png.

    PYTHONPATH=src .venv/bin/python docs/console/make_screenshots.py [--seconds 90]

Starts an embedded name server + broker with a console that samples every 2 s, runs a small
shop for a while (orders sent at a varying rate, an "order-service" group that falls behind,
a "billing" group that gives up on one message), then opens each page in Debian's chromium
(Playwright, ``/usr/bin/chromium``) and saves it.
"""

from __future__ import annotations

import argparse
import math
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from playwright.sync_api import Page, sync_playwright

from finchmq.client import (
    BlockingAdminClient,
    BlockingProducer,
    BlockingPushConsumer,
    ConsumeConcurrentlyStatus,
    Message,
    MessageExt,
)
from finchmq.console import Console
from finchmq.testing import EmbeddedServer
from finchmq.testing.process import free_port

OUT = Path(__file__).resolve().parent
TOPIC = "OrderEvents"


def traffic(namesrv: str, seconds: float, stop: threading.Event) -> None:
    """Orders at a rate that rises and falls over the run."""
    with BlockingProducer("order-gateway", namesrv_addr=namesrv, enable_msg_trace=True) as producer:
        began = time.monotonic()
        n = 0
        while not stop.is_set() and time.monotonic() - began < seconds:
            phase = (time.monotonic() - began) / seconds
            rate = 20 + 60 * math.sin(math.pi * phase) ** 2
            n += 1
            body = f'{{"order": {1000 + n}, "item": "finch feeder", "qty": {1 + n % 3}}}'
            producer.send(Message.create(TOPIC, body.encode(), tags="created", keys=f"order-{1000 + n}"))
            time.sleep(1 / rate)


FIXED = threading.Event()  # set before the dead letter is resent: billing then accepts it


def slow_listener(msgs: list[MessageExt], ctx: Any) -> ConsumeConcurrentlyStatus:
    time.sleep(0.025 * len(msgs))  # one thread: about 40 a second, behind at the peak
    return ConsumeConcurrentlyStatus.CONSUME_SUCCESS


def billing_listener(msgs: list[MessageExt], ctx: Any) -> ConsumeConcurrentlyStatus:
    if not FIXED.is_set() and any(m.keys == "order-1013" for m in msgs):
        return ConsumeConcurrentlyStatus.RECONSUME_LATER  # a poison order: to the dead letters
    return ConsumeConcurrentlyStatus.CONSUME_SUCCESS


def shoot(page: Page, url: str, name: str, ready: str) -> None:
    page.goto(url)
    page.wait_for_selector(ready)
    page.wait_for_function("document.body.dataset.loaded !== ''")
    page.wait_for_timeout(300)
    page.screenshot(path=str(OUT / f"{name}.png"), full_page=True)
    print(f"saved docs/console/{name}.png")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=90, help="how long the shop runs first")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as data, EmbeddedServer(Path(data), {"traceTopicEnable": "true"}) as server:
        ns = server.namesrv_addr
        console = Console(ns, port=free_port(), sample_interval=2.0)
        server.call(console.start())
        try:
            with BlockingAdminClient(namesrv_addr=ns) as admin:
                admin.create_topic(TOPIC, read_queue_nums=4, write_queue_nums=4, cluster="DefaultCluster")
                admin.create_topic("PaymentEvents", read_queue_nums=4, write_queue_nums=4, cluster="DefaultCluster")
            shop = BlockingPushConsumer(
                "order-service", namesrv_addr=ns, consume_thread_min=1, consume_thread_max=1, enable_msg_trace=True
            )
            shop.subscribe(TOPIC, "*")
            shop.register_message_listener(slow_listener)
            billing = BlockingPushConsumer("billing", namesrv_addr=ns, max_reconsume_times=0, enable_msg_trace=True)
            billing.subscribe(TOPIC, "created")
            billing.register_message_listener(billing_listener)
            shop.start()
            billing.start()
            stop = threading.Event()
            sender = threading.Thread(target=traffic, args=(ns, args.seconds, stop))
            sender.start()
            sender.join(args.seconds * 0.6)
            # the lag page at its peak, the rest once the shop has caught up
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path="/usr/bin/chromium")
                page = browser.new_page(viewport={"width": 1280, "height": 860})
                shoot(page, console.url + "#/group/order-service", "group", "#lag-chart .u-wrap")
                browser.close()
            sender.join()
            time.sleep(8)  # a few quiet samples at the end
            first_key = "order-1002"
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path="/usr/bin/chromium")
                page = browser.new_page(viewport={"width": 1280, "height": 860})
                base = console.url
                shoot(page, base + "#/cluster", "cluster", "#tps-chart .u-wrap")
                shoot(page, base + "#/topics", "topics", "#topic-list table")
                shoot(page, base + f"#/topic/{TOPIC}", "topic", "#send-submit")
                shoot(page, base + "#/groups", "groups", "#group-list table")
                shoot(page, base + f"#/messages?by=key&topic={TOPIC}&key={first_key}", "messages", "#msg-results table")
                page.click("#msg-results table a")
                page.wait_for_selector("#msg-body")
                page.wait_for_function("document.body.dataset.loaded !== ''")
                page.screenshot(path=str(OUT / "message.png"), full_page=True)
                print("saved docs/console/message.png")
                shoot(page, base + "#/dlq?group=billing", "dlq", "#dlq-results table")
                FIXED.set()
                page.click("#dlq-results button")
                page.wait_for_selector("#dlq-results .actions span span")
                page.screenshot(path=str(OUT / "dlq.png"), full_page=True)
                browser.close()
            stop.set()
            shop.shutdown()
            billing.shutdown()
        finally:
            server.call(console.close())


if __name__ == "__main__":
    main()
