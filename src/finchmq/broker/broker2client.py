"""``Broker2Client``: the requests a broker sends to its clients (Java ``Broker2Client``)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from finchmq.protocol import RemotingCommand, RequestCode
from finchmq.protocol.bodies import ResetOffsetBody
from finchmq.protocol.codes import LanguageCode
from finchmq.protocol.headers import (
    CheckTransactionStateRequestHeader,
    NotifyConsumerIdsChangedRequestHeader,
    ResetOffsetRequestHeader,
)
from finchmq.protocol.message import MessageQueue
from finchmq.remoting import Channel, RemotingError, RemotingServer

from .client_manager import ConsumerGroupInfo

__all__ = ["Broker2Client"]

log = logging.getLogger(__name__)


class Broker2Client:
    """Notifications (oneway, in the background through ``spawn``) and calls to clients."""

    def __init__(
        self, server: RemotingServer, spawn: Callable[[Coroutine[Any, Any, Any], str], object]
    ) -> None:
        self.server = server
        self.spawn = spawn

    def notify_consumer_ids_changed(self, group: str, channels: list[Channel]) -> None:
        header = NotifyConsumerIdsChangedRequestHeader(consumer_group=group).to_ext_fields()
        for channel in channels:
            if channel.is_open:
                request = RemotingCommand.request(
                    RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
                    dict(header),
                    oneway=True,
                    language=LanguageCode.JAVA,
                )
                self.spawn(self._oneway(channel, request), f"notify-{group}")

    def reset_offset_on_clients(
        self, group: ConsumerGroupInfo, header: ResetOffsetRequestHeader, offsets: Mapping[MessageQueue, int]
    ) -> None:
        body = ResetOffsetBody(offset_table=dict(offsets))
        for info in group.channels.values():
            channel = info.channel
            if not channel.is_open:
                continue
            payload = body.to_cpp_json() if info.language is LanguageCode.CPP else body.to_json()
            request = RemotingCommand.request(
                RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
                header.to_ext_fields(),
                payload,
                oneway=True,
                language=LanguageCode.JAVA,
            )
            self.spawn(self._oneway(channel, request), f"reset-offset-{header.group}")

    def check_producer_transaction_state(
        self, group: str, channel: Channel, header: CheckTransactionStateRequestHeader, message: bytes
    ) -> None:
        """CHECK_TRANSACTION_STATE (oneway) to a producer: the half message, as its real topic's
        (Java ``checkProducerTransactionState``)."""
        if not channel.is_open:
            return
        request = RemotingCommand.request(
            RequestCode.CHECK_TRANSACTION_STATE,
            header.to_ext_fields(),
            message,
            oneway=True,
            language=LanguageCode.JAVA,
        )
        self.spawn(self._oneway(channel, request), f"check-transaction-{group}")

    async def call_client(
        self, channel: Channel, request: RemotingCommand, timeout_millis: int
    ) -> RemotingCommand:
        """Send ``request`` to a client's connection and wait for its answer (Java ``callClient``)."""
        return await self.server.invoke(channel, request, timeout_millis)

    async def _oneway(self, channel: Channel, request: RemotingCommand) -> None:
        try:
            await self.server.invoke_oneway(channel, request, 3000)
        except (RemotingError, RuntimeError) as exc:
            log.debug("oneway code %d to %s failed: %s", request.code, channel.remote_addr, exc)
