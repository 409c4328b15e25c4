"""MessageStore.put_message_nowait / put_messages_nowait: the send hot path's synchronous puts.

ASYNC_FLUSH answers with a PutMessageResult at once (record appended and dispatched
before the call returns); SYNC_FLUSH answers with an awaitable that completes after the
group commit; refusals are immediate in both modes.
"""

from __future__ import annotations

import inspect
import threading

import pytest

from aiorocketmq.server.store.inner import PutMessageResult, PutMessageStatus
from aiorocketmq.server.store.message_store import GetMessageStatus, MessageStore
from tests.unit.test_store_message_store import _block_store_threads, msg, open_store, pull_all

__all__ = ["open_store"]  # the fixture, re-exported for pytest

pytestmark = pytest.mark.timeout(120)


async def test_async_flush_answers_inline(open_store) -> None:
    store: MessageStore = await open_store()
    arrived: list[tuple[str, int, int]] = []
    store.set_message_arriving_listener(lambda t, q, mx, *_: arrived.append((t, q, mx)))
    results = [store.put_message_nowait(msg(i, queue_id=i % 2)) for i in range(10)]
    assert all(isinstance(r, PutMessageResult) for r in results)
    assert [r.status for r in results] == [PutMessageStatus.PUT_OK] * 10  # type: ignore[union-attr]
    offsets = [r.append_result.logics_offset for r in results]  # type: ignore[union-attr]
    assert offsets == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    # Dispatched before the call returned: readable and notified without any await.
    assert len(arrived) == 10
    assert [m.body for m in pull_all(store, "T", 0)] == [msg(i).body for i in range(0, 10, 2)]


async def test_async_flush_batch_answers_inline(open_store) -> None:
    store: MessageStore = await open_store()
    r = store.put_messages_nowait([msg(i) for i in range(5)])
    assert isinstance(r, PutMessageResult)
    assert r.status is PutMessageStatus.PUT_OK
    assert r.append_result is not None and r.append_result.msg_num == 5
    assert store.get_max_offset_in_queue("T", 0) == 5


async def test_async_flush_does_not_wait_for_a_stuck_flusher(open_store) -> None:
    store: MessageStore = await open_store()
    gate = threading.Event()
    _block_store_threads(store, gate)
    try:
        r = store.put_message_nowait(msg(1))
        assert isinstance(r, PutMessageResult) and r.status is PutMessageStatus.PUT_OK
    finally:
        gate.set()


async def test_sync_flush_gives_an_awaitable_after_appending(open_store) -> None:
    store: MessageStore = await open_store(flush_disk_type="SYNC_FLUSH",
                                           mapped_file_size_commit_log=1024 * 1024)
    pending = [store.put_message_nowait(msg(i)) for i in range(20)]
    assert all(inspect.isawaitable(p) for p in pending)
    # Appended and dispatched already; only durability is awaited.
    assert store.get_max_offset_in_queue("T", 0) == 20
    results = [await p for p in pending]  # type: ignore[misc]
    assert all(r.status is PutMessageStatus.PUT_OK for r in results)
    assert store.commit_log.mfq.flushed_where >= store.get_max_phy_offset()
    batch = store.put_messages_nowait([msg(100 + i) for i in range(3)])
    assert inspect.isawaitable(batch)
    assert (await batch).status is PutMessageStatus.PUT_OK  # type: ignore[misc]
    # WAIT=false: nobody waits for the fsync, so the answer is immediate.
    no_wait = store.put_message_nowait(msg(1000, WAIT="false"))
    assert isinstance(no_wait, PutMessageResult) and no_wait.status is PutMessageStatus.PUT_OK


async def test_sync_flush_timeout_through_the_awaitable(open_store) -> None:
    store: MessageStore = await open_store(flush_disk_type="SYNC_FLUSH", sync_flush_timeout_ms=50)
    gate = threading.Event()
    _block_store_threads(store, gate)
    try:
        pending = store.put_message_nowait(msg(1))
        assert inspect.isawaitable(pending)
        r = await pending
        assert r.status is PutMessageStatus.FLUSH_DISK_TIMEOUT and r.is_ok
    finally:
        gate.set()


async def test_refusals_are_immediate_in_both_modes(open_store, tmp_path) -> None:
    for mode in ("ASYNC_FLUSH", "SYNC_FLUSH"):
        store: MessageStore = await open_store(str(tmp_path / mode), flush_disk_type=mode)
        bad = store.put_message_nowait(msg(1, topic="x" * 200))
        assert isinstance(bad, PutMessageResult) and bad.status is PutMessageStatus.MESSAGE_ILLEGAL
        mixed = store.put_messages_nowait([msg(1), msg(2, queue_id=1)])
        assert isinstance(mixed, PutMessageResult)
        assert mixed.status is PutMessageStatus.MESSAGE_ILLEGAL
        empty = store.put_messages_nowait([])
        assert isinstance(empty, PutMessageResult)
        assert empty.status is PutMessageStatus.MESSAGE_ILLEGAL
        assert store.get_message("g", "T", 0, 0, 32).status is GetMessageStatus.NO_MATCHED_LOGIC_QUEUE
        await store.shutdown()
        stopped = store.put_message_nowait(msg(3))
        assert isinstance(stopped, PutMessageResult)
        assert stopped.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
