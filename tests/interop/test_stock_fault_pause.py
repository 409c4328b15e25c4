"""A broker paused for 30 s (SIGSTOP) under load, then resumed: stock RocketMQ 4.9.7.

The twin of ``tests/integration/test_fault_pause.py``: the same scenario
(``tests/fault_pause.py``) on a stock 4.9.7 nameserver and two stock broker groups, with
our producer and push consumer. What stock did is recorded (printed, and as the test's
``stock`` property) together with the rules of ``tests.fault_pause.problems`` it broke.

What stock 4.9.7 did when this test was written (and what ours does, the same on every
point): it broke none of the rules. Nothing crashed; every acknowledged message was
consumed once, at the offset its acknowledgement named; queue offsets contiguous, no key
stored twice, no record delivered twice, committed offsets never backwards and caught up;
the producer (9 sends to the stopped broker timed out, one after another) got SEND_OK from
it again right after SIGCONT and the consumer consumed what it stored. The 8 sends that
waited in its sockets for 30 s were all answered SUCCESS and stored: no SYSTEM_BUSY, since
Netty reads them only after SIGCONT and BrokerFastFailure's ``[TIMEOUT_CLEAN_QUEUE]``
measures the wait in the send thread pool's queue from that moment. The 8 abandoned raw
sends and the 9 timed-out sends of the producer were stored as well, though their callers
had closed the connections (a duplicate if the caller sends again: at-least-once). The
probe's stale long-poll answer was written to its connection after SIGCONT and dropped by
our client; the re-pull got its own answer.

The test asserts only that the stopped broker is alive afterwards; the rest is recorded.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests import fault_pause
from tests.interop.stock import JavaServer

pytestmark = [pytest.mark.interop, pytest.mark.timeout(400)]


async def test_stock_broker_paused_under_load_then_resumed(
        stock_namesrv: Callable[..., JavaServer], stock_broker: Callable[..., JavaServer],
        record_property: Callable[[str, object], None]) -> None:
    ns = stock_namesrv()
    brokers = {name: stock_broker(ns.address, name=name) for name in ("broker-a", "broker-b")}
    outcome = await fault_pause.run(ns.address, brokers, "broker-b")
    found = fault_pause.problems(outcome)
    record_property("stock", outcome.summary())
    record_property("stock_problems", found)
    print(f"stock: {outcome.summary()}\nstock broke: {found}")
    assert outcome.alive_after, outcome.summary()
