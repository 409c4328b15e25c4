"""``MessageTrack`` prints as Java's ``toString`` (found by tests/interop/test_stock_mqadmin.py:
our queryMsgById printed ``exceptionDesc=None`` where the stock tool prints ``null``)."""

from __future__ import annotations

from aiorocketmq.client.admin.api import MessageTrack
from aiorocketmq.client.admin.cli import format_message_tracks


def test_consumed_track_without_exception_prints_null() -> None:
    track = MessageTrack("AdminCG", "CONSUMED")
    assert str(track) == "MessageTrack [consumerGroup=AdminCG, trackType=CONSUMED, exceptionDesc=null]"
    assert format_message_tracks([track]) == (
        "\n\nMessageTrack [consumerGroup=AdminCG, trackType=CONSUMED, exceptionDesc=null]\n")


def test_track_with_exception_prints_it() -> None:
    track = MessageTrack("G", "NOT_ONLINE", "CODE:206 DESC:the consumer group not online")
    assert str(track).endswith("exceptionDesc=CODE:206 DESC:the consumer group not online]")
