"""finchmq.console: a web console for a cluster, given its name server addresses (what
rocketmq-dashboard's users use most: cluster and brokers with live TPS, topics, consumer groups
(created, updated, deleted) and their lag, offset resets, a group's producers, message queries
with traces, test messages, dead-letter resends, ACL 1.0 accounts and ACL 2.0 users and rules,
and charts of the last hour kept across restarts).

Imports: ``finchmq.client``, ``finchmq.protocol`` and ``finchmq.common`` only (import-linter
checks it). Stack: Starlette (the JSON API and the static page) served by uvicorn on the
caller's event loop; the page is plain JavaScript with uPlot (vendored in ``static/``) for the
charts, so ``pip install finchmq`` is all it needs.

    async with Console("127.0.0.1:9876", port=8080) as console:
        print(console.url)
"""

from __future__ import annotations

from .app import create_app
from .sampler import Sample, Sampler
from .server import Console
from .service import ConsoleService

__all__ = ["Console", "ConsoleService", "Sample", "Sampler", "create_app"]
