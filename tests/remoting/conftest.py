"""What the remoting tests share: request codes, the echo processor, servers on loopback, and a
channel that records what it is sent (for the dispatcher without sockets)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from typing import Any

import pytest

from finchmq.protocol import RemotingCommand, ResponseCode
from finchmq.remoting import (
    Answer,
    ExecutorName,
    Later,
    RemotingContext,
    RemotingSendRequestError,
    RemotingServer,
    RemotingServerConfig,
    RequestExecutor,
    RequestProcessor,
    handles,
)

ECHO = 9001
SLOW = 9002
NEVER = 9003
CALL_BACK = 9005
FAIL = 9006
QUEUED = 9007  # EchoNow leaves it to the executor (Later), then answers it at once
STALL = 9008


def echoed(request: RemotingCommand) -> RemotingCommand:
    """SUCCESS with the request's extFields and body."""
    return request.make_response(ResponseCode.SUCCESS, ext_fields=dict(request.ext_fields), body=request.body)


class Echo(RequestProcessor):
    """Answers with the request's extFields and body; counts what it saw. Every handler is a
    coroutine function, so every request runs on the executor's worker, as in a thread pool.

    A SLOW request sleeps (``sleep``, 0.05 s by default), after waiting for ``gate`` when it says
    ``hold``: a test holds the worker that way as long as it needs to, however fast the machine.
    NEVER is never answered; FAIL raises."""

    executor = ExecutorName.SEND

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[RemotingCommand] = []
        self.rejecting = False
        self.gate = asyncio.Event()

    @handles(ECHO)
    async def echo(self, ctx: RemotingContext, request: RemotingCommand) -> Answer:
        self.seen.append(request)
        return echoed(request)

    @handles(SLOW)
    async def slow(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        self.seen.append(request)
        if "hold" in request.ext_fields:
            await self.gate.wait()
        await asyncio.sleep(float(request.ext_fields.get("sleep", "0.05")))
        return echoed(request)

    @handles(NEVER)
    async def never(self, ctx: RemotingContext, request: RemotingCommand) -> None:
        self.seen.append(request)

    @handles(FAIL)
    async def fail(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        self.seen.append(request)
        raise ValueError("processor exploded")

    def reject_request(self) -> bool:
        return self.rejecting


class EchoNow(Echo):
    """Echo whose ECHO is answered at once on the loop by a plain handler (as the broker answers a
    send to a known topic), and whose QUEUED is given back as ``Later``: the executor's worker
    answers it."""

    @handles(ECHO, QUEUED)
    def echo(self, ctx: RemotingContext, request: RemotingCommand) -> Answer:  # type: ignore[override]
        self.seen.append(request)
        response = echoed(request)
        if request.code == QUEUED:

            async def resume() -> RemotingCommand:
                return response

            return Later(resume)
        return response


async def settle(tasks: Iterable[asyncio.Future[Any]]) -> None:
    """Cancel what is left of ``tasks`` and wait for them all (a test's ``finally``): a test
    that fails halfway leaves no task, and no exception nobody retrieved, behind."""
    tasks = list(tasks)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def by_name(*executors: RequestExecutor) -> dict[ExecutorName, RequestExecutor]:
    """The executors mapping ``register_processor`` takes."""
    return {executor.name: executor for executor in executors}


def server_config(**kwargs: object) -> RemotingServerConfig:
    kwargs.setdefault("listen_port", 0)
    return RemotingServerConfig(bind_address="127.0.0.1", **kwargs)  # type: ignore[arg-type]


def addr(server: RemotingServer) -> str:
    return f"127.0.0.1:{server.port}"


@pytest.fixture
async def echo_server() -> AsyncIterator[tuple[RemotingServer, Echo]]:
    server = RemotingServer(server_config())
    echo = Echo()
    server.register_processor(echo, by_name(RequestExecutor(ExecutorName.SEND, workers=8, capacity=1000)))
    await server.start()
    yield server, echo
    await server.close()


class RecordingChannel:
    """A ``Channel`` that keeps what is written to it, for driving a dispatcher without sockets:
    an answer given on the loop is in ``sent`` as soon as ``dispatch`` returns."""

    def __init__(self, remote_addr: str = "10.0.0.1:4321") -> None:
        self.remote_addr = remote_addr
        self.is_open = True
        self.paused = False
        self.sent: list[RemotingCommand] = []

    def __repr__(self) -> str:
        return f"<RecordingChannel {self.remote_addr}>"

    def send_command(self, cmd: RemotingCommand) -> None:
        if not self.is_open:
            raise RemotingSendRequestError(f"{self.remote_addr} is closed", self.remote_addr)
        self.sent.append(cmd)

    async def invoke(self, request: RemotingCommand, timeout: float) -> RemotingCommand:
        raise NotImplementedError("nobody calls this peer")

    async def send_oneway(self, request: RemotingCommand) -> None:
        raise NotImplementedError("nobody calls this peer")

    def pause_requests(self) -> None:
        self.paused = True

    def resume_requests(self) -> None:
        self.paused = False

    def close(self) -> None:
        self.is_open = False
