"""``KVConfigManager``: namespaced key/values (e.g. ORDER_TOPIC_CONFIG), persisted as Java does.

File format (Java ``KVConfigSerializeWrapper``): ``{"configTable":{"ns":{"key":"value"}}}``,
written atomically after every change.
"""

from __future__ import annotations

import logging
from pathlib import Path

from finchmq.common import read_config_file, write_atomically
from finchmq.protocol import _json

__all__ = ["NAMESPACE_ORDER_TOPIC_CONFIG", "KVConfigManager"]

log = logging.getLogger(__name__)

NAMESPACE_ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"  # Java NamesrvUtil


def _parse(data: bytes) -> dict[str, dict[str, str]]:
    tree = _json.loads(data)
    table = tree.get("configTable") if isinstance(tree, dict) else None
    if not isinstance(table, dict):
        raise ValueError("no configTable object")
    return {
        str(ns): {str(k): str(v) for k, v in kvs.items()}
        for ns, kvs in table.items()
        if isinstance(kvs, dict)
    }


class KVConfigManager:
    """Namespaced key/value settings of the name server."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._table: dict[str, dict[str, str]] = {}

    def load(self) -> None:
        table = read_config_file(self.path, _parse)
        if table is not None:
            self._table = table
            log.info("loaded %d KV namespaces from %s", len(table), self.path)

    def _persist(self) -> None:
        write_atomically(self.path, _json.dumps({"configTable": self._table}))

    def put(self, namespace: str, key: str, value: str) -> None:
        self._table.setdefault(namespace, {})[key] = value
        self._persist()

    def get(self, namespace: str, key: str) -> str | None:
        return self._table.get(namespace, {}).get(key)

    def delete(self, namespace: str, key: str) -> None:
        kvs = self._table.get(namespace)
        if kvs is not None and kvs.pop(key, None) is not None:
            if not kvs:
                del self._table[namespace]
            self._persist()

    def namespace(self, namespace: str) -> dict[str, str]:
        return dict(self._table.get(namespace, {}))
