"""Transactions the server may be asked to end (Java ``TransactionDataManager``): what a
transactional send or a broker's check recorded, for EndTransaction to find."""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True, order=True)
class TransactionData:
    """What END_TRANSACTION needs of a half message (Java ``TransactionData``); orders by expiry
    as Java's ``compareTo``."""

    expire_time: float  # epoch seconds
    broker_name: str
    commit_log_offset: int
    tran_state_table_offset: int
    transaction_id: str
    topic: str = field(compare=False)


class TransactionRegistry:
    """Transactions the server may be asked to end (Java ``TransactionDataManager``): per
    (producer group, transaction id) the data recorded at a transactional send or at a broker's
    check, each kept ``expire_seconds`` (``transactionDataExpireMillis``), at most ``max_num``
    (``transactionDataMaxNum``) per key, the newest first out."""

    def __init__(self, expire_seconds: float = 30.0, max_num: int = 15) -> None:
        self.expire_seconds = expire_seconds
        self.max_num = max_num
        self._data: dict[tuple[str, str], list[TransactionData]] = {}

    def __len__(self) -> int:
        return len(self._data)

    def add(
        self,
        producer_group: str,
        *,
        broker_name: str,
        topic: str,
        tran_state_table_offset: int,
        commit_log_offset: int,
        transaction_id: str,
    ) -> TransactionData | None:
        """Record a half message; None (nothing recorded) without a broker name, as Java."""
        if not broker_name.strip():
            return None
        now = time.time()
        self._expire(now)
        data = TransactionData(
            now + self.expire_seconds,
            broker_name,
            commit_log_offset,
            tran_state_table_offset,
            transaction_id,
            topic,
        )
        entries = self._data.setdefault((producer_group, transaction_id), [])
        if data not in entries:
            entries.append(data)
            entries.sort()
        if len(entries) > self.max_num:
            del entries[0]
        return data

    def poll(self, producer_group: str, transaction_id: str) -> TransactionData | None:
        """The newest unexpired data of the key, removed (Java ``pollNoExpireTransactionData``)."""
        key = (producer_group, transaction_id)
        entries = self._data.get(key)
        if entries is None:
            return None
        now = time.time()
        found = None
        while entries:
            data = entries.pop()
            if data.expire_time >= now:
                found = data
                break
        if not entries:
            del self._data[key]
        return found

    def remove(self, producer_group: str, data: TransactionData) -> None:
        key = (producer_group, data.transaction_id)
        entries = self._data.get(key)
        if entries is not None and data in entries:
            entries.remove(data)
            if not entries:
                del self._data[key]

    def _expire(self, now: float) -> None:
        for key in [k for k, v in self._data.items() if v[0].expire_time < now]:
            entries = [d for d in self._data[key] if d.expire_time >= now]
            if entries:
                self._data[key] = entries
            else:
                del self._data[key]


# -- SendMessage ------------------------------------------------------------------------------------
