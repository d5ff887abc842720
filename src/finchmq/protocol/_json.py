"""The one JSON implementation the protocol uses, and fastjson's quirks.

Strategy: orjson when it is importable (a declared runtime dependency, 5-10x faster on the
per-request header path), else the stdlib ``json`` with identical output: compact separators,
UTF-8, insertion order. Everything JSON in finchmq goes through ``dumps``/``loads`` here so the
two paths cannot drift.

fastjson, Java RocketMQ's serializer, writes two non-standard map-key forms by default: a number
key unquoted (``{0:"127.0.0.1:10911"}``, ``HashMap<Long,String>``) and an object key written as
the object itself (``{{"brokerName":"b","queueId":0,"topic":"T"}:5}``, ``Map<MessageQueue,Long>``).

* ``loads_lenient`` runs the strict parser first and, only for input it rejects, a small
  recursive-descent parser that also accepts both key forms. A number key becomes the string of
  its digits (as jsoncpp's ``allowNumericKeys`` does); an object key becomes an ``ObjectKey``,
  a hashable tuple of its items (nested objects inside it are ``ObjectKey`` too, arrays tuples).
* ``dumps_fastjson`` writes those forms back: ``int`` keys bare and ``ObjectKey`` keys as objects.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any, Final, TypeVar

__all__ = [
    "HAVE_ORJSON",
    "JSONDecodeError",
    "ObjectKey",
    "dumps",
    "dumps_fastjson",
    "java_double",
    "loads",
    "loads_lenient",
]

try:  # pragma: no cover - exercised by whichever environment runs the suite
    import orjson as _orjson
except ImportError:  # pragma: no cover
    _orjson = None  # type: ignore[assignment]

HAVE_ORJSON = _orjson is not None


class JSONDecodeError(ValueError):
    """Bytes that are not JSON (after the lenient rewrite, where it applies)."""


def _dumps_stdlib(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _loads_stdlib(data: bytes | bytearray | memoryview | str) -> Any:
    try:
        if isinstance(data, memoryview):
            data = bytes(data)
        return json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise JSONDecodeError(str(exc)) from exc


loads_raw: Any
"""The parser itself, for hot paths that catch ``ValueError`` (what both parsers raise) themselves."""

if _orjson is not None:
    loads_raw = _orjson.loads
    _orjson_dumps = _orjson.dumps
    _orjson_loads = _orjson.loads
    _OrjsonDecodeError = _orjson.JSONDecodeError

    def dumps(obj: Any) -> bytes:
        """Compact UTF-8 JSON, keys in insertion order."""
        try:
            return _orjson_dumps(obj)
        except TypeError:
            # orjson refuses int keys and big ints; the stdlib path handles them identically.
            return _dumps_stdlib(obj)

    def loads(data: bytes | bytearray | memoryview | str) -> Any:
        """Parse standard JSON; raises ``JSONDecodeError``."""
        try:
            return _orjson_loads(data)
        except _OrjsonDecodeError as exc:
            raise JSONDecodeError(str(exc)) from exc

else:  # pragma: no cover
    loads_raw = json.loads  # type: ignore[unreachable]  # mypy assumes orjson is installed
    dumps = _dumps_stdlib
    loads = _loads_stdlib


# ---------------------------------------------------------------------------------------------
# fastjson's non-standard map keys


class ObjectKey(tuple[tuple[str, Any], ...]):
    """A JSON object that appeared as a map key; hashable, items in source order.

    ``dumps_fastjson`` writes it back as an object key. ``as_dict()`` gives the plain mapping.
    """

    __slots__ = ()

    def as_dict(self) -> dict[str, Any]:
        return dict(self)

    def __repr__(self) -> str:
        return f"ObjectKey({dict(self)!r})"


# The C-accelerated string scanner json.decoder uses; typeshed does not declare it.
_scanstring: Callable[[str, int, bool], tuple[str, int]] = getattr(json.decoder, "scanstring")  # noqa: B009
_MAX_DEPTH: Final = 128  # RocketMQ bodies nest about 6 deep; deeper input is rejected
_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?")


class _LenientParser:
    """Standard JSON plus number and object map keys; used only after the strict parser failed."""

    __slots__ = ("_text",)

    def __init__(self, text: str) -> None:
        self._text = text

    def _error(self, msg: str, pos: int) -> JSONDecodeError:
        return JSONDecodeError(f"{msg} at char {pos}")

    def _ws(self, pos: int) -> int:
        match = _WS.match(self._text, pos)
        return match.end() if match else pos

    def parse(self) -> Any:
        pos = self._ws(0)
        value, pos = self._value(pos, False, 0)
        pos = self._ws(pos)
        if pos != len(self._text):
            raise self._error("extra data after the JSON value", pos)
        return value

    def _value(self, pos: int, frozen: bool, depth: int) -> tuple[Any, int]:
        text = self._text
        if depth > _MAX_DEPTH:
            raise self._error(f"nesting deeper than {_MAX_DEPTH}", pos)
        ch = text[pos : pos + 1]
        if ch == "{":
            return self._object(pos + 1, frozen, depth + 1)
        if ch == "[":
            return self._array(pos + 1, frozen, depth + 1)
        if ch == '"':
            return self._string(pos)
        for word, value in (("true", True), ("false", False), ("null", None)):
            if text.startswith(word, pos):
                return value, pos + len(word)
        match = _NUMBER.match(text, pos)
        if match is None:
            raise self._error("expected a JSON value", pos)
        if match.group(1) or match.group(2):
            return float(match.group()), match.end()
        return int(match.group()), match.end()

    def _string(self, pos: int) -> tuple[str, int]:
        try:
            return _scanstring(self._text, pos + 1, True)
        except ValueError as exc:
            raise JSONDecodeError(str(exc)) from None

    def _key(self, pos: int, depth: int) -> tuple[str | ObjectKey, int]:
        ch = self._text[pos : pos + 1]
        if ch == '"':
            return self._string(pos)
        if ch == "{":
            key, pos = self._object(pos + 1, True, depth + 1)
            return key, pos
        match = _NUMBER.match(self._text, pos)
        if match is None:
            raise self._error("expected an object key", pos)
        return match.group(), match.end()

    def _object(self, pos: int, frozen: bool, depth: int) -> tuple[Any, int]:
        text = self._text
        items: list[tuple[Any, Any]] = []
        pos = self._ws(pos)
        if text[pos : pos + 1] == "}":
            return (ObjectKey() if frozen else {}), pos + 1
        while True:
            key, pos = self._key(pos, depth)
            pos = self._ws(pos)
            if text[pos : pos + 1] != ":":
                raise self._error("expected ':' after an object key", pos)
            value, pos = self._value(self._ws(pos + 1), frozen, depth)
            items.append((key, value))
            pos = self._ws(pos)
            ch = text[pos : pos + 1]
            if ch == ",":
                pos = self._ws(pos + 1)
            elif ch == "}":
                return (ObjectKey(items) if frozen else dict(items)), pos + 1
            else:
                raise self._error("expected ',' or '}' in an object", pos)

    def _array(self, pos: int, frozen: bool, depth: int) -> tuple[Any, int]:
        text = self._text
        items: list[Any] = []
        pos = self._ws(pos)
        if text[pos : pos + 1] == "]":
            return (() if frozen else []), pos + 1
        while True:
            value, pos = self._value(pos, frozen, depth)
            items.append(value)
            pos = self._ws(pos)
            ch = text[pos : pos + 1]
            if ch == ",":
                pos = self._ws(pos + 1)
            elif ch == "]":
                return (tuple(items) if frozen else items), pos + 1
            else:
                raise self._error("expected ',' or ']' in an array", pos)


def loads_lenient(data: bytes | bytearray | memoryview | str) -> Any:
    """Parse JSON, also accepting fastjson's number and object map keys.

    The strict parser runs first; the lenient parser only sees input it rejects.
    Raises ``JSONDecodeError``.
    """
    try:
        return loads(data)
    except JSONDecodeError:
        pass
    try:
        text = data if isinstance(data, str) else bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise JSONDecodeError(f"body is not UTF-8: {exc}") from exc
    try:
        return _LenientParser(text).parse()
    except RecursionError as exc:  # a caller already deep in the stack; never crash on input
        raise JSONDecodeError("nesting too deep for the lenient parser") from exc


# -- fastjson's two output forms -------------------------------------------------------------
#
# Default (Java ``RemotingSerializable.encode()``): non-string map keys bare (``{0:"a"}``), object
# keys as objects, non-ASCII written as UTF-8, U+2028/U+2029 and control characters escaped.
# BrowserCompatible (the route answer to clients >= 4.9.4): every key quoted, every character
# outside printable ASCII as ``\uXXXX`` (upper-case hex), ``/`` as ``\/``.
# Both were checked byte for byte against fastjson 1.2.69 (tests/protocol/data/java/).

_SHORT_ESCAPES: Final = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}
_DEFAULT_SPECIAL: Final = re.compile('["\\\\\x00-\x1f\u2028\u2029]')
_BROWSER_SPECIAL: Final = re.compile('["\\\\/\x00-\x1f\x7f-\U0010ffff]')
_K = TypeVar("_K")


def _escape(match: re.Match[str]) -> str:
    ch = match.group()
    if ch == "/":
        return "\\/"
    code = ord(ch)
    if code > 0xFFFF:  # Java strings are UTF-16: a surrogate pair, each half escaped
        code -= 0x10000
        return f"\\u{0xD800 | (code >> 10):04X}\\u{0xDC00 | (code & 0x3FF):04X}"
    return _SHORT_ESCAPES.get(ch) or f"\\u{code:04X}"


def _string_text(value: str, browser: bool) -> str:
    return '"' + (_BROWSER_SPECIAL if browser else _DEFAULT_SPECIAL).sub(_escape, value) + '"'


def _scalar_text(value: Any, browser: bool = False) -> str:
    if isinstance(value, str):
        return _string_text(value, browser)
    if isinstance(value, float):  # fastjson: Double.toString's form, null for NaN and infinities
        return java_double(value) if math.isfinite(value) else "null"
    return dumps(value).decode("utf-8")


def java_double(value: float) -> str:
    """Java ``Double.toString``: shortest round-trip digits, scientific below 1e-3 and from 1e7."""
    value = float(value)
    if value == 0 or 1e-3 <= abs(value) < 1e7 or not math.isfinite(value):
        return repr(value)
    sign, digits, exponent = Decimal(repr(value)).as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits))
    scientific = len(text) + exponent - 1
    text = text.rstrip("0") or "0"
    return f"{'-' if sign else ''}{text[0]}.{text[1:] or '0'}E{scientific}"


def _write_fastjson(obj: Any, out: list[str], browser: bool) -> None:
    if isinstance(obj, dict):
        out.append("{")
        first = True
        for key, value in obj.items():
            if not first:
                out.append(",")
            first = False
            if isinstance(key, str):
                out.append(_string_text(key, browser))
            elif isinstance(key, ObjectKey):
                _write_fastjson(key.as_dict(), out, browser)
            elif isinstance(key, int) and not isinstance(key, bool):
                out.append(_string_text(str(key), browser) if browser else str(int(key)))
            else:
                raise TypeError(f"unsupported map key {key!r}")
            out.append(":")
            _write_fastjson(value, out, browser)
        out.append("}")
    elif isinstance(obj, list | tuple):
        out.append("[")
        for i, item in enumerate(obj):
            if i:
                out.append(",")
            _write_fastjson(item, out, browser)
        out.append("]")
    else:
        out.append(_scalar_text(obj, browser))


def dumps_fastjson(obj: Any) -> bytes:
    """Compact UTF-8 JSON in fastjson's default form: ``int`` map keys bare, ``ObjectKey`` keys as objects.

    Containers are written in their given order. Raises ``TypeError`` for other key types.
    """
    out: list[str] = []
    _write_fastjson(obj, out, False)
    return "".join(out).encode("utf-8")


def _write_fastjson_pretty(obj: Any, out: list[str], indent: int) -> None:
    if isinstance(obj, dict):  # an empty map too: "{", a new line, "}"
        out.append("{")
        for i, (key, value) in enumerate(obj.items()):
            out.append(("," if i else "") + "\n" + "\t" * (indent + 1))
            _write_fastjson(key if isinstance(key, str) else str(key), out, False)
            out.append(":")
            _write_fastjson_pretty(value, out, indent + 1)
        out.append("\n" + "\t" * indent + "}")
    else:
        _write_fastjson(obj, out, False)


def dumps_fastjson_pretty(obj: Any) -> str:
    """``JSON.toJSONString(obj, true)``: fastjson's ``PrettyFormat``, each object's fields on
    their own lines indented by tabs (``"key":value``, no space), the closing brace on a line of
    its own, an empty map's too. Arrays are written on one line, as fastjson writes a ``Set``
    (the bodies' collections are sets)."""
    out: list[str] = []
    _write_fastjson_pretty(obj, out, 0)
    return "".join(out)


def dumps_browser_compatible(obj: Any) -> bytes:
    """Compact ASCII JSON as fastjson writes it with ``BrowserCompatible``: keys quoted, non-ASCII
    and ``/`` escaped. Containers are written in their given order."""
    out: list[str] = []
    _write_fastjson(obj, out, True)
    return "".join(out).encode("ascii")


# -- Java's hash iteration order ------------------------------------------------------------------


def java_string_hash(value: str) -> int:
    """Java ``String.hashCode()`` (over UTF-16 code units, 32-bit wrap-around), signed."""
    h = 0
    data = value.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def java_hash(value: Any) -> int:
    """``hashCode()`` of the Java value behind a JSON key or set element: String, Long/Integer,
    or a MessageQueue (an ``ObjectKey`` or dict with brokerName, queueId, topic)."""
    if isinstance(value, str):
        return java_string_hash(value)
    if isinstance(value, int):
        if -(1 << 31) <= value < (1 << 31):
            return value  # Integer.hashCode, and Long.hashCode of a small long
        unsigned = value & 0xFFFFFFFFFFFFFFFF
        h = (unsigned ^ (unsigned >> 32)) & 0xFFFFFFFF
        return h - (1 << 32) if h & 0x80000000 else h
    items = value.as_dict() if isinstance(value, ObjectKey) else value
    if isinstance(items, dict) and {"brokerName", "queueId", "topic"} <= items.keys():
        h = 31 + java_string_hash(items["brokerName"])
        h = (31 * h + int(items["queueId"])) & 0xFFFFFFFF
        h = (31 * h + java_string_hash(items["topic"])) & 0xFFFFFFFF
        return h - (1 << 32) if h & 0x80000000 else h
    raise TypeError(f"no Java hash for {value!r}")


def java_hash_order(
    items: list[_K], hash_of: Callable[[_K], int] = java_hash, table_size: int = 16
) -> list[_K]:
    """``items`` in the order a Java ``HashMap``/``HashSet``/``ConcurrentHashMap`` built by adding
    them in this order iterates them: by bucket (spread hash & (table size - 1)), the table
    (``table_size`` buckets at first) doubling past a 0.75 load; same-bucket items keep their order."""
    size = table_size
    while len(items) > size * 3 // 4:
        size *= 2
    mask = size - 1

    def bucket(item: _K) -> int:
        h = hash_of(item) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & mask

    return sorted(items, key=bucket)


def java_concurrent_hash_order(
    items: list[_K], hash_of: Callable[[_K], int] = java_hash, table_size: int = 16
) -> list[_K]:
    """``items`` in the order a Java ``ConcurrentHashMap`` (or a ``Properties``, which holds
    one) iterates them after they were put in this order, the table ``table_size`` buckets at
    first. Unlike ``java_hash_order``'s, same-bucket items may change places: the table doubles
    when it holds 3/4 of its size, and its ``transfer`` keeps each bucket's last run of items
    bound for the same new bucket and puts the items before it, reversed, ahead of it."""
    size = table_size
    bins: list[list[tuple[int, _K]]] = [[] for _ in range(size)]
    for count, item in enumerate(items, start=1):
        h = hash_of(item) & 0xFFFFFFFF
        h = (h ^ (h >> 16)) & 0x7FFFFFFF  # ConcurrentHashMap.spread
        bins[h & (size - 1)].append((h, item))
        if count >= size - (size >> 2):  # addCount: size reached sizeCtl
            grown: list[list[tuple[int, _K]]] = [[] for _ in range(size * 2)]
            for i, nodes in enumerate(bins):
                if not nodes:
                    continue
                run_bit, last_run = nodes[0][0] & size, 0
                for j in range(1, len(nodes)):
                    if nodes[j][0] & size != run_bit:
                        run_bit, last_run = nodes[j][0] & size, j
                low = nodes[last_run:] if run_bit == 0 else []
                high = nodes[last_run:] if run_bit else []
                for node in nodes[:last_run]:  # each put at the head of its new list
                    (high if node[0] & size else low).insert(0, node)
                grown[i], grown[i + size] = low, high
            bins, size = grown, size * 2
    return [item for nodes in bins for _, item in nodes]
