"""DLedger's files, ours and stock's: ``DLedgerMmapFileStore`` (server/store/dledger) against
dledger 0.3.1.2's own ``DLedgerMmapFileStore`` (the Java class stock 4.9.7 runs).

Our store writes entries across several data segments (a filler at each end), a term, a
vote and a checkpoint; the Java store recovers the directory and reads back every entry,
the term, the vote and the committed index. It then appends entries as a follower (one
more segment roll-over) and persists its checkpoint; our store recovers that directory and
reads every entry, old and new, with the Java store's positions.
"""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path

import pytest

from aiorocketmq.protocol.dledger.entry import BODY_OFFSET, DLedgerEntry, next_entry_pos
from aiorocketmq.server.store.dledger.member_state import MemberState
from aiorocketmq.server.store.dledger.mmap_store import DLedgerMmapFileStore
from tests.interop.stock import JVM_BASE, JavaEnv

pytestmark = [pytest.mark.interop, pytest.mark.timeout(180)]

SOURCE = Path(__file__).resolve().parent / "java_single" / "DLedgerFiles.java"
SEGMENT = 8192


def java_store(env: JavaEnv, base: Path, append: int) -> list[dict[str, object]]:
    argv = [env.java, *JVM_BASE, "-Xmx128m", "-cp", env.classpath, str(SOURCE), str(base), "n0",
            str(SEGMENT), str(append)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=150)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def test_each_store_reads_the_others_files(tmp_path: Path, stock_java: JavaEnv) -> None:
    base = tmp_path / "dledger-n0"
    state = MemberState("g", "n0", {"n0": "127.0.0.1:1"}, base)
    state.next_term()
    state.next_term()
    state.set_vote_for("n0")
    ours = DLedgerMmapFileStore(str(base), SEGMENT)
    ours.load_and_recover()
    written: list[DLedgerEntry] = []
    for i in range(60):
        body = bytes((i * 13 + j) & 0xFF for j in range(150 + i * 11))
        entry = DLedgerEntry(i, 1 + i // 25, ours.next_pos(BODY_OFFSET + len(body)), body)
        ours.append(entry)
        written.append(entry)
    ours.set_committed(50)
    ours.flush()
    ours.persist_checkpoint()
    ours.close()
    assert len(list((base / "data").iterdir())) > 3  # several segments, fillers between

    head, *entries = java_store(stock_java, tmp_path, append=0)
    assert head == {"term": 2, "vote": "n0", "begin": 0, "end": 59, "endTerm": 3, "committed": 50,
                    "committedPos": written[50].end, "wrote": written[-1].end}
    assert [(e["index"], e["term"], e["pos"], e["size"], base64.b64decode(str(e["body"])))
            for e in entries] == [(w.index, w.term, w.pos, w.size, w.body) for w in written]

    head, *entries = java_store(stock_java, tmp_path, append=30)
    assert len(entries) == 60  # what it read before appending
    again = DLedgerMmapFileStore(str(base), SEGMENT)
    again.load_and_recover()
    try:
        assert (again.begin_index, again.end_index, again.end_term) == (0, 89, 2)
        assert again.committed_index == 89
        assert [again.get(i) for i in range(60)] == written
        java_tail = [again.get(i) for i in range(60, 90)]
        assert all(e is not None for e in java_tail)
        for k, e in enumerate(java_tail):
            assert e is not None
            assert e.body == bytes((k * 7 + j) & 0xFF for j in range(200 + k * 37))
        end = written[-1].end
        for e in java_tail:  # the Java store placed them by the same rule, fillers included
            assert e is not None and e.pos == next_entry_pos(end, e.size, SEGMENT)
            end = e.end
        assert again.end_pos == end
        assert any(e is not None and e.pos % SEGMENT == 0 for e in java_tail)  # a roll-over
        # And ours goes on appending after the Java store's entries.
        nxt = DLedgerEntry(90, 2, again.next_pos(BODY_OFFSET + 10), b"0123456789")
        again.append(nxt)
        assert again.get(90) == nxt
    finally:
        again.close()
