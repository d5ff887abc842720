"""``NamesrvMetrics``: the name server's Prometheus figures (docs/metrics.md).

Java 5.x's name server exports none; finchmq's serves ``rocketmq_rpc_latency`` (Java's name,
buckets and labels, with ``node_type=nameserver``: its ``_count`` is the request count by code)
and ``finchmq_namesrv_*`` gauges read from the route table at scrape time.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

from finchmq.common.metrics import Exposition
from finchmq.remoting import RequestDispatcher
from finchmq.remoting.metrics import RpcMetrics

from .route_info import RouteInfoManager

__all__ = ["NamesrvMetrics"]


class NamesrvMetrics:
    """``install()`` times requests; ``write()`` adds the figures to an exposition.

    It reads the name server's route table and its dispatcher, and asks ``address()`` for the
    ``node_id`` label at scrape time (the port is known once the server listens).
    """

    def __init__(
        self, routes: RouteInfoManager, dispatcher: RequestDispatcher, address: Callable[[], str]
    ) -> None:
        self.routes = routes
        self.dispatcher = dispatcher
        self.address = address
        self.rpc = RpcMetrics()

    def install(self) -> None:
        self.rpc.attach(self.dispatcher)

    def write(self, out: Exposition) -> None:
        routes = self.routes
        common = {"node_type": "nameserver", "node_id": self.address()}
        self.rpc.write(out, common)
        brokers: Counter[str] = Counter()
        for entry in list(routes.broker_addr_table.values()):
            brokers[entry.cluster] += 1
        out.gauge(
            "finchmq_namesrv_clusters",
            "Clusters known to the name server",
            len(routes.cluster_addr_table),
            common,
        )
        out.gauges(
            "finchmq_namesrv_brokers",
            "Broker names (master and slaves count once) by cluster",
            (({**common, "cluster": cluster}, count) for cluster, count in sorted(brokers.items())),
        )
        out.gauge(
            "finchmq_namesrv_live_brokers",
            "Broker addresses registered and not expired",
            len(routes.broker_live_table),
            common,
        )
        out.gauge("finchmq_namesrv_topics", "Topics with a route", len(routes.topic_queue_table), common)
        now = int(time.time() * 1000)
        out.gauges(
            "finchmq_namesrv_broker_last_update_age_seconds",
            "Seconds since each broker address last registered",
            (
                ({**common, "broker_addr": addr}, max(now - live.last_update_timestamp, 0) / 1000)
                for addr, live in sorted(routes.broker_live_table.items())
            ),
        )
