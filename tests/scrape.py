"""Scraping a Prometheus endpoint in tests: raw HTTP over a real socket, and a strict parse of
the text format (prometheus_client's parser; every family typed, none written twice)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from prometheus_client.parser import text_string_to_metric_families

from tests import waiting

Samples = dict[str, list[tuple[dict[str, str], float]]]


async def http(port: int, raw: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send ``raw`` on a new connection; the status, headers and body of the first answer."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(raw)
        await writer.drain()
        return await read_answer(reader)
    finally:
        writer.close()
        await writer.wait_closed()


async def read_answer(
    reader: asyncio.StreamReader, *, head_only: bool = False
) -> tuple[int, dict[str, str], bytes]:
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), waiting.DEFAULT_TIMEOUT)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {
        k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)
    }
    length = 0 if head_only else int(headers["content-length"])
    body = await asyncio.wait_for(reader.readexactly(length), waiting.DEFAULT_TIMEOUT)
    return status, headers, body


async def scrape(port: int) -> Samples:
    """GET /metrics, parsed strictly: every sample with its labels, by sample name."""
    status, headers, body = await http(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert status == 200 and headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    samples: Samples = {}
    families = list(text_string_to_metric_families(body.decode()))
    assert all(f.type in ("counter", "gauge", "histogram") for f in families), [
        (f.name, f.type) for f in families if f.type not in ("counter", "gauge", "histogram")
    ]
    names = [f.name for f in families]
    assert len(names) == len(set(names)), "a family is written twice"
    for family in families:
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((dict(sample.labels), float(sample.value)))
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    """The one sample of ``name`` whose labels include ``labels`` (0 when there is none)."""
    found = [v for sample_labels, v in samples.get(name, []) if labels.items() <= sample_labels.items()]
    assert len(found) <= 1, (name, labels, found)
    return found[0] if found else 0.0


async def eventually(
    predicate: Callable[[Samples], object], port: int, timeout: float = waiting.DEFAULT_TIMEOUT
) -> Samples:
    """Scrape until ``predicate(samples)`` holds; the last scrape (fails with it on timeout)."""
    last: Samples = {}

    async def scraped() -> Samples | None:
        nonlocal last
        last = await scrape(port)
        return last if predicate(last) else None

    try:
        return await waiting.eventually(scraped, timeout, "the scraped samples to match")
    except waiting.ConditionTimeout as exc:
        raise waiting.ConditionTimeout(f"{exc}; last scrape has {sorted(last)}") from None
