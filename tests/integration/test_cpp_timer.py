"""The C++ client (4.x remoting, unmodified) and 5.x timer messages: a message it sends with
``TIMER_DELIVER_MS`` (a user property to it) reaches its push consumer at that time, not before."""

from __future__ import annotations

import time
from typing import Any

from finchmq.testing import EmbeddedServer

from .conftest import body, consume, produce


def test_cpp_timer_message_arrives_at_its_time_not_before(finchmq_server: EmbeddedServer, cpp: Any) -> None:
    namesrv = finchmq_server.namesrv_addr
    topic, group = "Cpp_timer", "cpp_timer_group"
    consumer = consume(cpp, "push", namesrv, topic, group, expect=3, prop_key="TIMER_DELIVER_MS")
    deliver = int(time.time() * 1000) + 4000
    sent = produce(cpp, namesrv, topic, 3, prop=f"TIMER_DELIVER_MS={deliver}", body_prefix="timer-")
    assert [r["status"] for r in sent] == [0, 0, 0]
    records = consumer.wait_for(
        lambda rs: len([r for r in rs if "body" in r]) >= 3 and rs, 120, "three timer messages"
    )
    consumer.stop()
    got = [r for r in records if "body" in r]
    assert sorted(body(r) for r in got) == ["timer-0", "timer-1", "timer-2"]
    for r in got:
        assert r["props"]["TIMER_DELIVER_MS"] == str(deliver)
        assert r["store_timestamp"] >= deliver, "stored in its topic not before its time"
        assert r["t"] * 1000 >= deliver, "consumed not before its time"
