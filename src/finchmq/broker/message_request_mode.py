"""``MessageRequestModeManager`` (Java 5.x ``broker/loadbalance/MessageRequestModeManager``): how
each consumer group reads each topic's queues the broker assigns (QUERY_ASSIGNMENT), PULL or POP,
as SET_MESSAGE_REQUEST_MODE (mqadmin ``setConsumeMode``) set it; persisted to
``config/messageRequestMode.json`` in Java's form (``{"messageRequestModeMap":{topic:{group:
{consumerGroup, mode, popShareQueueNum, topic}}}}``)."""

from __future__ import annotations

import logging
from pathlib import Path

from finchmq.protocol.bodies import MessageRequestModeSerializeWrapper, SetMessageRequestModeRequestBody

from ._persist import JsonConfigManager

__all__ = ["MessageRequestModeManager"]

log = logging.getLogger(__name__)


class MessageRequestModeManager(JsonConfigManager):
    """topic -> group -> the mode last set; groups without an entry use the broker's default."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.message_request_mode_map: dict[str, dict[str, SetMessageRequestModeRequestBody]] = {}

    def encode(self) -> bytes:
        return MessageRequestModeSerializeWrapper(
            message_request_mode_map={t: dict(groups) for t, groups in self.message_request_mode_map.items()}
        ).to_json()

    def decode(self, data: bytes) -> None:
        wrapper = MessageRequestModeSerializeWrapper.from_json(data)
        self.message_request_mode_map = {t: dict(g) for t, g in wrapper.message_request_mode_map.items()}

    def set_message_request_mode(
        self, topic: str, group: str, body: SetMessageRequestModeRequestBody
    ) -> None:
        """Record ``body`` for ``group`` on ``topic``; written with the next flush."""
        self.message_request_mode_map.setdefault(topic, {})[group] = body
        log.info(
            "message request mode of %s on %s set to %s (popShareQueueNum %d)",
            group,
            topic,
            body.mode.name,
            body.pop_share_queue_num,
        )
        self.mark_dirty()

    def get_message_request_mode(self, topic: str, group: str) -> SetMessageRequestModeRequestBody | None:
        """The mode set for ``group`` on ``topic``, or None."""
        return self.message_request_mode_map.get(topic, {}).get(group)
