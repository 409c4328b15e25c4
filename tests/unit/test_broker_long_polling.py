"""PullRequestHoldService: wake-up by arrival and filter, expiry, checker pass, caps, closed channels."""

from __future__ import annotations

import asyncio

import pytest

from aiorocketmq.protocol.channel import Channel
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.javautil import java_string_hash
from aiorocketmq.server.broker.long_polling import PullRequest, PullRequestHoldService

pytestmark = pytest.mark.timeout(10)


class Harness:
    def __init__(self, **kw: object) -> None:
        self.woken: list[tuple[Channel, RemotingCommand]] = []
        self.max_offsets: dict[tuple[str, int], int] = {}
        self.event = asyncio.Event()
        self.service = PullRequestHoldService(
            wakeup=self._wakeup, max_offset=lambda t, q: self.max_offsets.get((t, q), 0), **kw)

    def _wakeup(self, channel: Channel, request: RemotingCommand) -> None:
        self.woken.append((channel, request))
        self.event.set()

    def park(self, channel: Channel, offset: int = 0, *, topic: str = "T", queue_id: int = 0,
             code_set: frozenset[int] | None = None, hold: float = 60.0) -> RemotingCommand:
        request = RemotingCommand.create_request(11)
        loop = asyncio.get_running_loop()
        pull = PullRequest(channel, request, topic, queue_id, offset, code_set, loop.time() + hold)
        assert self.service.suspend(pull)
        return request


async def test_arrival_wakes_matching_offset_and_tag() -> None:
    h = Harness()
    ch = Channel()
    tag_a = java_string_hash("TagA")
    r_all = h.park(ch, 0)
    r_tag = h.park(ch, 0, code_set=frozenset({tag_a}))
    r_ahead = h.park(ch, 5)
    h.service.notify_message_arriving("T", 0, 1, java_string_hash("TagB"))
    assert [r for _, r in h.woken] == [r_all]
    h.service.notify_message_arriving("T", 0, 2, tag_a)
    assert [r for _, r in h.woken] == [r_all, r_tag]
    assert h.service.suspended_count == 1
    h.service.notify_message_arriving("T", 1, 9, tag_a)  # another queue
    assert h.service.suspended_count == 1
    h.service.drop_channel(ch)
    assert h.service.suspended_count == 0
    assert r_ahead not in [r for _, r in h.woken]


async def test_expiry_answers_at_deadline() -> None:
    h = Harness()
    req = h.park(Channel(), 0, hold=0.05)
    await asyncio.wait_for(h.event.wait(), 5)
    assert [r for _, r in h.woken] == [req]
    assert h.service.suspended_count == 0


async def test_checker_pass_uses_store_max_offset() -> None:
    h = Harness()
    req = h.park(Channel(), 3)
    h.service.check_hold_requests()
    assert h.woken == []
    h.max_offsets[("T", 0)] = 4
    h.service.check_hold_requests()
    assert [r for _, r in h.woken] == [req]


async def test_caps_refuse_parking() -> None:
    h = Harness(max_per_queue=2, max_total=3)
    ch = Channel()
    loop = asyncio.get_running_loop()
    h.park(ch, 0)
    h.park(ch, 0)
    full = PullRequest(ch, RemotingCommand.create_request(11), "T", 0, 0, None, loop.time() + 60)
    assert not h.service.suspend(full)
    h.park(ch, 0, queue_id=1)
    other = PullRequest(ch, RemotingCommand.create_request(11), "T", 2, 0, None, loop.time() + 60)
    assert not h.service.suspend(other)
    assert h.service.suspended_count == 3
    await h.service.stop()  # answers everything parked
    assert len(h.woken) == 3 and h.service.suspended_count == 0


async def test_closed_channel_is_not_answered() -> None:
    h = Harness()
    ch = Channel()
    h.park(ch, 0)
    ch.close()
    h.service.notify_message_arriving("T", 0, 1, None)
    assert h.woken == [] and h.service.suspended_count == 0


def test_tags_code_compares_low_32_bits_signed() -> None:
    code = java_string_hash("x" * 40)  # some negative int
    pull = PullRequest(Channel(), RemotingCommand.create_request(11), "T", 0, 0,
                       frozenset({code}), 0.0)
    assert pull.matches(code) and pull.matches(code & 0xFFFFFFFF) and not pull.matches(code + 1)
    assert pull.matches(None)


async def test_is_waiting_names_queues_with_parked_pulls() -> None:
    h = Harness()
    assert not h.service.is_waiting("T", 0)
    ch = Channel()
    h.park(ch, 0)
    assert h.service.is_waiting("T", 0) and not h.service.is_waiting("T", 1)
    h.service.notify_message_arriving("T", 0, 1)
    assert not h.service.is_waiting("T", 0)
