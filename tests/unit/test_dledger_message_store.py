"""``DLedgerMessageStore`` in process: three stores of one group on one event loop, talking
over real sockets on 127.0.0.1 (server/store/dledger/store.py).

* a fresh group elects a leader; its first message is at commit-log offset 0x30 and every
  member serves it at that offset once committed (consume queue, index, record);
* followers refuse puts; a put is answered once a quorum holds it;
* the leader stops: another is elected, its log ends in an older term with entries past its
  committed index only if any are uncommitted (then a marker entry goes first), and puts
  continue; the old leader restarts on its files and catches up;
* a restarted store recovers its DLedger files, consume queues and term.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from aiorocketmq.protocol.message import decode_messages, socket_address_to_bytes
from aiorocketmq.server.store.config import MessageStoreConfig
from aiorocketmq.server.store.dledger.commit_log import MARKER_TOPIC
from aiorocketmq.server.store.dledger.core import Timing
from aiorocketmq.server.store.dledger.store import DLedgerMessageStore
from aiorocketmq.server.store.inner import MessageExtBrokerInner, PutMessageStatus
from aiorocketmq.server.store.message_store import GetMessageStatus
from tests.interop.stock import free_port

TOPIC = "DLedgerUnit"
FAST = Timing(heartbeat_interval_ms=300, min_vote_interval_ms=50, max_vote_interval_ms=200)


def make_store(tmp: Path, i: int, peers: str) -> DLedgerMessageStore:
    cfg = MessageStoreConfig(
        store_path_root_dir=str(tmp / f"n{i}"), mapped_file_size_commit_log=64 * 1024,
        mapped_file_size_consume_queue=20 * 1000, max_hash_slot_num=1000, max_index_num=4000,
        enable_dleger_commit_log=True, d_leger_group="g", d_leger_peers=peers,
        d_leger_self_id=f"n{i}")
    return DLedgerMessageStore(cfg, store_host=f"127.0.0.1:{10911 + i}", broker_name="b",
                               timing=FAST)


def inner(i: int, queue_id: int = 0) -> MessageExtBrokerInner:
    return MessageExtBrokerInner(topic=TOPIC, queue_id=queue_id, body=f"body-{i}".encode() * 20,
                                 properties={"KEYS": f"k{i}"},
                                 born_host=socket_address_to_bytes("127.0.0.1:5555"))


async def wait_for(cond: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {what}"
        await asyncio.sleep(0.02)


def leaders(stores: list[DLedgerMessageStore | None]) -> list[DLedgerMessageStore]:
    return [s for s in stores if s is not None and s.node is not None and s.node.is_leader]


def bodies(store: DLedgerMessageStore, queue_id: int = 0) -> list[tuple[int, bytes]]:
    """Every message of the queue: (commit-log offset, body)."""
    out: list[tuple[int, bytes]] = []
    offset = 0
    while True:
        r = store.get_message("g", TOPIC, queue_id, offset, 32)
        try:
            if r.status is not GetMessageStatus.FOUND:
                return out
            out += [(m.commit_log_offset, m.body) for m in decode_messages(r.body())]
            offset = r.next_begin_offset
        finally:
            r.release()


async def test_group_of_three_replicates_and_fails_over(tmp_path: Path) -> None:
    ports = [free_port() for _ in range(3)]
    peers = ";".join(f"n{i}-127.0.0.1:{p}" for i, p in enumerate(ports))
    stores: list[DLedgerMessageStore | None] = [make_store(tmp_path, i, peers) for i in range(3)]
    try:
        for s in stores:
            assert s is not None
            await s.start()
        await wait_for(lambda: len(leaders(stores)) == 1 and leaders(stores)[0].leader_ready, 20,
                       "a ready leader")
        leader = leaders(stores)[0]
        follower = next(s for s in stores if s is not leader and s is not None)
        assert follower.follower_broker_id == int(follower.self_id[1:]) + 1
        refused = await follower.put_message(inner(-1))
        assert refused.status is PutMessageStatus.SERVICE_NOT_AVAILABLE

        first = await leader.put_message(inner(0))
        assert first.status is PutMessageStatus.PUT_OK and first.append_result is not None
        assert first.append_result.wrote_offset == 0x30
        results = await asyncio.gather(*(leader.put_message(inner(i)) for i in range(1, 40)))
        assert all(r.status is PutMessageStatus.PUT_OK for r in results)
        expected = [(0x30, inner(0).body)] + [
            (r.append_result.wrote_offset, inner(i).body) for i, r in enumerate(results, 1)
            if r.append_result is not None]
        for s in stores:
            assert s is not None
            await wait_for(lambda s=s: len(bodies(s)) == 40, 10, f"{s.self_id} dispatching")
            assert bodies(s) == expected
            view = s.look_message_by_offset(0x30)
            assert view is not None and view.keys == "k0"
            q = s.query_message(TOPIC, "k7", 10, 0, 2**62)
            assert len(q.message_buffers) == 1
            q.release()

        # The leader goes away; another takes over and puts go on.
        old = stores.index(leader)
        await leader.shutdown()
        stores[old] = None
        await wait_for(lambda: len(leaders(stores)) == 1 and leaders(stores)[0].leader_ready, 20,
                       "a new ready leader")
        new_leader = leaders(stores)[0]
        assert new_leader.node is not None and new_leader.node.term > 0
        r = await new_leader.put_message(inner(40))
        assert r.status is PutMessageStatus.PUT_OK

        # The old leader restarts on its files, follows, and catches up.
        back = make_store(tmp_path, old, peers)
        stores[old] = back
        await back.start()
        await wait_for(lambda: len(bodies(back)) == 41, 20, "the old leader catching up")
        assert bodies(back)[:40] == expected
        assert back.member_state is not None and back.member_state.term == new_leader.member_state.term  # type: ignore[union-attr]
        # A marker (if any) has no consume-queue unit and no index entry.
        assert back.get_message("g", MARKER_TOPIC, 0, 0, 10).status is GetMessageStatus.NO_MATCHED_LOGIC_QUEUE
    finally:
        for s in stores:
            if s is not None:
                await s.shutdown()


async def test_single_member_restart_recovers(tmp_path: Path) -> None:
    peers = f"n0-127.0.0.1:{free_port()}"
    store = make_store(tmp_path, 0, peers)
    await store.start()
    try:
        await wait_for(lambda: store.leader_ready, 10, "leadership")
        for i in range(300):  # several 64 KiB data segments
            r = await store.put_message(inner(i, i % 2))
            assert r.status is PutMessageStatus.PUT_OK
        before = (bodies(store, 0), bodies(store, 1))
        assert len(store.dstore.data.files) > 1
    finally:
        await store.shutdown()
    again = make_store(tmp_path, 0, peers)
    await again.start()
    try:
        assert again.dstore.end_index == 299 and again.dstore.committed_index == 299
        assert (bodies(again, 0), bodies(again, 1)) == before
        await wait_for(lambda: again.leader_ready, 10, "leadership after restart")
        again.recover_topic_queue_table()
        r = await again.put_message(inner(300, 0))
        assert r.status is PutMessageStatus.PUT_OK and r.append_result is not None
        assert r.append_result.logics_offset == 150
    finally:
        await again.shutdown()


async def test_retention_deletes_expired_dledger_segments_on_every_member(tmp_path: Path) -> None:
    """Expired DLedger data segments go on each member at a ``deleteWhen`` hour (stock's
    ``fileReservedTime + 1`` hours), never the committed entry's; the min offset moves, reads
    below it find the record removed, and a restarted member begins where it was cut."""
    ports = [free_port() for _ in range(3)]
    peers = ";".join(f"n{i}-127.0.0.1:{p}" for i, p in enumerate(ports))

    def retaining(i: int) -> DLedgerMessageStore:
        s = make_store(tmp_path, i, peers)
        s.config.delete_when = ";".join(f"{h:02d}" for h in range(24))
        s.config.file_reserved_time = 1
        return s

    stores = [retaining(i) for i in range(3)]
    try:
        for s in stores:
            await s.start()
        await wait_for(lambda: len(leaders(stores)) == 1 and leaders(stores)[0].leader_ready, 20,
                       "a ready leader")
        leader = leaders(stores)[0]
        for start in range(0, 800, 100):
            results = await asyncio.gather(*(leader.put_message(inner(i)) for i in range(start, start + 100)))
            assert all(r.status is PutMessageStatus.PUT_OK for r in results)
        end = leader.dstore.committed_pos
        for s in stores:
            await wait_for(lambda s=s: s.dispatcher.dispatched_offset >= end, 20, f"{s.self_id} dispatching")
            assert len(s.dstore.data.files) > 3
        now = int(time.time() * 1000)
        # Fresh segments are kept.
        assert [await s.clean_once(now_ms=now) for s in stores] == [0, 0, 0]
        for s in stores:
            for mf in s.dstore.data.files:
                mf.last_modified_ms = now - 2 * 3600 * 1000 - 1  # fileReservedTime + 1 hours ago
        deleted = [await s.clean_once(now_ms=now) for s in stores]
        assert all(n > 0 for n in deleted)
        mins = {s.commit_log.min_offset for s in stores}
        begins = {s.dstore.begin_index for s in stores}
        assert len(mins) == 1 and len(begins) == 1
        min_offset = mins.pop()
        begin = begins.pop()
        assert min_offset > 0 and begin > 0
        for s in stores:
            ds = s.dstore
            found = ds.pos_size(ds.committed_index)
            assert found is not None and found[0] >= min_offset  # the committed entry is kept
            assert s.get_min_phy_offset() == min_offset
            assert s.look_message_by_offset(0x30) is None
            # The queue's min offset moved to its first unit at or past the log's min offset.
            r = s.get_message("g", TOPIC, 0, 0, 32)
            assert r.status is GetMessageStatus.OFFSET_TOO_SMALL and r.min_offset > 0
            r.release()
            r = s.get_message("g", TOPIC, 0, r.min_offset, 32)
            try:
                assert r.status is GetMessageStatus.FOUND
                assert decode_messages(r.body())[0].commit_log_offset >= min_offset
            finally:
                r.release()
            assert not (Path(ds.data.store_path) / f"{0:020d}").exists()

        # A follower restarts on what is left and keeps following.
        follower = next(s for s in stores if s is not leader)
        i = stores.index(follower)
        await follower.shutdown()
        back = retaining(i)
        stores[i] = back
        await back.start()
        assert back.dstore.begin_index == begin and back.commit_log.min_offset == min_offset
        r2 = await leader.put_message(inner(800))
        assert r2.status is PutMessageStatus.PUT_OK
        end = leader.dstore.committed_pos
        await wait_for(lambda: back.dispatcher.dispatched_offset >= end, 20, "the restarted follower")
        assert back.dstore.get(back.dstore.end_index) == leader.dstore.get(leader.dstore.end_index)

        # A member that lost its files begins at the leader's first entry (everything before
        # it is gone from the leader) and serves what follows.
        other = next(s for s in stores if s is not leader and s is not back)
        j = stores.index(other)
        await other.shutdown()
        shutil.rmtree(tmp_path / f"n{j}")
        fresh = retaining(j)
        stores[j] = fresh
        await fresh.start()
        r3 = await leader.put_message(inner(801))
        assert r3.status is PutMessageStatus.PUT_OK and r3.append_result is not None
        end = leader.dstore.committed_pos
        await wait_for(lambda: fresh.dispatcher.dispatched_offset >= end, 20, "the wiped follower")
        assert fresh.dstore.begin_index == begin and fresh.commit_log.min_offset == min_offset
        for k in range(begin, leader.dstore.end_index + 1):
            assert fresh.dstore.get(k) == leader.dstore.get(k)
        view = fresh.look_message_by_offset(r3.append_result.wrote_offset)
        assert view is not None and view.keys == "k801"
    finally:
        for s in stores:
            await s.shutdown()
