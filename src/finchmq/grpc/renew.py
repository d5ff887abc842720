"""Receipt handles the server keeps invisible for the client (Java ``DefaultReceiptHandleManager``,
``ReceiptHandleGroup``, ``MessageReceiptHandle``, ``RenewStrategyPolicy``).

A ReceiveMessage with ``auto_renew`` (the PushConsumer's) pops with the default invisible time
and registers each message here, per (client, group). Every ``renewSchedulePeriodMillis`` the
handles within ``renewAheadTimeMillis`` of becoming visible get CHANGE_MESSAGE_INVISIBLETIME for
the next renew delay (1 m, 3 m, 5 m, 10 m, 30 m, 1 h); after ``renewMaxTimeMillis`` a message
is given up (made visible after its group's retry delay). Ack and ChangeInvisibleDuration take
the client's handle out and use the latest one (a renewal replaced the one the client holds).
A client gone from the broker's consumer table, or the server's shutdown, makes its handles
visible after ``invisibleTimeMillisWhenClear``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Final

from finchmq.common.tasks import BackgroundTasks

from .context import CLIENT_ID, CallContext
from .convert import now_ms
from .receipts import change_invisible_time, decode_handle
from .state import MessageReceiptHandle, Service
from .status import GrpcStatusError

log = logging.getLogger(__name__)

RENEW_DELAYS_MILLIS: Final = (60_000, 180_000, 300_000, 600_000, 1_800_000, 3_600_000)
"""Java ``RenewStrategyPolicy.next``: the invisible time of the n-th renewal."""

INNER_CLIENT_ID: Final = "finchmq-receipt-handle-renewer"
"""The client id of the server's own calls for renewals (Java ``ProxyContext.createForInner``)."""

GroupKey = tuple[str, str]  # (client id, consumer group)


def renew_delay_millis(renew_times: int) -> int:
    return RENEW_DELAYS_MILLIS[min(max(renew_times, 0), len(RENEW_DELAYS_MILLIS) - 1)]


