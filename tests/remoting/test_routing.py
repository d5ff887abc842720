"""How a request finds its handler (``routing.py``): the ``@handles`` table a ``RequestProcessor``
builds when its class is created, ``process`` for each kind of handler, and how a dispatcher
registers processors from their tables."""

from __future__ import annotations

import asyncio

import pytest

from finchmq.protocol import RemotingCommand, ResponseCode
from finchmq.remoting import (
    Answer,
    ExecutorName,
    Later,
    RemotingContext,
    RequestDispatcher,
    RequestExecutor,
    RequestProcessor,
    handles,
)
from tests.remoting.conftest import RecordingChannel, by_name

PLAIN = 9201
ALSO_PLAIN = 9202
ASYNC = 9203
LATER = 9204
NOTHING = 9205
HEARTBEAT = 9206
OTHER = 9301


class Answers(RequestProcessor):
    """One handler of each kind; each answer says which handler gave it."""

    executor = ExecutorName.CLIENT_MANAGE

    def __init__(self) -> None:
        super().__init__()
        self.resumed: list[int] = []

    @handles(PLAIN, ALSO_PLAIN)
    def plain(self, ctx: RemotingContext, request: RemotingCommand) -> Answer:
        return request.make_response(ResponseCode.SUCCESS, "plain", ext_fields={"from": ctx.remote_addr})

    @handles(ASYNC)
    async def coroutine(self, ctx: RemotingContext, request: RemotingCommand) -> Answer:
        await asyncio.sleep(0)
        return request.make_response(ResponseCode.SUCCESS, "async")

    @handles(LATER)
    def later(self, ctx: RemotingContext, request: RemotingCommand) -> Answer:
        decoded = request.ext_fields["n"]  # what the plain part decoded, shared with the rest

        async def resume() -> RemotingCommand:
            self.resumed.append(request.opaque)
            return request.make_response(ResponseCode.SUCCESS, "later", ext_fields={"n": decoded})

        return Later(resume)

    @handles(NOTHING)
    def nothing(self, ctx: RemotingContext, request: RemotingCommand) -> Answer:
        return None

    @handles(HEARTBEAT, executor=ExecutorName.HEARTBEAT)
    def heartbeat(self, ctx: RemotingContext, request: RemotingCommand) -> Answer:
        return request.make_response(ResponseCode.SUCCESS, "heartbeat")

    def not_a_handler(self, ctx: RemotingContext, request: RemotingCommand) -> Answer:
        return None


class Other(RequestProcessor):
    executor = ExecutorName.ADMIN

    @handles(OTHER)
    def other(self, ctx: RemotingContext, request: RemotingCommand) -> Answer:
        return request.make_response(ResponseCode.SUCCESS, "other")


def ctx() -> RemotingContext:
    return RemotingContext(RecordingChannel("10.1.2.3:777"))


def request(code: int, opaque: int = 5, **ext_fields: str) -> RemotingCommand:
    return RemotingCommand.request(code, ext_fields).with_opaque(opaque)


# -- the @handles table ------------------------------------------------------------------------


def test_the_table_is_built_when_the_class_is_created() -> None:
    assert Answers.handlers == {
        PLAIN: ("plain", None),
        ALSO_PLAIN: ("plain", None),
        ASYNC: ("coroutine", None),
        LATER: ("later", None),
        NOTHING: ("nothing", None),
        HEARTBEAT: ("heartbeat", ExecutorName.HEARTBEAT),
    }
    assert Other.handlers == {OTHER: ("other", None)}  # each class its own table
    assert RequestProcessor.handlers == {}


def test_executors_by_code_applies_the_handler_s_override() -> None:
    assert Answers.executors_by_code() == {
        PLAIN: ExecutorName.CLIENT_MANAGE,
        ALSO_PLAIN: ExecutorName.CLIENT_MANAGE,
        ASYNC: ExecutorName.CLIENT_MANAGE,
        LATER: ExecutorName.CLIENT_MANAGE,
        NOTHING: ExecutorName.CLIENT_MANAGE,
        HEARTBEAT: ExecutorName.HEARTBEAT,
    }


