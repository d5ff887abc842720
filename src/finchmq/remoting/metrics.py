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
from collections.abc import Mapping

from finchmq.common.metrics import Exposition, HistogramSet
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
        self.latency = HistogramSet(RPC_LATENCY_BUCKETS)

    def attach(self, dispatcher: RequestDispatcher) -> None:
        """Report every request the dispatcher's executors answer."""
        for executor in dispatcher.executors.values():
            executor.on_done = self.on_done

    def on_done(self, item: QueuedRequest, response: RemotingCommand | None, result: str) -> None:
        held = item.held_since
        began = held or item.created_at
        self.observe(
            item.request.code, response.code if response is not None else None, began, held > 0, result
        )

    def observe(
        self, request_code: int, response_code: int | None, began: float, long_polling: bool, result: str
    ) -> None:
        """One answered request; ``began`` is its monotonic arrival time."""
        elapsed_ms = (time.monotonic() - began) * 1000
        self.latency.observe(
            (
                _REQUEST_NAMES.get(request_code) or str(request_code),
                "" if response_code is None else (_RESPONSE_NAMES.get(response_code) or str(response_code)),
                "true" if long_polling else "false",
                result,
            ),
            elapsed_ms,
        )

    def write(self, out: Exposition, common: Mapping[str, str]) -> None:
        out.declare(_RPC_LATENCY, "histogram", "Rpc latency (milliseconds)")
        out.histograms(
            _RPC_LATENCY,
            "Rpc latency (milliseconds)",
            (
                (
                    {
                        **common,
                        "protocol_type": "remoting",
                        "request_code": request,
                        "response_code": response,
                        "is_long_polling": long_polling,
                        "result": result,
                    },
                    histogram,
                )
                for (request, response, long_polling, result), histogram in list(self.latency.by_key.items())
            ),
        )
