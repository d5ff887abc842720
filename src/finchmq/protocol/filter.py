"""Tag subscriptions (Java ``FilterAPI``): parse ``TagA || TagB`` and build ``SubscriptionData``.

Both ends need it: the client to build heartbeats and filter again after a pull, the broker to
filter by consume-queue hash codes. Java's hash is recomputed here from the expression; the
C++ client's ``codeSet`` (atoi of each tag) is never trusted (spec §3.2.4).
"""

from __future__ import annotations

import time
from typing import Final

from .bodies import SubscriptionData
from .message import tags_hash_code

__all__ = ["EXPRESSION_TYPE_SQL92", "EXPRESSION_TYPE_TAG", "SUB_ALL", "build_subscription_data", "parse_tags"]

SUB_ALL: Final = "*"
EXPRESSION_TYPE_TAG: Final = "TAG"
EXPRESSION_TYPE_SQL92: Final = "SQL92"


def parse_tags(sub_string: str | None) -> tuple[str, ...] | None:
    """The tags of an expression, or None for "all" (``*`` or empty)."""
    if sub_string is None or not sub_string.strip() or sub_string.strip() == SUB_ALL:
        return None
    tags = tuple(dict.fromkeys(t.strip() for t in sub_string.split("||") if t.strip()))
    return tags or None


def build_subscription_data(
    topic: str, sub_string: str | None, expression_type: str | None = None, sub_version: int | None = None
) -> SubscriptionData:
    """Java ``FilterAPI.build``: ``*`` subscribes to everything; otherwise the tag set and codes.

    Raises:
        ValueError: the expression type is not TAG (SQL92 filtering is not supported).
    """
    kind = (expression_type or EXPRESSION_TYPE_TAG).upper()
    if kind != EXPRESSION_TYPE_TAG:
        raise ValueError(f"expression type {expression_type!r} is not supported; use TAG")
    tags = parse_tags(sub_string)
    version = sub_version if sub_version is not None else int(time.time() * 1000)
    if tags is None:
        return SubscriptionData(topic=topic, sub_string=SUB_ALL, sub_version=version)
    return SubscriptionData(
        topic=topic,
        sub_string=(sub_string or "").strip(),
        tags_set=tags,
        code_set=tuple(tags_hash_code(t) for t in tags),
        sub_version=version,
    )
