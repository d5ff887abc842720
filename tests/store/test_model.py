"""Property test: any sequence of puts, restarts (clean or crash-like) and reads agrees with an
in-memory model of the queues."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from finchmq.protocol.stored import decode_stored_all
from finchmq.store import DefaultMessageStore, GetMessageStatus, MessageStoreConfig
from finchmq.store.checkpoint import StoreCheckpoint

from .conftest import batch, msg, small_config

TOPICS = ("A", "B")
QUEUES = (0, 1)
bodies = st.binary(min_size=0, max_size=3000)


class StoreModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="finchmq-model-"))
        self.cfg: MessageStoreConfig = small_config(
            self.dir / "store", mapped_file_size_commit_log=16 * 1024, mapped_file_size_consume_queue=5 * 20
        )
        self.model: dict[tuple[str, int], list[bytes]] = {}
        self.store: DefaultMessageStore | None = self._open()

    def _open(self) -> DefaultMessageStore:
        s = DefaultMessageStore(self.cfg)
        s.load()
        s.start()
        assert s.recovery_report == []
        return s

    @rule(topic=st.sampled_from(TOPICS), q=st.sampled_from(QUEUES), body=bodies, key=st.integers(0, 9))
    def put(self, topic: str, q: int, body: bytes, key: int) -> None:
        assert self.store is not None
        r = self.store.put_message(msg(topic, body, queue_id=q, KEYS=f"k{key}"))
        assert r.is_ok() and r.append_message_result is not None
        queue = self.model.setdefault((topic, q), [])
        assert r.append_message_result.logics_offset == len(queue)
        queue.append(body)

    @rule(
        topic=st.sampled_from(TOPICS),
        q=st.sampled_from(QUEUES),
        items=st.lists(bodies, min_size=1, max_size=6),
    )
    def put_batch(self, topic: str, q: int, items: list[bytes]) -> None:
        assert self.store is not None
        r = self.store.put_messages(batch(topic, items, queue_id=q))
        assert r.is_ok() and r.append_message_result is not None
        queue = self.model.setdefault((topic, q), [])
        assert r.append_message_result.logics_offset == len(queue)
        queue.extend(items)

    @rule(crash=st.booleans())
    def restart(self, crash: bool) -> None:
        assert self.store is not None
        self.store.shutdown()
        if crash:  # what a killed process leaves: the abort file and no clean-shutdown record
            self.cfg.abort_path.write_text("1")
            cp = StoreCheckpoint(self.cfg.checkpoint_path)
            cp.clear_clean_shutdown()
            cp.shutdown()
        self.store = self._open()

    @precondition(lambda self: bool(self.model))
    @rule(data=st.data())
    def read(self, data: st.DataObject) -> None:
        assert self.store is not None
        (topic, q) = data.draw(st.sampled_from(sorted(self.model)))
        expected = self.model[(topic, q)]
        offset = data.draw(st.integers(0, len(expected) + 2))
        n = data.draw(st.integers(1, 40))
        with self.store.get_message("g", topic, q, offset, n) as r:
            if offset < len(expected):
                assert r.status is GetMessageStatus.FOUND
                got = [m.body for m in decode_stored_all(r.body(), verify_crc=True)]
                assert got == expected[offset : offset + len(got)]
                assert 1 <= len(got) <= n
                assert r.next_begin_offset == offset + len(got)
            elif offset == len(expected):
                assert r.status is GetMessageStatus.OFFSET_OVERFLOW_ONE
            else:
                assert r.status is GetMessageStatus.OFFSET_OVERFLOW_BADLY

    @invariant()
    def offsets_match(self) -> None:
        if self.store is None:
            return
        for (topic, q), queue in self.model.items():
            assert self.store.get_max_offset_in_queue(topic, q) == len(queue)

    def teardown(self) -> None:
        if self.store is not None:
            self.store.shutdown()
        shutil.rmtree(self.dir, ignore_errors=True)


StoreModel.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestStoreModel = StoreModel.TestCase