def test_a_subclass_inherits_the_table_and_may_move_a_handler_to_another_executor() -> None:
    class Moved(Answers):
        @handles(HEARTBEAT, executor=ExecutorName.CLIENT)
        def heartbeat(self, ctx: RemotingContext, request: RemotingCommand) -> Answer:
            return request.make_response(ResponseCode.SUCCESS, "moved")

    assert Moved.handlers == {**Answers.handlers, HEARTBEAT: ("heartbeat", ExecutorName.CLIENT)}
    assert Answers.handlers[HEARTBEAT] == ("heartbeat", ExecutorName.HEARTBEAT)  # the base unchanged
    answer = Moved().process(ctx(), request(HEARTBEAT))
    assert isinstance(answer, RemotingCommand) and answer.remark == "moved"


def test_a_code_handled_by_two_methods_is_refused_when_the_class_is_created() -> None:
    with pytest.raises(TypeError, match=rf"Twice: request code {PLAIN} handled by first and second"):

        class Twice(RequestProcessor):
            executor = ExecutorName.ADMIN

            @handles(PLAIN)
            def first(self, ctx: RemotingContext, request: RemotingCommand) -> Answer:
                return None

            @handles(ASYNC, PLAIN)
            def second(self, ctx: RemotingContext, request: RemotingCommand) -> Answer:
                return None

    with pytest.raises(
        TypeError, match=rf"AlsoInSubclass: request code {PLAIN} handled by plain and plain_too"
    ):

        class AlsoInSubclass(Answers):  # a new method for a code the base already handles
            @handles(PLAIN)
            def plain_too(self, ctx: RemotingContext, request: RemotingCommand) -> Answer:
                return None


def test_handles_needs_a_code() -> None:
    with pytest.raises(TypeError, match="at least one request code"):
        handles()


# -- process -----------------------------------------------------------------------------------


async def test_process_answers_a_plain_handler_at_once() -> None:
    answer = Answers().process(ctx(), request(ALSO_PLAIN, opaque=42))
    assert isinstance(answer, RemotingCommand)
    assert (answer.code, answer.remark, answer.opaque, answer.is_response) == (
        ResponseCode.SUCCESS,
        "plain",
        42,
        True,
    )
    assert answer.ext_fields == {"from": "10.1.2.3:777"}  # the handler got the context
    assert Answers().process(ctx(), request(NOTHING)) is None


async def test_process_gives_a_coroutine_handler_back_as_later() -> None:
    answer = Answers().process(ctx(), request(ASYNC))
    assert isinstance(answer, Later)
    response = await answer.resume()
    assert response is not None and response.remark == "async"


async def test_process_gives_a_handler_s_later_back_and_its_resume_finishes_the_request() -> None:
    answers = Answers()
    answer = answers.process(ctx(), request(LATER, opaque=7, n="decoded once"))
    assert isinstance(answer, Later) and answers.resumed == []  # nothing of the rest ran yet
    response = await answer.resume()
    assert answers.resumed == [7]
    assert response is not None and (response.remark, response.ext_fields) == ("later", {"n": "decoded once"})


async def test_process_answers_an_unknown_code_not_supported() -> None:
    answer = Answers().process(ctx(), request(12345, opaque=9))
    assert isinstance(answer, RemotingCommand)
    assert (answer.code, answer.remark, answer.opaque) == (
        ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
        " request type 12345 not supported",
        9,
    )
    assert not Answers().reject_request()


async def test_process_request_runs_every_kind_to_the_end() -> None:
    answers = Answers()
    for code, remark in (
        (PLAIN, "plain"),
        (ASYNC, "async"),
        (LATER, "later"),
        (HEARTBEAT, "heartbeat"),
        (12345, " request type 12345 not supported"),
    ):
        response = await answers.process_request(ctx(), request(code, n="x"))
        assert response is not None and response.remark == remark
    assert await answers.process_request(ctx(), request(NOTHING)) is None


# -- registering with a dispatcher -------------------------------------------------------------


def executors(*names: ExecutorName) -> dict[ExecutorName, RequestExecutor]:
    return by_name(*(RequestExecutor(name, workers=1, capacity=10) for name in names))


