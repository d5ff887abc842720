"""finchmq.testing: a real name server + broker for your tests, the way Java teams use an
embedded broker.

``EmbeddedServer`` runs a name server and a broker on free loopback ports, with the data in a
directory of your choice, on a private event loop in a background thread, so it serves sync and
async tests alike. The pytest plugin (``finchmq.testing.plugin``, registered automatically when
finchmq is installed) provides the fixtures ``finchmq_server`` (the running server),
``finchmq_namesrv`` (its name-server address) and ``finchmq_server_factory`` (servers with your
own ``broker.conf`` settings).

Imports: anything; nothing in finchmq imports it.
"""

from __future__ import annotations

from .embedded import EmbeddedServer

__all__ = ["EmbeddedServer"]
