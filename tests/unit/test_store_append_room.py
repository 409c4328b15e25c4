"""A record goes into the current commit-log segment only if it leaves room for the
8-byte blank filler after it (upstream ``CommitLog.doAppend``: ``msgLen +
END_FILE_MIN_BLANK_LENGTH > maxBlank`` rolls); otherwise the segment gets the filler and
the record opens the next one. ``CommitLog.append`` decides this inline for the usual
case and leaves the rest to ``_segment_for``: both must agree at every gap.
"""

from __future__ import annotations

import pytest

from aiorocketmq.server.store.commit_log import BLANK_MAGIC_CODE, END_FILE_MIN_BLANK_LENGTH
from aiorocketmq.server.store.inner import PutMessageResult, PutMessageStatus
from aiorocketmq.server.store.message_store import MessageStore
from tests.unit.test_store_message_store import msg, open_store, pull_all

__all__ = ["open_store"]  # the fixture, re-exported for pytest

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize("gap", [0, 1, END_FILE_MIN_BLANK_LENGTH - 1, END_FILE_MIN_BLANK_LENGTH,
                                 END_FILE_MIN_BLANK_LENGTH + 1])
async def test_a_record_leaves_room_for_the_filler(open_store, gap: int) -> None:
    store: MessageStore = await open_store()
    first = store.put_message_nowait(msg(0, body=b"x" * 100))
    assert isinstance(first, PutMessageResult) and first.append_result is not None
    s0 = first.append_result.wrote_bytes
    file_size = store.commit_log.file_size
    free = file_size - s0
    # A record of exactly free - gap bytes (the record size grows with the body byte for byte).
    body_len = free - gap - (s0 - 100)
    second = store.put_message_nowait(msg(1, body=b"y" * body_len))
    assert isinstance(second, PutMessageResult) and second.status is PutMessageStatus.PUT_OK
    ar = second.append_result
    assert ar is not None and ar.wrote_bytes == free - gap
    segment = store.commit_log.mfq.files[0]
    if gap >= END_FILE_MIN_BLANK_LENGTH:
        assert ar.wrote_offset == s0  # it fits, filler room included
        assert segment.wrote_position == file_size - gap
    else:
        assert ar.wrote_offset == file_size  # the next segment
        total = int.from_bytes(segment.mm[s0:s0 + 4], "big", signed=True)
        magic = int.from_bytes(segment.mm[s0 + 4:s0 + 8], "big", signed=True)
        assert (magic, total) == (BLANK_MAGIC_CODE, free)
        assert segment.wrote_position == file_size
    # And a third record after it lands where the log's end says, readable in order.
    third = store.put_message_nowait(msg(2))
    assert isinstance(third, PutMessageResult) and third.status is PutMessageStatus.PUT_OK
    got = pull_all(store, "T", 0)
    assert [m.body for m in got] == [b"x" * 100, b"y" * body_len, msg(2).body]
    assert [m.commit_log_offset for m in got][:2] == [0, ar.wrote_offset]
