"""``finchmq admin COMMAND``: mqadmin's most used commands over ``finchmq.client``'s blocking API.

Each command has mqadmin's name and short options (``-n`` name server, ``-t`` topic, ``-g``
group, ``-c`` cluster, ``-b`` broker address...), prints a human-readable table, or JSON with
``--json``. Exit status: 0 on success, 1 when the cluster answers with an error (message on
stderr), 2 for bad arguments.

Layout: a module per mqadmin command family (``topic``, ``consumer``, ``connection``,
``offset``, ``message``, ``cluster``, ``broker``, ``stats``, ``namesrv``, ``acl``, ``producer``,
``queue``, ``export``), where each command is declared once, above its handler
(``command.CommandFamily``); ``startup`` builds the parser and the dispatch from them;
``javafmt`` prints what mqadmin prints.
"""

from __future__ import annotations

from .javafmt import format_table
from .startup import add_admin_parser

__all__ = ["add_admin_parser", "format_table"]
