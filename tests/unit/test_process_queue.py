"""ProcessQueue: offset order, counters, commit offsets, orderly take/commit/rollback."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from aiorocketmq.client.process_queue import (
    PULL_MAX_IDLE_TIME_MS,
    REBALANCE_LOCK_MAX_LIVE_TIME_MS,
    ProcessQueue,
)
from aiorocketmq.protocol.message import MessageExt


def msg(offset: int, size: int = 3, max_offset: int | None = None) -> MessageExt:
    props = {"MAX_OFFSET": str(max_offset)} if max_offset is not None else {}
    return MessageExt("T", b"x" * size, properties=props, queue_offset=offset)


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_put_counts_and_dispatch_once() -> None:
    pq = ProcessQueue()
    assert pq.put_messages([msg(0), msg(1), msg(2, max_offset=10)]) is True
    assert (pq.msg_count, pq.msg_size, pq.queue_offset_max) == (3, 9, 2)
    assert pq.msg_acc_cnt == 8
    # already consuming: no second dispatch; duplicates are not counted twice
    assert pq.put_messages([msg(2), msg(3)]) is False
    assert (pq.msg_count, pq.msg_size, pq.max_span) == (4, 12, 3)


def test_remove_returns_commit_offset() -> None:
    pq = ProcessQueue()
    assert pq.remove_message([msg(0)]) == -1  # empty cache: nothing to commit
    pq.put_messages([msg(o) for o in range(5, 10)])
    # out-of-order completion: the lowest unconsumed offset is what may be committed
    assert pq.remove_message([msg(7), msg(8)]) == 5
    assert pq.remove_message([msg(5)]) == 6
    assert pq.remove_message([msg(6), msg(9)]) == 10  # all gone: queueOffsetMax + 1
    assert (pq.msg_count, pq.msg_size, pq.max_span) == (0, 0, 0)


@given(st.lists(st.integers(0, 200), min_size=1, unique=True), st.data())
def test_remove_invariant(offsets: list[int], data: st.DataObject) -> None:
    pq = ProcessQueue()
    pq.put_messages([msg(o) for o in sorted(offsets)])
    done = data.draw(st.lists(st.sampled_from(offsets), unique=True))
    result = pq.remove_message([msg(o) for o in done])
    left = sorted(set(offsets) - set(done))
    assert result == (left[0] if left else max(offsets) + 1)
    assert pq.msg_count == len(left)
    assert [m.queue_offset for m in pq.messages()] == left


def test_orderly_take_commit_rollback() -> None:
    pq = ProcessQueue()
    pq.put_messages([msg(o) for o in range(4)])
    batch = pq.take_messages(2)
    assert [m.queue_offset for m in batch] == [0, 1]
    pq.rollback()
    assert [m.queue_offset for m in pq.take_messages(3)] == [0, 1, 2]
    pq.make_message_to_consume_again([msg(2)])
    assert pq.commit() == 2  # 0 and 1 committed, 2 goes back
    assert pq.msg_count == 2
    assert [m.queue_offset for m in pq.take_messages(5)] == [2, 3]
    assert pq.commit() == 4
    assert pq.take_messages(1) == []
    assert pq.consuming is False
    assert pq.commit() == -1
    assert (pq.msg_count, pq.msg_size) == (0, 0)


def test_expiry_uses_clock() -> None:
    clock = Clock()
    pq = ProcessQueue(clock)
    assert not pq.is_lock_expired() and not pq.is_pull_expired()
    clock.t += REBALANCE_LOCK_MAX_LIVE_TIME_MS + 1
    assert pq.is_lock_expired() and not pq.is_pull_expired()
    pq.touch_lock()
    assert not pq.is_lock_expired()
    clock.t += PULL_MAX_IDLE_TIME_MS
    assert pq.is_pull_expired()
    pq.touch_pull()
    assert not pq.is_pull_expired()


def test_info_fields() -> None:
    pq = ProcessQueue()
    pq.put_messages([msg(3), msg(9)])
    pq.take_messages(1)
    info = pq.info()
    assert info.cached_msg_min_offset == 9 and info.cached_msg_count == 1
    assert info.transaction_msg_min_offset == 3 and info.transaction_msg_count == 1
    assert info.dropped is False and info.last_pull_timestamp > 0
    assert b'"droped":false' in info.encode()
