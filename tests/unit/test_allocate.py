"""Queue allocation: upstream's exact arithmetic (docs/PROTOCOL.md 6.10) and strategy invariants."""

from __future__ import annotations

import dataclasses
import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiorocketmq.client.allocate import (
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueByConfig,
    AllocateMessageQueueByMachineRoom,
    AllocateMessageQueueConsistentHash,
    queue_to_string,
    sort_cids,
    sort_queues,
)
from aiorocketmq.protocol.errors import MQClientError


@dataclasses.dataclass(frozen=True)
class MQ:
    topic: str
    broker_name: str
    queue_id: int


def queues(n: int, brokers: tuple[str, ...] = ("broker-a",)) -> list[MQ]:
    per = [MQ("T", b, i) for b in brokers for i in range(n)]
    return sort_queues(per)


def cids(c: int) -> list[str]:
    return sort_cids(f"10.0.0.{i}@{i}" for i in range(c))


def java_averagely(n: int, c: int, index: int) -> list[int]:
    """A line-by-line transcription of AllocateMessageQueueAveragely.allocate (indices)."""
    mod = n % c
    if n <= c:
        average_size = 1
    else:
        average_size = n // c + 1 if (mod > 0 and index < mod) else n // c
    start_index = index * average_size if (mod > 0 and index < mod) else index * average_size + mod
    range_ = min(average_size, n - start_index)
    return [(start_index + i) % n for i in range(range_)]


AVG = AllocateMessageQueueAveragely()


@pytest.mark.parametrize(
    ("n", "c", "expected"),
    [
        # n < c: the first n consumers get one queue each, the rest none
        (3, 5, [[0], [1], [2], [], []]),
        # n == c: one each
        (4, 4, [[0], [1], [2], [3]]),
        # n > c, no remainder
        (8, 4, [[0, 1], [2, 3], [4, 5], [6, 7]]),
        # n > c with remainder: the first n % c consumers take one more
        (8, 3, [[0, 1, 2], [3, 4, 5], [6, 7]]),
        (10, 4, [[0, 1, 2], [3, 4, 5], [6, 7], [8, 9]]),
        (5, 2, [[0, 1, 2], [3, 4]]),
        (16, 3, [[0, 1, 2, 3, 4, 5], [6, 7, 8, 9, 10], [11, 12, 13, 14, 15]]),
        (1, 1, [[0]]),
    ],
)
def test_averagely_exact(n: int, c: int, expected: list[list[int]]) -> None:
    mqs = queues(n)
    ids = cids(c)
    got = [[mqs.index(q) for q in AVG.allocate("G", cid, mqs, ids)] for cid in ids]
    assert got == expected


@given(st.integers(1, 64), st.integers(1, 20))
def test_averagely_matches_java_and_partitions(n: int, c: int) -> None:
    mqs = queues(n)
    ids = cids(c)
    seen: list[MQ] = []
    for i, cid in enumerate(ids):
        got = AVG.allocate("G", cid, mqs, ids)
        assert [mqs.index(q) for q in got] == java_averagely(n, c, i)
        seen.extend(got)
    assert sorted(seen, key=mqs.index) == mqs  # every queue exactly once


@given(st.integers(1, 64), st.integers(1, 20))
def test_by_circle_partitions(n: int, c: int) -> None:
    mqs = queues(n)
    ids = cids(c)
    strategy = AllocateMessageQueueAveragelyByCircle()
    seen = []
    for i, cid in enumerate(ids):
        got = strategy.allocate("G", cid, mqs, ids)
        assert [mqs.index(q) for q in got] == list(range(i, n, c))
        seen.extend(got)
    assert sorted(seen, key=mqs.index) == mqs


def test_consistent_hash_matches_md5_ring_and_partitions() -> None:
    mqs = queues(8, ("broker-a", "broker-b"))
    ids = cids(3)
    strategy = AllocateMessageQueueConsistentHash()

    def h(key: str) -> int:
        return int.from_bytes(hashlib.md5(key.encode()).digest()[:4], "big")

    ring = sorted((h(f"{cid}-{i}"), cid) for cid in ids for i in range(10))
    owner = {}
    for q in mqs:
        hq = h(queue_to_string(q))
        owner[q] = next((cid for hv, cid in ring if hv >= hq), ring[0][1])
    seen = []
    for cid in ids:
        got = strategy.allocate("G", cid, mqs, ids)
        assert got == [q for q in mqs if owner[q] == cid]
        seen.extend(got)
    assert sorted(seen, key=mqs.index) == mqs


def test_queue_to_string_is_java_tostring() -> None:
    assert queue_to_string(MQ("T", "b", 3)) == "MessageQueue [topic=T, brokerName=b, queueId=3]"


def test_by_config_and_machine_room() -> None:
    fixed = [MQ("T", "b", 1)]
    assert AllocateMessageQueueByConfig(fixed).allocate("G", "x", queues(4), ["x"]) == fixed
    mqs = sort_queues([MQ("T", f"{idc}@b{j}", i) for idc in ("hz", "sh") for j in (1, 2)
                       for i in range(2)])
    ids = cids(3)
    room = AllocateMessageQueueByMachineRoom({"hz"})
    hz = [q for q in mqs if q.broker_name.startswith("hz@")]  # 4 queues over 3 consumers
    got = [room.allocate("G", cid, mqs, ids) for cid in ids]
    assert got == [[hz[0], hz[3]], [hz[1]], [hz[2]]]


def test_unknown_cid_gets_nothing_and_bad_input_raises() -> None:
    mqs = queues(4)
    assert AVG.allocate("G", "nobody", mqs, cids(2)) == []
    with pytest.raises(MQClientError):
        AVG.allocate("G", "", mqs, cids(2))
    with pytest.raises(MQClientError):
        AVG.allocate("G", "a", [], ["a"])
    with pytest.raises(MQClientError):
        AVG.allocate("G", "a", mqs, [])


def test_sorting_is_java_compare_to() -> None:
    # Java compares UTF-16 code units: U+FF5E sorts after U+1F600's high surrogate (D83D).
    assert sort_cids(["\U0001F600", "\uFF5E", "a"]) == ["a", "\U0001F600", "\uFF5E"]
    mqs = [MQ("T", "b", 10), MQ("T", "b", 2), MQ("T", "a", 5), MQ("S", "z", 0)]
    assert sort_queues(mqs) == [MQ("S", "z", 0), MQ("T", "a", 5), MQ("T", "b", 2), MQ("T", "b", 10)]
