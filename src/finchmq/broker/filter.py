"""The store filter for a subscription (Java ``ExpressionMessageFilter`` for TAG expressions):
match everything for ``*`` or class-filter mode, else the subscription's tag hash codes."""

from __future__ import annotations

from finchmq.protocol.bodies import SubscriptionData
from finchmq.protocol.filter import SUB_ALL
from finchmq.store.message_filter import TagsFilter

__all__ = ["filter_for_subscription"]


def filter_for_subscription(subscription: SubscriptionData | None) -> TagsFilter:
    if subscription is None or subscription.class_filter_mode or subscription.sub_string in ("", SUB_ALL):
        return TagsFilter()
    return TagsFilter.of_codes(frozenset(subscription.code_set))
