"""The one JSON implementation the protocol uses, and fastjson's quirks.

Strategy: orjson when it is importable (a declared runtime dependency, 5-10x faster on the
per-request header path), else the stdlib ``json`` with identical output: compact separators,
UTF-8, insertion order. Everything JSON in finchmq goes through ``dumps``/``loads`` here so the
two paths cannot drift. ``loads_lenient`` also accepts fastjson's unquoted numeric map keys
(``{0:"127.0.0.1:10911"}``), which Java name servers send to old clients.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["HAVE_ORJSON", "JSONDecodeError", "dumps", "loads", "loads_lenient"]

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


if _orjson is not None:
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
    dumps = _dumps_stdlib
    loads = _loads_stdlib


def _quote_numeric_keys(text: str) -> str:
    """Quote bare numeric object keys (fastjson ``{0:"a"}``) outside string literals."""
    out: list[str] = []
    i, n = 0, len(text)
    in_string = False
    expect_key = False
    while i < n:
        ch = text[i]
        if in_string:
            out.append(ch)
            if ch == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if ch == '"':
                in_string = False
            i += 1
            continue
        if ch == '"':
            in_string = True
            expect_key = False
        elif ch in "{,":
            expect_key = True
        elif ch in "-0123456789" and expect_key:
            j = i + 1
            while j < n and text[j] in "0123456789":
                j += 1
            k = j
            while k < n and text[k] in " \t\r\n":
                k += 1
            if k < n and text[k] == ":":
                out.append('"' + text[i:j] + '"')
                i = j
                expect_key = False
                continue
            expect_key = False
        elif ch not in " \t\r\n":
            expect_key = False
        out.append(ch)
        i += 1
    return "".join(out)


def loads_lenient(data: bytes | bytearray | memoryview | str) -> Any:
    """Parse JSON, also accepting fastjson's unquoted numeric map keys.

    The strict parser runs first; the rewrite only happens for bodies it rejects.
    """
    try:
        return loads(data)
    except JSONDecodeError:
        pass
    try:
        text = data if isinstance(data, str) else bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise JSONDecodeError(f"body is not UTF-8: {exc}") from exc
    return loads(_quote_numeric_keys(text))