def test_register_processor_routes_every_code_to_the_executor_its_table_names() -> None:
    dispatcher = RequestDispatcher()
    pools = executors(
        ExecutorName.CLIENT_MANAGE, ExecutorName.HEARTBEAT, ExecutorName.ADMIN, ExecutorName.PULL
    )
    dispatcher.register_processor(Answers(), pools)
    dispatcher.register_processor(Other(), pools)  # executors are shared between processors
    assert dispatcher.codes == frozenset(Answers.handlers) | {OTHER}
    # only the executors that run a code are the dispatcher's (started, closed, measured)
    assert dispatcher.executors == {
        name: pools[name] for name in (ExecutorName.CLIENT_MANAGE, ExecutorName.HEARTBEAT, ExecutorName.ADMIN)
    }


def test_register_processor_refuses_a_code_registered_twice() -> None:
    class Clash(RequestProcessor):
        executor = ExecutorName.ADMIN

        @handles(OTHER)
        def mine_too(self, ctx: RemotingContext, request: RemotingCommand) -> Answer:
            return None

    dispatcher = RequestDispatcher()
    pools = executors(ExecutorName.ADMIN)
    dispatcher.register_processor(Other(), pools)
    with pytest.raises(ValueError, match=rf"request code {OTHER} is registered to both Other and Clash"):
        dispatcher.register_processor(Clash(), pools)
    with pytest.raises(ValueError, match=rf"request code {OTHER} is registered to both Other and Other"):
        dispatcher.register_processor(Other(), pools)  # the same processor twice


def test_register_processor_refuses_an_executor_missing_from_the_mapping() -> None:
    dispatcher = RequestDispatcher()
    with pytest.raises(ValueError, match=rf"Answers runs code {HEARTBEAT} on heartbeat, which is not given"):
        dispatcher.register_processor(Answers(), executors(ExecutorName.CLIENT_MANAGE))


class AlsoAdmin(RequestProcessor):
    executor = ExecutorName.ADMIN

    @handles(OTHER + 1)
    def other(self, ctx: RemotingContext, request: RemotingCommand) -> Answer:
        return None


def test_a_dispatcher_refuses_two_executors_with_one_name() -> None:
    dispatcher = RequestDispatcher()
    dispatcher.register_processor(Other(), executors(ExecutorName.ADMIN))
    with pytest.raises(ValueError, match="two executors named admin"):
        dispatcher.register_processor(AlsoAdmin(), executors(ExecutorName.ADMIN))  # another "admin"
    with pytest.raises(ValueError, match="two executors named admin"):
        dispatcher.register_default(AlsoAdmin(), RequestExecutor(ExecutorName.ADMIN, workers=1, capacity=1))
    assert dispatcher.codes == {OTHER}
    # the same executor again is no clash: processors share executors
    dispatcher.register_processor(AlsoAdmin(), dispatcher.executors)
    assert dispatcher.codes == {OTHER, OTHER + 1}


async def test_register_processor_skips_the_codes_of_executors_it_is_told_to_skip() -> None:
    dispatcher = RequestDispatcher()
    dispatcher.register_processor(
        Answers(), executors(ExecutorName.CLIENT_MANAGE), skip={ExecutorName.HEARTBEAT}
    )
    assert dispatcher.codes == frozenset(Answers.handlers) - {HEARTBEAT}
    assert set(dispatcher.executors) == {ExecutorName.CLIENT_MANAGE}
    channel = RecordingChannel()
    dispatcher.dispatch(RemotingContext(channel), request(HEARTBEAT, opaque=3))
    assert [(r.opaque, r.code) for r in channel.sent] == [(3, ResponseCode.REQUEST_CODE_NOT_SUPPORTED)]


async def test_register_default_takes_every_code_without_a_processor() -> None:
    dispatcher = RequestDispatcher()
    dispatcher.register_processor(Other(), executors(ExecutorName.ADMIN))
    dispatcher.register_default(Answers(), RequestExecutor(ExecutorName.CLIENT_MANAGE, workers=1, capacity=1))
    channel = RecordingChannel()
    dispatcher.dispatch(RemotingContext(channel), request(OTHER, opaque=1))
    dispatcher.dispatch(RemotingContext(channel), request(PLAIN, opaque=2))
    dispatcher.dispatch(RemotingContext(channel), request(777, opaque=3))  # the default's answer
    assert [(r.opaque, r.code, r.remark) for r in channel.sent] == [
        (1, ResponseCode.SUCCESS, "other"),
        (2, ResponseCode.SUCCESS, "plain"),
        (3, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, " request type 777 not supported"),
    ]
