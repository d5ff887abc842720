"""The store filter for a subscription (Java ``ExpressionMessageFilter``): for TAG expressions,
match everything for ``*`` or class-filter mode, else the subscription's tag hash codes; for SQL92
expressions, evaluate the compiled expression on each stored message's properties (the consume
queue cannot tell: Java's bloom-filter bit map is not kept, see docs/compatibility)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Final

from finchmq.protocol.bodies import SubscriptionData
from finchmq.protocol.filter import SUB_ALL, is_tag_type
from finchmq.protocol.sql92 import Expression, compile_sql92
from finchmq.protocol.stored import decode_stored
from finchmq.store.message_filter import MessageFilter, TagsFilter

__all__ = ["SqlFilter", "compiled_sql92", "filter_for_subscription"]

_CACHE_SIZE: Final = 1024
_compiled: OrderedDict[str, Expression] = OrderedDict()


def compiled_sql92(expression: str) -> Expression:
    """``compile_sql92`` once per expression text (Java caches per group and topic; the text is
    what decides). Raises ``SQLSyntaxError``."""
    found = _compiled.get(expression)
    if found is None:
        found = _compiled[expression] = compile_sql92(expression)
        if len(_compiled) > _CACHE_SIZE:
            _compiled.popitem(last=False)
    else:
        _compiled.move_to_end(expression)
    return found


class SqlFilter:
    """An SQL92 subscription: every consume-queue unit may match; the stored message's
    properties decide (or, for a held pull, the arriving message's)."""

    __slots__ = ("expression",)

    def __init__(self, expression: Expression) -> None:
        self.expression = expression

    def is_matched_by_consume_queue(self, tags_code: int | None) -> bool:
        return True

    def is_matched_by_commit_log(
        self, msg_buffer: memoryview | None, properties: Mapping[str, str] | None
    ) -> bool:
        if properties is None:
            if msg_buffer is None:
                return True
            properties = decode_stored(msg_buffer).properties
        return self.expression.evaluate(properties)


def filter_for_subscription(subscription: SubscriptionData | None) -> MessageFilter:
    """The filter a pull uses. Raises ``SQLSyntaxError`` for an SQL92 expression that does not
    compile."""
    if subscription is None or subscription.class_filter_mode:
        return TagsFilter()
    if not is_tag_type(subscription.expression_type):
        return SqlFilter(compiled_sql92(subscription.sub_string))
    if subscription.sub_string in ("", SUB_ALL):
        return TagsFilter()
    return TagsFilter.of_codes(frozenset(subscription.code_set))
