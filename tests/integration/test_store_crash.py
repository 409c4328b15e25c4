"""kill -9 of a process writing with SYNC_FLUSH loses nothing it acknowledged.

A child process appends messages to a store with SYNC_FLUSH and prints one line per
acknowledged put (after the group-commit fsync). The test SIGKILLs it mid-stream,
reopens the same store directory, and checks that every acknowledged message is
readable by offset and by queue, that recovery noticed the crash, and that the log
holds only whole records up to its end.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import textwrap
from pathlib import Path

import pytest

from aiorocketmq.protocol.message import decode_message
from aiorocketmq.server.store.config import MessageStoreConfig
from aiorocketmq.server.store.message_store import GetMessageStatus, MessageStore

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from aiorocketmq.server.store.config import MessageStoreConfig
    from aiorocketmq.server.store.inner import MessageExtBrokerInner, PutMessageStatus
    from aiorocketmq.server.store.message_store import MessageStore

    async def main(root):
        cfg = MessageStoreConfig(store_path_root_dir=root, flush_disk_type="SYNC_FLUSH",
                                 mapped_file_size_commit_log=64 * 1024,
                                 mapped_file_size_consume_queue=20 * 100,
                                 max_hash_slot_num=256, max_index_num=1024,
                                 flush_interval_consume_queue_ms=50)
        store = MessageStore(cfg, store_host="127.0.0.1:10911")
        await store.start()
        i = 0

        async def put(n):
            m = MessageExtBrokerInner(topic="Crash", queue_id=n % 3, body=b"payload-%d-" % n * 7,
                                      properties={"UNIQ_KEY": "U%08d" % n, "KEYS": "k%d" % n})
            r = await store.put_message(m)
            if r.status is PutMessageStatus.PUT_OK:
                print("ACK", n, m.queue_id, m.queue_offset, m.commit_log_offset, flush=True)

        while True:  # until killed; a few puts in flight at a time share fsyncs
            await asyncio.gather(*(put(i + k) for k in range(4)))
            i += 4

    asyncio.run(main(sys.argv[1]))
    """
)

ACKS_BEFORE_KILL = 400
REPO_ROOT = str(Path(__file__).resolve().parents[2])


def _maybe_ack(line: bytes, acks: list[tuple[int, int, int, int]]) -> None:
    """Collect one ``ACK n queueId queueOffset commitLogOffset`` line (other output is logs)."""
    parts = line.split()
    if len(parts) == 5 and parts[0] == b"ACK":
        n, qid, qoff, phy = (int(x) for x in parts[1:])
        acks.append((n, qid, qoff, phy))


async def _run_writer_and_kill(root: Path, script: Path) -> list[tuple[int, int, int, int]]:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    err_path = script.with_suffix(".stderr")
    with err_path.open("wb") as err:  # the child keeps its own copy of the descriptor
        proc = await asyncio.create_subprocess_exec(
            sys.executable, str(script), str(root),
            stdout=asyncio.subprocess.PIPE, stderr=err, env=env, cwd=REPO_ROOT,
        )
    acks: list[tuple[int, int, int, int]] = []
    try:
        assert proc.stdout is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 120
        while len(acks) < ACKS_BEFORE_KILL:
            line = await asyncio.wait_for(proc.stdout.readline(), timeout=max(deadline - loop.time(), 0.1))
            if not line:
                code = await proc.wait()
                pytest.fail(f"writer exited early with {code}:\n"
                            f"{err_path.read_text(errors='replace')[-4000:]}")
            _maybe_ack(line, acks)
        proc.send_signal(signal.SIGKILL)
        # Lines the child printed before dying were acknowledged too.
        rest = await asyncio.wait_for(proc.stdout.read(), timeout=60)
        for line in rest.splitlines():
            _maybe_ack(line, acks)
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()
    # The writer was printing acknowledgements when it was killed, so it died of SIGKILL. The
    # status says so unless another waiter in this process reaped the child first: asyncio then
    # logs "Unknown child process pid" and reports 255. A writer that failed on its own would
    # have left a traceback on stderr (and stopped acknowledging before the kill).
    assert proc.returncode in (-signal.SIGKILL, 255), proc.returncode
    assert "Traceback" not in err_path.read_text(errors="replace")
    return acks


async def test_sigkill_mid_stream_loses_nothing_acknowledged(tmp_path: Path) -> None:
    root = tmp_path / "store"
    script = tmp_path / "writer.py"
    script.write_text(WRITER, encoding="utf-8")
    acks = await _run_writer_and_kill(root, script)
    assert len(acks) >= ACKS_BEFORE_KILL
    assert (root / "abort").exists()

    cfg = MessageStoreConfig(store_path_root_dir=str(root), flush_disk_type="SYNC_FLUSH",
                             mapped_file_size_commit_log=64 * 1024,
                             mapped_file_size_consume_queue=20 * 100,
                             max_hash_slot_num=256, max_index_num=1024)
    store = MessageStore(cfg, store_host="127.0.0.1:10911")
    await store.start()
    try:
        assert not store.last_exit_ok
        for n, qid, qoff, phy in acks:
            m = store.look_message_by_offset(phy)
            assert m is not None, f"acknowledged message {n} at {phy} is gone"
            assert m.body == b"payload-%d-" % n * 7
            assert (m.queue_id, m.queue_offset) == (qid, qoff)
            assert store.get_commit_log_offset_in_queue("Crash", qid, qoff) == phy
            r = store.get_message("g", "Crash", qid, qoff, 1)
            assert r.status is GetMessageStatus.FOUND
            assert decode_message(r.body())[0].properties["UNIQ_KEY"] == f"U{n:08d}"
            r.release()
        sample = acks[len(acks) // 2][0]
        q = store.query_message("Crash", f"k{sample}", 4, 0, 2**62)
        assert len(q.message_buffers) == 1
        q.release()

        # Every byte up to the end of the log is a whole record (or an end-of-file filler).
        records = 0
        offset = store.get_min_phy_offset()
        end = store.get_max_phy_offset()
        while offset < end:
            view = store.commit_log.get_record(offset)
            if view is None:  # the filler at a segment's end
                offset = store.commit_log.roll_next_file(offset)
                continue
            msg, size = decode_message(view, 0, check_crc=True)
            assert msg.commit_log_offset == offset
            view.release()
            offset += size
            records += 1
        assert offset == end
        assert records >= len(acks)
        # Queue offsets continue where the recovered queues end.
        for qid in range(3):
            assert store.get_max_offset_in_queue("Crash", qid) == store.commit_log.next_queue_offset("Crash", qid)
    finally:
        await store.shutdown()
