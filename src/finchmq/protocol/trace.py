"""Message trace records (Java ``TraceDataEncoder``, ``TraceContext``, ``TraceBean``,
``TraceView``): what a client with message trace on sends to ``RMQ_SYS_TRACE_TOPIC``, and how
``queryMsgTraceById`` reads it back. Sans-IO: text in, records out.

A trace message's body is a run of records, each a list of fields separated by ``\\x01`` and
ended by ``\\x02``; its KEYS are the traced messages' ids and keys, so the index finds it by id.
Fields are written as Java's ``StringBuilder.append`` writes them: ``null`` for a missing tag or
key, ``true``/``false`` for booleans.
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field
from typing import Final

from .topics import RMQ_SYS_TRACE_TOPIC

__all__ = [
    "CONTENT_SPLITOR",
    "FIELD_SPLITOR",
    "RMQ_SYS_TRACE_TOPIC",
    "TraceBean",
    "TraceContext",
    "TraceMessageType",
    "TraceType",
    "TraceView",
    "decode_trace_data",
    "encode_trace_context",
    "trace_views",
]

CONTENT_SPLITOR: Final = "\x01"
FIELD_SPLITOR: Final = "\x02"


class TraceType(enum.Enum):
    Pub = "Pub"
    SubBefore = "SubBefore"
    SubAfter = "SubAfter"
    EndTransaction = "EndTransaction"


class TraceMessageType(enum.IntEnum):
    """Java ``MessageType`` (written as its ordinal)."""

    Normal_Msg = 0
    Trans_Msg_Half = 1
    Trans_msg_Commit = 2
    Delay_Msg = 3


@dataclass(slots=True)
class TraceBean:
    """One traced message (Java ``TraceBean``)."""

    topic: str = ""
    msg_id: str = ""
    offset_msg_id: str = ""
    tags: str | None = ""
    keys: str | None = ""
    store_host: str = ""
    client_host: str = ""
    store_time: int = 0
    retry_times: int = 0
    body_length: int = 0
    msg_type: TraceMessageType = TraceMessageType.Normal_Msg
    transaction_id: str | None = None
    transaction_state: str = "UNKNOW"
    from_transaction_check: bool = False


@dataclass(slots=True)
class TraceContext:
    """One traced event (Java ``TraceContext``): a send, the start or end of a consumption, the
    end of a transaction."""

    trace_type: TraceType
    time_stamp: int = field(default_factory=lambda: int(time.time() * 1000))
    region_id: str = ""
    group_name: str = ""
    cost_time: int = 0
    success: bool = True
    request_id: str = ""
    context_code: int = 0
    trace_beans: list[TraceBean] = field(default_factory=list)


def _text(value: object) -> str:
    """``StringBuilder.append`` of a Java value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def encode_trace_context(ctx: TraceContext) -> tuple[str, list[str]]:
    """Java ``TraceDataEncoder.encoderFromContextBean``: the record text and the keys the trace
    message is indexed by (each traced message's id, then its keys)."""
    records: list[list[object]] = []
    kind = ctx.trace_type
    if kind is TraceType.Pub and ctx.trace_beans:
        b = ctx.trace_beans[0]
        records.append([
            kind.value, ctx.time_stamp, ctx.region_id, ctx.group_name, b.topic, b.msg_id, b.tags, b.keys,
            b.store_host, b.body_length, ctx.cost_time, int(b.msg_type), b.offset_msg_id, ctx.success,
        ])  # fmt: skip
    elif kind is TraceType.SubBefore:
        for b in ctx.trace_beans:
            records.append([
                kind.value, ctx.time_stamp, ctx.region_id, ctx.group_name, ctx.request_id, b.msg_id,
                b.retry_times, b.keys,
            ])  # fmt: skip
    elif kind is TraceType.SubAfter:
        for b in ctx.trace_beans:
            records.append([
                kind.value, ctx.request_id, b.msg_id, ctx.cost_time, ctx.success, b.keys, ctx.context_code,
                ctx.time_stamp, ctx.group_name,
            ])  # fmt: skip
    elif kind is TraceType.EndTransaction and ctx.trace_beans:
        b = ctx.trace_beans[0]
        records.append([
            kind.value, ctx.time_stamp, ctx.region_id, ctx.group_name, b.topic, b.msg_id, b.tags, b.keys,
            b.store_host, int(b.msg_type), b.transaction_id, b.transaction_state, b.from_transaction_check,
        ])  # fmt: skip
    data = "".join(CONTENT_SPLITOR.join(_text(f) for f in record) + FIELD_SPLITOR for record in records)
    keys: list[str] = []
    for b in ctx.trace_beans:
        keys.append(b.msg_id)
        if b.keys:
            keys.extend(k for k in b.keys.split(" ") if k)
    return data, keys


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return 0


