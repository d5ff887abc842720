"""``NamesrvMetrics``: the name server's Prometheus figures (docs/metrics.md).

Java 5.x's name server exports none; finchmq's serves ``rocketmq_rpc_latency`` (Java's name,
buckets and labels, with ``node_type=nameserver``: its ``_count`` is the request count by code)
and ``finchmq_namesrv_*`` gauges read from the route table at scrape time.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import TYPE_CHECKING

from finchmq.common.metrics import Exposition
from finchmq.remoting.metrics import RpcMetrics

if TYPE_CHECKING:
    from .controller import NamesrvController

__all__ = ["NamesrvMetrics"]


class NamesrvMetrics:
    """``install()`` times requests; ``write()`` adds the figures to an exposition."""

    def __init__(self, namesrv: NamesrvController) -> None:
        self.namesrv = namesrv
        self.rpc = RpcMetrics()

    def install(self) -> None:
        self.rpc.attach(self.namesrv.server.dispatcher)

    def write(self, out: Exposition) -> None:
        namesrv = self.namesrv
        routes = namesrv.routes
        common = {"node_type": "nameserver", "node_id": namesrv.address}
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