class ReceiptHandleManager:
    """The auto-renewed handles of the service's clients (see the module docstring)."""

    def __init__(self, svc: Service) -> None:
        self._svc = svc
        self._groups: dict[GroupKey, dict[tuple[str, str], MessageReceiptHandle]] = {}
        self._tasks = BackgroundTasks("grpc-receipt-renewer")
        self._task: asyncio.Task[None] | None = None
        self._busy: set[tuple[str, str]] = set()  # (message id, original handle) being renewed

    def __len__(self) -> int:
        return sum(len(handles) for handles in self._groups.values())

    def records(self) -> list[MessageReceiptHandle]:
        """Every handle kept (for inspection)."""
        return [r for handles in self._groups.values() for r in handles.values()]

    def add(self, client_id: str, record: MessageReceiptHandle) -> None:
        key = (record.message_id, record.original_handle)
        self._groups.setdefault((client_id, record.group), {})[key] = record
        if self._task is None or self._task.done():
            self._task = self._tasks.spawn(self._run(), "renew")

    def remove(self, client_id: str, group: str, message_id: str, handle: str) -> MessageReceiptHandle | None:
        """Take out the record of the handle ``handle`` the client holds (Java ``removeReceiptHandle``)."""
        handles = self._groups.get((client_id, group))
        if handles is None:
            return None
        record = handles.pop((message_id, handle), None)
        if not handles:
            self._groups.pop((client_id, group), None)
        return record

    def latest_handle(self, client_id: str, group: str, message_id: str, handle: str) -> str:
        """The handle to use for the client's ``handle``: the latest renewal's when it was renewed
        (the record leaves the manager: the client acts on the message now)."""
        record = self.remove(client_id, group, message_id, handle)
        return record.handle if record is not None else handle

    def _context(self) -> CallContext:
        return CallContext("RenewMessage", {CLIENT_ID: INNER_CLIENT_ID}, "127.0.0.1:0")

    async def _run(self) -> None:
        period = self._svc.config.renew_schedule_period_millis / 1000
        while self._groups:
            try:
                await self.scan()
            except Exception:
                log.exception("receipt handle renewal failed")
            await asyncio.sleep(period)

    async def scan(self) -> None:
        """One round (Java ``scheduleRenewTask``)."""
        config = self._svc.config
        work = []
        for key in list(self._groups):
            client_id, group = key
            if not await self._online(client_id, group):
                work.append(self.clear_group(key))
                continue
            for handle_key, record in list(self._groups.get(key, {}).items()):
                visible = decode_handle(record.handle).next_visible_time
                if visible - now_ms() > config.renew_ahead_time_millis or handle_key in self._busy:
                    continue
                work.append(self._renew(key, handle_key, record))
        if work:
            await asyncio.gather(*work)

    async def _online(self, client_id: str, group: str) -> bool:
        """Java ``clientIsOffline``: the client still has a session with this group's settings."""
        session = self._svc.clients.get(client_id)
        return session is not None and session.group == group

    async def _renew(self, key: GroupKey, handle_key: tuple[str, str], record: MessageReceiptHandle) -> None:
        config = self._svc.config
        self._busy.add(handle_key)
        try:
            if record.renew_retry_times >= config.max_renew_retry_times:
                log.warning(
                    "receipt handle of %s renewed too often unsuccessfully: dropped", record.message_id
                )
                self._drop(key, handle_key)
            elif now_ms() - record.consume_timestamp < config.renew_max_time_millis:
                await self._extend(key, handle_key, record)
            else:  # consumed for too long: give it back after the group's retry delay
                self._drop(key, handle_key)
                group = await self._svc.backend.group_config(record.group)
                if group is None:
                    return
                delay = group.effective_group_retry_policy.retry_policy.next_delay_duration(
                    record.reconsume_times
                )
                await change_invisible_time(
                    self._svc, self._context(), record.handle, record.group, record.topic, delay
                )
        except Exception as exc:
            log.warning("stop renewing %s: %r", record.message_id, exc)
            self._drop(key, handle_key)
        finally:
            self._busy.discard(handle_key)

    async def _extend(self, key: GroupKey, handle_key: tuple[str, str], record: MessageReceiptHandle) -> None:
        try:
            renewed = await change_invisible_time(
                self._svc,
                self._context(),
                record.handle,
                record.group,
                record.topic,
                renew_delay_millis(record.renew_times),
            )
        except GrpcStatusError as exc:  # INVALID_RECEIPT_HANDLE (expired): no retry
            log.warning("renewal of %s refused: %s", record.message_id, exc.message)
            self._drop(key, handle_key)
            return
        except Exception as exc:  # the broker did not answer: try again next round
            log.warning("renewal of %s failed: %r", record.message_id, exc)
            record.renew_retry_times += 1
            return
        if renewed is None:
            log.warning("renewal of %s: the broker no longer has it", record.message_id)
            self._drop(key, handle_key)
            return
        record.handle = renewed
        record.renew_retry_times = 0
        record.renew_times += 1

    def _drop(self, key: GroupKey, handle_key: tuple[str, str]) -> None:
        handles = self._groups.get(key)
        if handles is not None:
            handles.pop(handle_key, None)
            if not handles:
                self._groups.pop(key, None)

    async def clear_group(self, key: GroupKey) -> None:
        """Java ``clearGroup``: the group's handles visible again after ``invisibleTimeMillisWhenClear``."""
        handles = self._groups.pop(key, {})
        millis = self._svc.config.invisible_time_millis_when_clear
        results = await asyncio.gather(
            *(
                change_invisible_time(self._svc, self._context(), r.handle, r.group, r.topic, millis)
                for r in handles.values()
            ),
            return_exceptions=True,
        )
        for result in results:
            if isinstance(result, BaseException):
                log.debug("clearing a receipt handle failed: %r", result)

    async def close(self) -> None:
        """Stop renewing; every handle becomes visible soon (Java ``clearAllHandle``)."""
        await self._tasks.close()
        self._task = None
        for key in list(self._groups):
            await self.clear_group(key)
