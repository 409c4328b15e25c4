"""Queue allocation strategies: which of a topic's queues this consumer takes.

Upstream ``org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueue*`` and
``common.consistenthash.ConsistentHashRouter`` (docs/PROTOCOL.md 6.10). Every consumer of a
group runs the same strategy over the same inputs and must reach the same answer as the
Java consumers it shares the group with, so the arithmetic here is upstream's exactly.

Contract: ``strategy.allocate(group, current_cid, mq_all, cid_all)`` where ``mq_all`` is
sorted with ``sort_queues`` and ``cid_all`` with ``sort_cids`` (``RebalanceImpl`` sorts
before it calls the strategy); returns this consumer's queues in ``mq_all`` order.
Pure logic: no I/O, no clock.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol, TypeVar

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.errors import MQClientError

__all__ = [
    "QueueLike",
    "AllocateStrategy",
    "AllocateMessageQueueAveragely",
    "AllocateMessageQueueAveragelyByCircle",
    "AllocateMessageQueueConsistentHash",
    "AllocateMessageQueueByConfig",
    "AllocateMessageQueueByMachineRoom",
    "java_string_key",
    "sort_queues",
    "sort_cids",
    "queue_to_string",
]

log = get_logger("aiorocketmq.client.allocate")


class QueueLike(Protocol):
    """What allocation reads of a MessageQueue."""

    @property
    def topic(self) -> str: ...
    @property
    def broker_name(self) -> str: ...
    @property
    def queue_id(self) -> int: ...


Q = TypeVar("Q", bound=QueueLike)


def java_string_key(s: str) -> bytes:
    """Sort key ordering strings as Java ``String.compareTo`` does (UTF-16 code units)."""
    return s.encode("utf-16-be", "surrogatepass")


def sort_queues(queues: Iterable[Q]) -> list[Q]:
    """``Collections.sort(mqAll)``: by topic, broker name, queue id (``MessageQueue.compareTo``)."""
    return sorted(queues, key=lambda q: (java_string_key(q.topic), java_string_key(q.broker_name),
                                         q.queue_id))


def sort_cids(cids: Iterable[str]) -> list[str]:
    """``Collections.sort(cidAll)`` on client ids."""
    return sorted(cids, key=java_string_key)


def queue_to_string(mq: QueueLike) -> str:
    """``MessageQueue.toString()``, the consistent-hash key."""
    return f"MessageQueue [topic={mq.topic}, brokerName={mq.broker_name}, queueId={mq.queue_id}]"


class AllocateStrategy(Protocol):
    """``AllocateMessageQueueStrategy``."""

    name: str

    def allocate(self, consumer_group: str, current_cid: str, mq_all: Sequence[Q],
                 cid_all: Sequence[str]) -> list[Q]: ...


def _check(consumer_group: str, current_cid: str, mq_all: Sequence[QueueLike],
           cid_all: Sequence[str]) -> bool:
    """``AbstractAllocateMessageQueueStrategy.check``: bad input raises, unknown cid gives []."""
    if not current_cid:
        raise MQClientError("currentCID is empty")
    if not mq_all:
        raise MQClientError("mqAll is null or mqAll empty")
    if not cid_all:
        raise MQClientError("cidAll is null or cidAll empty")
    if current_cid not in cid_all:
        log.info("client.allocate.cid_not_in_list", group=consumer_group, cid=current_cid,
                 cid_all=list(cid_all))
        return False
    return True


class AllocateMessageQueueAveragely:
    """Contiguous ranges, the first ``n % c`` consumers one queue more (the default)."""

    name = "AVG"

    def allocate(self, consumer_group: str, current_cid: str, mq_all: Sequence[Q],
                 cid_all: Sequence[str]) -> list[Q]:
        if not _check(consumer_group, current_cid, mq_all, cid_all):
            return []
        n = len(mq_all)
        c = len(cid_all)
        index = cid_all.index(current_cid)
        mod = n % c
        if n <= c:
            size = 1
        elif mod > 0 and index < mod:
            size = n // c + 1
        else:
            size = n // c
        start = index * size if mod > 0 and index < mod else index * size + mod
        range_ = min(size, n - start)
        return [mq_all[(start + i) % n] for i in range(range_)]


class AllocateMessageQueueAveragelyByCircle:
    """Round robin: queue ``i`` goes to consumer ``i % c``."""

    name = "AVG_BY_CIRCLE"

    def allocate(self, consumer_group: str, current_cid: str, mq_all: Sequence[Q],
                 cid_all: Sequence[str]) -> list[Q]:
        if not _check(consumer_group, current_cid, mq_all, cid_all):
            return []
        index = cid_all.index(current_cid)
        c = len(cid_all)
        return [mq_all[i] for i in range(index, len(mq_all)) if i % c == index]


def _md5_hash(key: str) -> int:
    """``ConsistentHashRouter.MD5Hash``: the first 4 digest bytes as an unsigned number."""
    return int.from_bytes(hashlib.md5(key.encode("utf-8")).digest()[:4], "big")


class AllocateMessageQueueConsistentHash:
    """A hash ring of ``virtual_node_cnt`` virtual nodes per consumer (``cid-i``).

    ``hash_function`` replaces upstream's MD5 one (it must return a non-negative int).
    """

    name = "CONSISTENT_HASH"

    def __init__(self, virtual_node_cnt: int = 10,
                 hash_function: Callable[[str], int] | None = None) -> None:
        if virtual_node_cnt < 0:
            raise MQClientError(f"illegal virtualNodeCnt :{virtual_node_cnt}")
        self.virtual_node_cnt = virtual_node_cnt
        self._hash = hash_function or _md5_hash

    def allocate(self, consumer_group: str, current_cid: str, mq_all: Sequence[Q],
                 cid_all: Sequence[str]) -> list[Q]:
        if not _check(consumer_group, current_cid, mq_all, cid_all):
            return []
        ring: dict[int, str] = {}
        for cid in cid_all:
            for i in range(self.virtual_node_cnt):
                # TreeMap.put: a later node with the same hash replaces the earlier one.
                ring[self._hash(f"{cid}-{i}")] = cid
        if not ring:
            return []
        keys = sorted(ring)
        out: list[Q] = []
        for mq in mq_all:
            h = self._hash(queue_to_string(mq))
            pos = bisect_left(keys, h)  # tailMap(h).firstKey(), wrapping to the first key
            owner = ring[keys[pos] if pos < len(keys) else keys[0]]
            if owner == current_cid:
                out.append(mq)
        return out


class AllocateMessageQueueByConfig:
    """Always the configured queues, whatever the group looks like."""

    name = "CONFIG"

    def __init__(self, message_queues: Sequence[QueueLike]) -> None:
        self.message_queues = list(message_queues)

    def allocate(self, consumer_group: str, current_cid: str, mq_all: Sequence[Q],
                 cid_all: Sequence[str]) -> list[Q]:
        return list(self.message_queues)  # type: ignore[arg-type]


class AllocateMessageQueueByMachineRoom:
    """Queues of brokers named ``<idc>@<name>`` whose idc is in ``consumer_idcs``, averaged."""

    name = "MACHINE_ROOM"

    def __init__(self, consumer_idcs: Iterable[str]) -> None:
        self.consumer_idcs = frozenset(consumer_idcs)

    def allocate(self, consumer_group: str, current_cid: str, mq_all: Sequence[Q],
                 cid_all: Sequence[str]) -> list[Q]:
        if not _check(consumer_group, current_cid, mq_all, cid_all):
            return []
        index = cid_all.index(current_cid)
        pre: list[Q] = []
        for mq in mq_all:
            parts = mq.broker_name.split("@")
            while parts and not parts[-1]:
                parts.pop()  # Java String.split drops trailing empty strings
            if len(parts) == 2 and parts[0] in self.consumer_idcs:
                pre.append(mq)
        c = len(cid_all)
        mod, rem = divmod(len(pre), c)
        start = mod * index
        out = pre[start:start + mod]
        if rem > index:
            out.append(pre[index + mod * c])
        return out
