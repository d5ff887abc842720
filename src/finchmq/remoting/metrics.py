"""``RpcMetrics``: Java 5.x's ``rocketmq_rpc_latency`` histogram for a server's requests.

Labels as Java's ``RemotingMetricsManager``/``NettyRemotingAbstract.writeResponse``:
``protocol_type`` (remoting), ``request_code`` and ``response_code`` (the code's name in lower
case, or the number when it has none), ``is_long_polling`` and ``result`` (success, oneway,
write_channel_failed); milliseconds from arrival to the answer, in Java's buckets. ``attach``
hooks every executor of a dispatcher; a request answered later reports itself through
``observe``. Per request: one clock read, a dict look-up and a bisect.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Mapping

from finchmq.common.metrics import Exposition, Histogram
from finchmq.protocol.codes import RequestCode, ResponseCode
from finchmq.protocol.command import RemotingCommand

from .processor import QueuedRequest, RequestDispatcher

__all__ = ["RPC_LATENCY_BUCKETS", "RpcMetrics"]

RPC_LATENCY_BUCKETS = (1.0, 3.0, 5.0, 7.0, 10.0, 100.0, 1000.0, 2000.0, 3000.0)  # ms, Java's view

_RPC_LATENCY = "rocketmq_rpc_latency"


def _names(codes: type[RequestCode] | type[ResponseCode]) -> dict[int, str]:
    return {int(code): code.name.lower() for code in codes}


_REQUEST_NAMES = _names(RequestCode)
_RESPONSE_NAMES = _names(ResponseCode)


class RpcMetrics:
    """Request latency by (request code, response code, long polling, result)."""

    def __init__(self) -> None:
        # (request code, response code or -1, long polling, result) -> histogram; codes are
        # named only when scraped, so a request costs a clock read, a dict look-up and a bisect
        self.latency: dict[tuple[int, int, bool, str], Histogram] = {}

    def attach(self, dispatcher: RequestDispatcher) -> None:
        """Report every request the dispatcher's executors answer."""
        for executor in dispatcher.executors.values():
            executor.on_done = self.on_done

    def on_done(self, item: QueuedRequest, response: RemotingCommand | None, result: str) -> None:
        held = item.held_since
        elapsed_ms = (time.monotonic() - (held or item.created_at)) * 1000
        key = (item.request.code, response.code if response is not None else -1, held > 0, result)
        histogram = self.latency.get(key)
        if histogram is None:
            histogram = self.latency[key] = Histogram(RPC_LATENCY_BUCKETS)
        histogram.counts[bisect_left(RPC_LATENCY_BUCKETS, elapsed_ms)] += 1  # Histogram.observe, inlined
        histogram.sum += elapsed_ms

    def observe(
        self, request_code: int, response_code: int | None, began: float, long_polling: bool, result: str
    ) -> None:
        """One request answered outside an executor; ``began`` is its monotonic arrival time."""
        key = (request_code, -1 if response_code is None else response_code, long_polling, result)
        histogram = self.latency.get(key)
        if histogram is None:
            histogram = self.latency[key] = Histogram(RPC_LATENCY_BUCKETS)
        histogram.observe((time.monotonic() - began) * 1000)

    def write(self, out: Exposition, common: Mapping[str, str]) -> None:
        help_text = "Rpc latency (milliseconds)"
        out.declare(_RPC_LATENCY, "histogram", help_text)
        out.histograms(
            _RPC_LATENCY,
            help_text,
            (
                (
                    {
                        **common,
                        "protocol_type": "remoting",
                        "request_code": _REQUEST_NAMES.get(request) or str(request),
                        "response_code": ""
                        if response < 0
                        else (_RESPONSE_NAMES.get(response) or str(response)),
                        "is_long_polling": "true" if long_polling else "false",
                        "result": result,
                    },
                    histogram,
                )
                for (request, response, long_polling, result), histogram in list(self.latency.items())
            ),
        )
