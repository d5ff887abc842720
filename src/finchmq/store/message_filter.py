"""Pull filters (RocketMQ ``MessageFilter``): what ``get_message`` asks before returning a record.

Owns the filter protocol and ``TagsFilter``, the tag-hash filter the broker builds from a
subscription expression. Imports: ``finchmq.protocol.message`` for the tag hash.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from finchmq.protocol.filter import SUB_ALL, parse_tags
from finchmq.protocol.message import tags_hash_code

__all__ = ["SUB_ALL", "MessageFilter", "TagsFilter"]


class MessageFilter(Protocol):
    """Java ``MessageFilter``: cheap check on the consume-queue unit, then on the stored record."""

    def is_matched_by_consume_queue(self, tags_code: int | None) -> bool: ...

    def is_matched_by_commit_log(
        self, msg_buffer: memoryview | None, properties: Mapping[str, str] | None
    ) -> bool: ...


class TagsFilter:
    """Match by tag hash code, as Java's ``ExpressionMessageFilter`` for TAG expressions.

    ``TagsFilter("*")`` (or "") matches everything; ``TagsFilter("TagA || TagB")`` matches units
    whose tagsCode is the hash of one of the tags. Like Java, a hash match is only a hint: the
    client compares the tag strings (collisions are possible).
    """

    __slots__ = ("codes", "match_all", "tags")

    def __init__(self, expression: str | None = SUB_ALL) -> None:
        tags = parse_tags(expression)
        self.match_all = tags is None
        self.tags: frozenset[str] = frozenset(tags or ())
        self.codes = frozenset(tags_hash_code(t) for t in self.tags)

    @classmethod
    def of_codes(cls, codes: set[int] | frozenset[int]) -> TagsFilter:
        f = cls(SUB_ALL)
        f.match_all = False
        f.codes = frozenset(codes)
        return f

    def is_matched_by_consume_queue(self, tags_code: int | None) -> bool:
        if self.match_all or tags_code is None:
            return True
        return tags_code in self.codes

    def is_matched_by_commit_log(
        self, msg_buffer: memoryview | None, properties: Mapping[str, str] | None
    ) -> bool:
        return True

    def __repr__(self) -> str:
        return "TagsFilter(*)" if self.match_all else f"TagsFilter({' || '.join(sorted(self.tags))})"
