"""Offset stores: increase-only updates, remote read/persist semantics, the local JSON file."""

from __future__ import annotations

from pathlib import Path

from aiorocketmq.client.offset_store import (
    LocalFileOffsetStore,
    ReadOffsetType,
    RemoteBrokerOffsetStore,
)
from aiorocketmq.protocol import fastjson
from aiorocketmq.protocol.bodies import MessageQueue
from aiorocketmq.protocol.errors import MQBrokerError, QueryNotFoundError, RemotingTimeoutError

Q0 = MessageQueue("T", "broker-a", 0)
Q1 = MessageQueue("T", "broker-a", 1)
Q2 = MessageQueue("U", "broker-b", 0)


class Backend:
    """What the client instance does for the store, recorded instead of sent."""

    def __init__(self) -> None:
        self.broker: dict[MessageQueue, int] = {}
        self.sent: list[tuple[MessageQueue, int, bool]] = []
        self.fail: BaseException | None = None

    async def fetch_consume_offset(self, group: str, mq: MessageQueue) -> int:
        if self.fail is not None:
            raise self.fail
        if mq not in self.broker:
            raise QueryNotFoundError(22, "Not found")
        return self.broker[mq]

    async def update_consume_offset(self, group: str, mq: MessageQueue, offset: int, *,
                                    oneway: bool) -> None:
        self.sent.append((mq, offset, oneway))


async def test_remote_update_increase_only_and_read() -> None:
    backend = Backend()
    store = RemoteBrokerOffsetStore("G", backend)
    store.update_offset(Q0, 5)
    store.update_offset(Q0, 3)  # a late, lower commit never moves the offset back
    assert await store.read_offset(Q0, ReadOffsetType.READ_FROM_MEMORY) == 5
    store.update_offset(Q0, 3, increase_only=False)
    assert await store.read_offset(Q0, ReadOffsetType.MEMORY_FIRST_THEN_STORE) == 3
    assert await store.read_offset(Q1, ReadOffsetType.READ_FROM_MEMORY) == -1


async def test_remote_read_from_store_codes() -> None:
    backend = Backend()
    store = RemoteBrokerOffsetStore("G", backend)
    assert await store.read_offset(Q0, ReadOffsetType.READ_FROM_STORE) == -1  # broker has none
    backend.broker[Q0] = 42
    assert await store.read_offset(Q0, ReadOffsetType.READ_FROM_STORE) == 42
    assert await store.read_offset(Q0, ReadOffsetType.READ_FROM_MEMORY) == 42
    backend.fail = RemotingTimeoutError("no answer")
    assert await store.read_offset(Q1, ReadOffsetType.READ_FROM_STORE) == -2  # lookup failed
    backend.fail = MQBrokerError(1, "system error")
    assert await store.read_offset(Q1, ReadOffsetType.READ_FROM_STORE) == -1


async def test_remote_persist_all_sends_oneway_and_drops_unused() -> None:
    backend = Backend()
    store = RemoteBrokerOffsetStore("G", backend)
    store.update_offset(Q0, 7)
    store.update_offset(Q1, 9)
    await store.persist_all([Q0])
    assert backend.sent == [(Q0, 7, True)]
    assert store.clone_offset_table() == {Q0: 7}  # Q1 is no longer ours
    await store.persist(Q0)
    assert backend.sent[-1] == (Q0, 7, True)
    store.remove_offset(Q0)
    await store.persist(Q0)
    assert len(backend.sent) == 2


async def test_local_file_round_trip_and_layout(tmp_path: Path) -> None:
    store = LocalFileOffsetStore("G", "127.0.0.1@1", tmp_path)
    store.update_offset(Q0, 11)
    store.update_offset(Q2, 4)
    await store.persist_all([Q0, Q2])
    path = tmp_path / "127.0.0.1@1" / "G" / "offsets.json"
    raw = path.read_bytes()
    # upstream OffsetSerializeWrapper: MessageQueue objects as bare map keys
    assert raw.startswith(b'{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:11')
    assert fastjson.loads(raw)["offsetTable"]
    again = LocalFileOffsetStore("G", "127.0.0.1@1", tmp_path)
    await again.load()
    assert again.clone_offset_table() == {Q0: 11, Q2: 4}
    assert await again.read_offset(Q2, ReadOffsetType.READ_FROM_STORE) == 4
    assert await again.read_offset(Q1, ReadOffsetType.READ_FROM_STORE) == -1
    # a second persist keeps the previous content as .bak; a damaged file falls back to it
    again.update_offset(Q0, 12)
    await again.persist_all([Q0, Q2])
    path.write_bytes(b"{not json")
    third = LocalFileOffsetStore("G", "127.0.0.1@1", tmp_path)
    await third.load()
    assert third.clone_offset_table() == {Q0: 11, Q2: 4}


async def test_local_file_reads_java_pretty_form(tmp_path: Path) -> None:
    path = tmp_path / "cid" / "G" / "offsets.json"
    path.parent.mkdir(parents=True)
    path.write_text('{\n\t"offsetTable":{{\n\t\t\t"brokerName":"broker-a",\n\t\t\t"queueId":1,'
                    '\n\t\t\t"topic":"T"\n\t\t}:17\n\t}\n}')
    store = LocalFileOffsetStore("G", "cid", tmp_path)
    await store.load()
    assert store.clone_offset_table("T") == {Q1: 17}
