"""Subscriptions (Java ``FilterAPI``, ``MessageSelector``): parse ``TagA || TagB`` and build
``SubscriptionData``; SQL92 expressions (``MessageSelector.by_sql``) are kept as text, compiled by
``finchmq.protocol.sql92`` where they are evaluated.

Both ends need it: the client to build heartbeats and filter again after a pull, the broker to
filter by consume-queue hash codes. Java's hash is recomputed here from the expression; the
C++ client's ``codeSet`` (atoi of each tag) is never trusted (spec §3.2.4).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Final

from .bodies import SubscriptionData
from .message import tags_hash_code
from .sql92 import compile_sql92

__all__ = [
    "EXPRESSION_TYPE_SQL92",
    "EXPRESSION_TYPE_TAG",
    "SUB_ALL",
    "MessageSelector",
    "build_subscription_data",
    "is_tag_type",
    "parse_tags",
]

SUB_ALL: Final = "*"
EXPRESSION_TYPE_TAG: Final = "TAG"
EXPRESSION_TYPE_SQL92: Final = "SQL92"


def is_tag_type(expression_type: str | None) -> bool:
    """Java ``ExpressionType.isTagType``: no type, an empty one, or TAG."""
    return not expression_type or expression_type.upper() == EXPRESSION_TYPE_TAG


@dataclass(frozen=True, slots=True)
class MessageSelector:
    """Java ``MessageSelector``: a subscription's expression and its type.

    ``MessageSelector.by_sql("a > 5 AND TAGS IN ('A', 'B')")`` filters on message properties on
    the broker (which needs ``enablePropertyFilter=true``); ``MessageSelector.by_tag("A || B")``
    is the usual tag expression.
    """

    expression_type: str
    expression: str

    @classmethod
    def by_sql(cls, sql: str) -> MessageSelector:
        """An SQL92 expression on message properties (and TAGS), e.g. ``a > 5 AND b = 'x'``."""
        return cls(EXPRESSION_TYPE_SQL92, sql)

    @classmethod
    def by_tag(cls, tag: str) -> MessageSelector:
        """A tag expression: ``*``, ``TagA`` or ``TagA || TagB``."""
        return cls(EXPRESSION_TYPE_TAG, tag)

    def check(self) -> None:
        """Raise ``ValueError`` if the broker would refuse the expression (for SQL92 an
        ``SQLSyntaxError`` naming the position of the error)."""
        if is_tag_type(self.expression_type):
            build_subscription_data("check", self.expression, self.expression_type)
        elif self.expression_type.upper() != EXPRESSION_TYPE_SQL92:
            raise ValueError(f"expression type {self.expression_type!r} is not supported; use TAG or SQL92")
        else:
            compile_sql92(self.expression)


def parse_tags(sub_string: str | None) -> tuple[str, ...] | None:
    """The tags of an expression, or None for "all" (``*`` or empty)."""
    if sub_string is None or not sub_string.strip() or sub_string.strip() == SUB_ALL:
        return None
    tags = tuple(dict.fromkeys(t.strip() for t in sub_string.split("||") if t.strip()))
    return tags or None


def build_subscription_data(
    topic: str, sub_string: str | None, expression_type: str | None = None, sub_version: int | None = None
) -> SubscriptionData:
    """Java ``FilterAPI.build``: ``*`` subscribes to everything; otherwise the tag set and codes;
    an SQL92 expression is kept as it is.

    Raises:
        ValueError: an unknown expression type, or an empty SQL92 expression.
    """
    version = sub_version if sub_version is not None else int(time.time() * 1000)
    if not is_tag_type(expression_type):
        if (expression_type or "").upper() != EXPRESSION_TYPE_SQL92:
            raise ValueError(f"expression type {expression_type!r} is not supported; use TAG or SQL92")
        if not sub_string or not sub_string.strip():
            raise ValueError(f"Expression can't be null! {EXPRESSION_TYPE_SQL92}")
        return SubscriptionData(
            topic=topic, sub_string=sub_string, expression_type=EXPRESSION_TYPE_SQL92, sub_version=version
        )
    tags = parse_tags(sub_string)
    if tags is None:
        return SubscriptionData(topic=topic, sub_string=SUB_ALL, sub_version=version)
    return SubscriptionData(
        topic=topic,
        sub_string=(sub_string or "").strip(),
        tags_set=tags,
        code_set=tuple(tags_hash_code(t) for t in tags),
        sub_version=version,
    )
