"""Shared test set-up: every async test runs on uvloop in debug mode, fails if a callback blocks
the loop for more than 50 ms, and fails if it leaves tasks behind."""

from __future__ import annotations

import asyncio
import inspect
import logging
import random
from collections.abc import AsyncIterator, Callable, Iterator, Mapping

import pytest
from hypothesis import settings

from finchmq.remoting.loop import loop_factory
from tests.tls_certs import tls_files  # noqa: F401 - a fixture for every test directory

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


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--shuffle",
        metavar="SEED",
        default=None,
        help="run the test modules, and the tests inside each, in an order shuffled by SEED "
        "(make test-stress), so that a test relying on another's leftovers shows",
    )


def pytest_report_header(config: pytest.Config) -> str | None:
    seed = config.getoption("--shuffle")
    return (
        None if seed is None else f"test order shuffled by seed {seed} (same order again: --shuffle={seed})"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if isinstance(item, pytest.Function) and inspect.iscoroutinefunction(item.obj):
            item.add_marker(pytest.mark.usefixtures("no_leaked_tasks"))
    seed = config.getoption("--shuffle")
    if seed is not None:
        items[:] = shuffled_by_module(items, random.Random(seed))


def shuffled_by_module(items: list[pytest.Item], rng: random.Random) -> list[pytest.Item]:
    """Modules in a random order, and each module's tests in a random order (pytest-randomly's way:
    module-scoped fixtures are still set up once per module)."""
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    groups = list(modules.values())
    rng.shuffle(groups)
    for group in groups:
        rng.shuffle(group)
    return [item for group in groups for item in group]


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
