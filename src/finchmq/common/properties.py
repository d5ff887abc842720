"""Java ``.properties`` text (``broker.conf``, ``namesrv.conf``): parse and format.

Follows ``java.util.Properties.load``: ``key=value``, ``key: value`` or ``key value``; ``#`` and
``!`` comments; a trailing backslash continues the line; ``\\t``, ``\\n``, ``\\uXXXX`` escapes.
"""

from __future__ import annotations

__all__ = ["format_properties", "parse_properties"]

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _logical_lines(text: str) -> list[str]:
    lines: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.lstrip()
        if not pending and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending += line[:-1]
            continue
        lines.append(pending + line)
        pending = ""
    if pending:
        lines.append(pending)
    return lines


def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "u" and i + 6 <= len(text):
                try:
                    out.append(chr(int(text[i + 2 : i + 6], 16)))
                    i += 6
                    continue
                except ValueError:
                    pass
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def parse_properties(text: str) -> dict[str, str]:
    """Keys and values of a ``.properties`` text; later keys win, as in Java."""
    result: dict[str, str] = {}
    for line in _logical_lines(text):
        i = 0
        while i < len(line):
            ch = line[i]
            if ch == "\\":
                i += 2
                continue
            if ch in "=: \t":
                break
            i += 1
        key = line[:i]
        rest = line[i:].lstrip(" \t")
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(" \t")
        result[_unescape(key)] = _unescape(rest.rstrip())
    return result


def format_properties(values: dict[str, str]) -> str:
    """``key=value`` lines, sorted, with separators and backslashes escaped."""

    def esc(text: str, is_key: bool) -> str:
        text = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t")
        if is_key:
            text = text.replace("=", "\\=").replace(":", "\\:").replace(" ", "\\ ")
        return text

    return "".join(f"{esc(k, True)}={esc(v, False)}\n" for k, v in sorted(values.items()))
