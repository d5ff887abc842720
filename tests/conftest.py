"""Shared test set-up: every async test runs on uvloop in debug mode, fails if a callback blocks
the loop for more than 50 ms, and fails if it leaves tasks behind."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import AsyncIterator, Callable, Iterator, Mapping

import pytest
from hypothesis import settings

from finchmq.remoting.loop import loop_factory

# No per-example deadline: a loaded machine (two suites on two cores) makes any fixed deadline a
# timing assertion. Hypothesis still reports the slowest examples.
settings.register_profile("finchmq", deadline=None)
settings.load_profile("finchmq")

SLOW_CALLBACK_SECONDS = 0.05


def _debug_loop_factory() -> asyncio.AbstractEventLoop:
    loop = loop_factory()()
    loop.set_debug(True)
    loop.slow_callback_duration = SLOW_CALLBACK_SECONDS
    return loop


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> Mapping[str, Callable[[], asyncio.AbstractEventLoop]]:
    return {"uvloop-debug": _debug_loop_factory}


class _SlowCallbackRecorder(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith("Executing") and " took " in message:
            self.records.append(message)


@pytest.fixture(autouse=True)
def fail_on_slow_callbacks(request: pytest.FixtureRequest) -> Iterator[None]:
    """A callback that blocks the loop is a bug (house style §12); tests may opt out by marker."""
    recorder = _SlowCallbackRecorder()
    logger = logging.getLogger("asyncio")
    logger.addHandler(recorder)
    try:
        yield
    finally:
        logger.removeHandler(recorder)
    if recorder.records and request.node.get_closest_marker("allow_slow_callbacks") is None:
        pytest.fail("the event loop was blocked:\n" + "\n".join(recorder.records[:5]))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if isinstance(item, pytest.Function) and inspect.iscoroutinefunction(item.obj):
            item.add_marker(pytest.mark.usefixtures("no_leaked_tasks"))


@pytest.fixture
async def no_leaked_tasks() -> AsyncIterator[None]:
    """Every task a test starts is finished by the time the test ends."""
    before = asyncio.all_tasks()
    yield
    await asyncio.sleep(0)
    leaked = [t for t in asyncio.all_tasks() - before if t is not asyncio.current_task() and not t.done()]
    for task in leaked:
        task.cancel()
    assert not leaked, f"tasks left running: {leaked}"
