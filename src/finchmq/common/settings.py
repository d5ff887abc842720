"""RocketMQ's camelCase settings onto finchmq's config dataclasses, and back.

Strategy: a config is a dataclass whose fields are RocketMQ's names in snake_case
(``waitTimeMillsInSendQueue`` → ``wait_time_mills_in_send_queue``). ``config_from_properties``
maps each camelCase key (the snake_case spelling is accepted too) to its field, converts the
string by the field's type (int, float, bool, str, Path, an Enum by name) and builds a new
instance with ``dataclasses.replace`` so the dataclass's own validation runs. Unknown keys are
returned, not raised, so callers can warn about them (the broker does).
"""

from __future__ import annotations

import dataclasses
import enum
import re
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

__all__ = [
    "SettingsError",
    "camel_to_snake",
    "config_from_properties",
    "config_to_properties",
    "snake_to_camel",
]

_C = TypeVar("_C")
_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


class SettingsError(ValueError):
    """A setting with a value its field cannot take; names the key and the value."""


def camel_to_snake(name: str) -> str:
    return _CAMEL_BOUNDARY.sub("_", name).lower()


def snake_to_camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _convert(key: str, raw: str, kind: Any) -> object:
    origin = typing.get_origin(kind)
    if origin is typing.Union or origin is types.UnionType:
        options = [a for a in typing.get_args(kind) if a is not type(None)]
        if raw.strip() == "" or raw.strip().lower() == "null":
            return None
        kind = options[0]
    text = raw.strip()
    try:
        if kind is bool:
            lowered = text.lower()
            if lowered == "true":
                return True
            if lowered == "false":
                return False
            raise ValueError("expected true or false")
        if kind is int:
            return int(text)
        if kind is float:
            return float(text)
        if kind is Path:
            return Path(text).expanduser()
        if isinstance(kind, type) and issubclass(kind, enum.Enum):
            try:
                return kind[text.upper()]
            except KeyError:
                names = ", ".join(m.name for m in kind)
                raise ValueError(f"expected one of {names}") from None
        if kind is str:
            return raw
    except ValueError as exc:
        raise SettingsError(f"bad value for {key}: {raw!r} ({exc})") from None
    raise SettingsError(f"setting {key} has a type finchmq cannot read from text: {kind!r}")


def config_from_properties(base: _C, properties: Mapping[str, str]) -> tuple[_C, dict[str, str]]:
    """``base`` with every known setting of ``properties`` applied, and the unknown ones.

    Raises:
        SettingsError: a value cannot be converted, or the dataclass rejects it; the message
            names the key and the value.
    """
    if not dataclasses.is_dataclass(base) or isinstance(base, type):
        raise TypeError(f"expected a dataclass instance, got {base!r}")
    hints = typing.get_type_hints(type(base))
    fields = {f.name: f for f in dataclasses.fields(base) if f.init}
    changes: dict[str, object] = {}
    unknown: dict[str, str] = {}
    for key, raw in properties.items():
        name = key if key in fields else camel_to_snake(key)
        if name not in fields:
            unknown[key] = raw
            continue
        changes[name] = _convert(key, raw, hints[name])
    try:
        updated = dataclasses.replace(base, **changes)
    except (ValueError, TypeError) as exc:
        raise SettingsError(f"bad configuration: {exc}") from None
    return updated, unknown


def config_to_properties(config: object) -> dict[str, str]:
    """The config as RocketMQ's camelCase keys with Java-style strings (GET_BROKER_CONFIG)."""
    if not dataclasses.is_dataclass(config) or isinstance(config, type):
        raise TypeError(f"expected a dataclass instance, got {config!r}")
    out: dict[str, str] = {}
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, enum.Enum):
            text = value.name
        elif value is None:
            text = ""
        else:
            text = str(value)
        out[snake_to_camel(f.name)] = text
    return out
