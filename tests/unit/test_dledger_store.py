"""DLedger's files: the entry codec, ``DLedgerMmapFileStore`` (append, filler at a segment's
end, recovery, truncation, checkpoint) and ``MemberState``'s ``currterm``."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from aiorocketmq.protocol.dledger.entry import (
    BODY_OFFSET,
    INDEX_UNIT_SIZE,
    DLedgerEntry,
    decode_entry,
    encode_entry,
    next_entry_pos,
)
from aiorocketmq.protocol.dledger.wire import (
    PushEntryRequest,
    PushType,
    VoteRequest,
    VoteResponse,
    VoteResult,
    decode_body,
    encode_body,
    parse_peers,
)
from aiorocketmq.server.store.dledger.log import LogError, MemoryLog
from aiorocketmq.server.store.dledger.member_state import MemberState, broker_id_of
from aiorocketmq.server.store.dledger.mmap_store import DLedgerMmapFileStore

SEG = 4096


def test_entry_header_layout() -> None:
    e = DLedgerEntry(index=7, term=2, pos=96, body=b"\x01\x02\x03")
    raw = encode_entry(e)
    assert len(raw) == BODY_OFFSET + 3 == e.size == 51
    assert struct.unpack(">iiqqqiiii", raw[:48]) == (1, 51, 7, 2, 96, 0, 0, 0, 3)
    assert decode_entry(raw) == e


def test_fastjson_bodies_match_stock() -> None:
    """Byte for byte what fastjson 1.2.69 writes for these objects (printed by the stock jars)."""
    v = VoteRequest(group="g", leader_id="n0", local_id="n0", remote_id="n1", term=3,
                    ledger_end_index=5, ledger_end_term=2)
    assert encode_body(v) == (b'{"code":200,"group":"g","leaderId":"n0","ledgerEndIndex":5,'
                              b'"ledgerEndTerm":2,"localId":"n0","remoteId":"n1","term":3}')
    r = VoteResponse().copy_base(v)
    r.vote_result = VoteResult.ACCEPT
    assert encode_body(r) == (b'{"code":200,"group":"g","leaderId":"n0","localId":"n0",'
                              b'"remoteId":"n1","term":3,"voteResult":"ACCEPT"}')
    e = DLedgerEntry(index=7, term=2, pos=96, body=b"\x01\x02\x03")
    p = PushEntryRequest(group="g", leader_id="n0", local_id="n0", remote_id="n1", term=3,
                         entry=e, type=PushType.APPEND, commit_index=6)
    assert encode_body(p) == (
        b'{"batch":false,"batchEntry":[],"code":200,"commitIndex":6,"count":1,"entry":{"body":'
        b'"AQID","bodyCrc":0,"chainCrc":0,"channel":0,"index":7,"magic":1,"pos":96,"size":51,'
        b'"term":2},"firstEntryIndex":7,"group":"g","lastEntryIndex":7,"leaderId":"n0",'
        b'"localId":"n0","remoteId":"n1","term":3,"totalSize":0,"type":"APPEND"}')
    back = decode_body(PushEntryRequest, encode_body(p))
    assert back.entry == e and back.type is PushType.APPEND and back.commit_index == 6
    batch = PushEntryRequest(group="g", batch_entry=[e])
    assert b'"batch":true' in encode_body(batch) and b'"totalSize":51' in encode_body(batch)
    assert decode_body(PushEntryRequest, encode_body(batch)).entries == [e]


def _fill(store: DLedgerMmapFileStore, n: int, term: int = 1, size: int = 300) -> list[DLedgerEntry]:
    out = []
    for _ in range(n):
        body = os.urandom(size)
        e = DLedgerEntry(store.end_index + 1, term, store.next_pos(BODY_OFFSET + size), body)
        store.append(e)
        out.append(e)
    return out


def test_append_rolls_over_with_filler_and_recovers(tmp_path: Path) -> None:
    store = DLedgerMmapFileStore(str(tmp_path), SEG)
    store.load_and_recover()
    entries = _fill(store, 40)
    assert entries[0].pos == 0 and entries[1].pos == 348
    per_segment = (SEG - 8) // 348
    first_of_second = entries[per_segment]
    assert first_of_second.pos == SEG  # did not fit with 8 bytes to spare
    seg0 = (tmp_path / "data" / f"{0:020d}").read_bytes()
    filler_at = per_segment * 348
    assert struct.unpack(">ii", seg0[filler_at:filler_at + 8]) == (-1, SEG - filler_at)
    unit = (tmp_path / "index" / f"{0:020d}").read_bytes()[5 * 32:6 * 32]
    assert struct.unpack(">iqiqq", unit) == (1, entries[5].pos, 348, 5, 1)
    store.set_committed(30)
    store.persist_checkpoint()
    assert "committedIndex=30" in (tmp_path / "checkpoint").read_text()
    store.close()

    again = DLedgerMmapFileStore(str(tmp_path), SEG)
    again.load_and_recover()
    assert (again.begin_index, again.end_index, again.end_term) == (0, 39, 1)
    assert again.end_pos == entries[-1].end and again.committed_index == 30
    assert [again.get(i) for i in range(40)] == entries
    assert again.committed_pos == entries[30].end
    again.close()


def test_recovery_cuts_a_damaged_tail_and_rebuilds_index(tmp_path: Path) -> None:
    store = DLedgerMmapFileStore(str(tmp_path), SEG)
    store.load_and_recover()
    entries = _fill(store, 30)
    store.close()
    # Damage entry 25 (its pos field) and drop the index units from 20 on.
    e25 = entries[25]
    seg = tmp_path / "data" / f"{e25.pos - e25.pos % SEG:020d}"
    raw = bytearray(seg.read_bytes())
    struct.pack_into(">q", raw, e25.pos % SEG + 24, 12345)
    seg.write_bytes(bytes(raw))
    idx = tmp_path / "index" / f"{0:020d}"
    iraw = bytearray(idx.read_bytes())
    iraw[20 * INDEX_UNIT_SIZE:30 * INDEX_UNIT_SIZE] = bytes(10 * INDEX_UNIT_SIZE)
    idx.write_bytes(bytes(iraw))

    again = DLedgerMmapFileStore(str(tmp_path), SEG)
    again.load_and_recover()
    assert again.end_index == 24 and again.end_pos == entries[24].end
    assert [again.get(i) for i in range(25)] == entries[:25]
    assert again.get(25) is None
    # Appending continues right after entry 24.
    nxt = _fill(again, 1, term=2)[0]
    assert nxt.index == 25 and nxt.pos == entries[24].end
    again.close()


def test_truncate_keeps_committed_and_reuses_space(tmp_path: Path) -> None:
    store = DLedgerMmapFileStore(str(tmp_path), SEG)
    store.load_and_recover()
    entries = _fill(store, 20)
    store.set_committed(9)
    with pytest.raises(LogError):
        store.truncate_after(8)
    store.truncate_after(12)
    assert store.end_index == 12 and store.end_pos == entries[12].end and store.get(13) is None
    new = _fill(store, 3, term=3, size=100)
    assert new[0].pos == entries[12].end
    store.close()
    again = DLedgerMmapFileStore(str(tmp_path), SEG)
    again.load_and_recover()
    assert again.end_index == 15 and again.end_term == 3
    assert [again.get(i) for i in range(16)] == entries[:13] + new
    again.close()


def test_memory_log_positions_equal_the_mmap_store(tmp_path: Path) -> None:
    store = DLedgerMmapFileStore(str(tmp_path), SEG)
    store.load_and_recover()
    mem = MemoryLog(SEG)
    for e in _fill(store, 25, size=517):
        assert mem.next_pos(e.size) == e.pos
        mem.append(e)
    assert mem.end_pos == store.end_pos
    assert next_entry_pos(SEG - 8 - 10, 10, SEG) == SEG - 18
    assert next_entry_pos(SEG - 8 - 10, 11, SEG) == SEG
    store.close()


def test_member_state_persists_term_and_vote(tmp_path: Path) -> None:
    peers = parse_peers("n0-127.0.0.1:40911;n1-127.0.0.1:40912;n2-127.0.0.1:40913")
    assert peers == {"n0": "127.0.0.1:40911", "n1": "127.0.0.1:40912", "n2": "127.0.0.1:40913"}
    assert broker_id_of("n0") == 1 and broker_id_of("n12") == 13
    ms = MemberState("g", "n1", peers, tmp_path)
    assert ms.term == 0 and ms.vote_for is None
    ms.next_term()
    ms.set_vote_for("n2")
    assert (tmp_path / "currterm").read_text() == "currTerm=1\nvoteLeader=n2\n"
    again = MemberState("g", "n1", peers, tmp_path)
    assert (again.term, again.vote_for, again.is_candidate) == (1, "n2", True)
    with pytest.raises(ValueError):
        MemberState("g", "n9", peers, tmp_path)
    with pytest.raises(ValueError):
        parse_peers("n0:127.0.0.1")


def test_retention_deletes_expired_segments_and_recovers(tmp_path: Path) -> None:
    """``detach_expired``: old leading segments go (data and the index below the new first
    entry), never past ``keep_pos``; positions stay, reads below the first kept one are
    refused, and a reopened store (even one that lost its index) begins there."""
    unit_seg = INDEX_UNIT_SIZE * 8
    store = DLedgerMmapFileStore(str(tmp_path), SEG, index_file_size=unit_seg)
    store.load_and_recover()
    entries = _fill(store, 60)
    per_segment = (SEG - 8) // 348  # 11
    store.set_committed(40)
    for mf in store.data.files:
        mf.last_modified_ms = 1_000  # long ago
    hour = 3600 * 1000
    now = 10 * hour
    # Nothing is old enough yet at this clock: nothing goes.
    assert store.detach_expired(hour, 1_000 + hour - 1, False, entries[40].pos) == ([], [])
    data, index = store.detach_expired(hour, now, False, entries[40].pos)
    # Segments 0..2 end before the committed entry's (3); 3 holds it and stays.
    assert [mf.file_from_offset for mf in data] == [0, SEG, 2 * SEG]
    begin = 3 * per_segment
    assert store.begin_index == begin and entries[begin].pos == 3 * SEG
    assert [mf.file_from_offset for mf in index] == [0, unit_seg, 2 * unit_seg, 3 * unit_seg]
    for mf in (*data, *index):
        mf.destroy()
    assert sorted(os.listdir(tmp_path / "data"))[0] == f"{3 * SEG:020d}"
    assert store.data.min_offset == 3 * SEG
    assert store.get(begin - 1) is None and store.pos_size(begin - 1) is None
    assert store.data.find_mapped_file_by_offset(entries[begin - 1].pos) is None
    assert store.entry_view(entries[begin - 1].pos, 48) is None
    assert [store.get(i) for i in range(begin, 60)] == entries[begin:]
    # Even forced, the segment of the committed entry is kept.
    assert store.detach_expired(hour, now, True, entries[40].pos) == ([], [])
    store.persist_checkpoint()
    store.close()

    again = DLedgerMmapFileStore(str(tmp_path), SEG, index_file_size=unit_seg)
    again.load_and_recover()
    assert (again.begin_index, again.end_index, again.committed_index) == (begin, 59, 40)
    assert again.data.min_offset == 3 * SEG and again.end_pos == entries[-1].end
    assert again.get(begin - 1) is None
    assert [again.get(i) for i in range(begin, 60)] == entries[begin:]
    nxt = _fill(again, 1, term=2)[0]
    assert nxt.index == 60 and nxt.pos == entries[-1].end
    again.close()

    for f in (tmp_path / "index").iterdir():
        f.unlink()
    rebuilt = DLedgerMmapFileStore(str(tmp_path), SEG, index_file_size=unit_seg)
    rebuilt.load_and_recover()
    assert (rebuilt.begin_index, rebuilt.end_index) == (begin, 60)
    assert [rebuilt.get(i) for i in range(begin, 60)] == entries[begin:]
    rebuilt.close()


def test_reset_to_begins_the_log_at_a_leaders_first_entry(tmp_path: Path) -> None:
    """A follower behind the leader's retained log begins anew at the leader's first entry."""
    unit_seg = INDEX_UNIT_SIZE * 8
    store = DLedgerMmapFileStore(str(tmp_path), SEG, index_file_size=unit_seg)
    store.load_and_recover()
    _fill(store, 5)
    store.set_committed(3)
    first = DLedgerEntry(index=37, term=2, pos=5 * SEG, body=b"x" * 300)
    with pytest.raises(LogError):  # not at a segment's start
        store.reset_to(DLedgerEntry(index=37, term=2, pos=5 * SEG + 48, body=b"x"))
    with pytest.raises(LogError):  # not past the end
        store.reset_to(DLedgerEntry(index=4, term=2, pos=5 * SEG, body=b"x"))
    store.reset_to(first)
    assert (store.begin_index, store.end_index, store.end_term, store.committed_index) == (37, 37, 2, -1)
    assert store.get(3) is None and store.get(37) == first and store.data.min_offset == 5 * SEG
    assert sorted(os.listdir(tmp_path / "data")) == [f"{5 * SEG:020d}"]
    more = _fill(store, 20, term=2)
    assert more[0].index == 38 and more[0].pos == first.end
    store.set_committed(50)
    store.persist_checkpoint()
    store.close()
    again = DLedgerMmapFileStore(str(tmp_path), SEG, index_file_size=unit_seg)
    again.load_and_recover()
    assert (again.begin_index, again.end_index, again.committed_index) == (37, 57, 50)
    assert [again.get(i) for i in range(37, 58)] == [first, *more]
    again.close()