def decode_trace_data(data: str) -> list[TraceContext]:
    """Java ``TraceDataEncoder.decoderFromTraceDataString``; records it cannot read are skipped."""
    out: list[TraceContext] = []
    for record in data.split(FIELD_SPLITOR):
        f = record.split(CONTENT_SPLITOR)
        kind = f[0]
        try:
            if kind == TraceType.Pub.value and len(f) >= 13:
                bean = TraceBean(
                    topic=f[4], msg_id=f[5], tags=f[6], keys=f[7], store_host=f[8], body_length=_int(f[9]),
                    msg_type=TraceMessageType(_int(f[11])),
                )  # fmt: skip
                ctx = TraceContext(
                    TraceType.Pub, _int(f[1]), f[2], f[3], cost_time=_int(f[10]), trace_beans=[bean]
                )
                if len(f) == 13:
                    ctx.success = f[12] == "true"
                else:
                    bean.offset_msg_id, ctx.success = f[12], f[13] == "true"
                    if len(f) >= 15:
                        bean.client_host = f[14]
                out.append(ctx)
            elif kind == TraceType.SubBefore.value and len(f) >= 8:
                bean = TraceBean(msg_id=f[5], retry_times=_int(f[6]), keys=f[7])
                out.append(
                    TraceContext(
                        TraceType.SubBefore, _int(f[1]), f[2], f[3], request_id=f[4], trace_beans=[bean]
                    )
                )
            elif kind == TraceType.SubAfter.value and len(f) >= 6:
                ctx = TraceContext(
                    TraceType.SubAfter, 0, request_id=f[1], cost_time=_int(f[3]), success=f[4] == "true",
                    trace_beans=[TraceBean(msg_id=f[2], keys=f[5])],
                )  # fmt: skip
                if len(f) >= 7:
                    ctx.context_code = _int(f[6])
                if len(f) >= 9:
                    ctx.time_stamp, ctx.group_name = _int(f[7]), f[8]
                out.append(ctx)
            elif kind == TraceType.EndTransaction.value and len(f) >= 13:
                bean = TraceBean(
                    topic=f[4], msg_id=f[5], tags=f[6], keys=f[7], store_host=f[8],
                    msg_type=TraceMessageType(_int(f[9])), transaction_id=f[10], transaction_state=f[11],
                    from_transaction_check=f[12] == "true",
                )  # fmt: skip
                out.append(TraceContext(TraceType.EndTransaction, _int(f[1]), f[2], f[3], trace_beans=[bean]))
        except ValueError:
            continue
    return out


@dataclass(frozen=True, slots=True)
class TraceView:
    """One line of a message's trace (Java ``TraceView``)."""

    msg_type: str
    msg_id: str
    group_name: str
    time_stamp: int
    cost_time: int
    status: str
    client_host: str
    store_host: str
    topic: str
    tags: str | None
    keys: str | None


def trace_views(msg_id: str, trace_body: str, client_host: str) -> list[TraceView]:
    """Java ``TraceView.decodeFromTraceTransData``: the records of one trace message about
    ``msg_id``; ``client_host`` is the trace message's born host."""
    return [
        TraceView(
            msg_type=ctx.trace_type.value,
            msg_id=bean.msg_id,
            group_name=ctx.group_name,
            time_stamp=ctx.time_stamp,
            cost_time=ctx.cost_time,
            status="success" if ctx.success else "failed",
            client_host=client_host,
            store_host=bean.store_host,
            topic=bean.topic,
            tags=bean.tags,
            keys=bean.keys,
        )
        for ctx in decode_trace_data(trace_body)
        for bean in ctx.trace_beans[:1]
        if bean.msg_id == msg_id
    ]
