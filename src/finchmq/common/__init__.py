"""finchmq.common: small helpers every server-side and client-side layer shares.

Imports: the standard library only. Owns: atomic config files, Java ``.properties`` text, and
turning RocketMQ's camelCase settings into finchmq's config dataclasses, and the start/close
contract of every service (``lifecycle``). ``finchmq.common.tasks`` (supervised background tasks,
asyncio) is imported from its module, so that the store, which uses ``common``, never loads asyncio.
"""

from __future__ import annotations

from .files import read_config_file, write_atomically
from .properties import format_properties, parse_properties
from .settings import SettingsError, config_from_properties, config_to_properties

__all__ = [
    "SettingsError",
    "config_from_properties",
    "config_to_properties",
    "format_properties",
    "parse_properties",
    "read_config_file",
    "write_atomically",
]
