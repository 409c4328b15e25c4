"""protocol/backoff.py: the reconnect delays' bounds, their jitter, the attempt-rate bound
the module docstring states, and when the backoff resets."""

from __future__ import annotations

import random

import pytest

from aiorocketmq.protocol.backoff import INITIAL_DELAY, MAX_DELAY, STABLE_AFTER, Backoff


def test_delays_double_within_half_to_full_bound_up_to_the_cap() -> None:
    low, high = Backoff(rand=lambda: 0.0), Backoff(rand=lambda: 1.0 - 1e-12)
    bounds = [min(MAX_DELAY, INITIAL_DELAY * 2 ** n) for n in range(12)]
    lows = [low.next_delay() for _ in bounds]
    highs = [high.next_delay() for _ in bounds]
    assert lows == pytest.approx([b / 2 for b in bounds])
    assert highs == pytest.approx(bounds)
    assert lows[0] == pytest.approx(0.05) and highs[-1] == pytest.approx(MAX_DELAY)
    assert low.failures == high.failures == len(bounds)


def test_jitter_spreads_delays_over_the_whole_range() -> None:
    rng = random.Random(7)
    delays = []
    for _ in range(2000):
        b = Backoff(rand=rng.random)
        for _ in range(10):  # at the cap: [1 s, 2 s]
            d = b.next_delay()
        delays.append(d)
    assert min(delays) >= MAX_DELAY / 2 and max(delays) <= MAX_DELAY
    # spread over the range, not clustered at one value: every tenth of it is hit
    buckets = {int((d - MAX_DELAY / 2) / (MAX_DELAY / 2) * 10) for d in delays}
    assert buckets >= set(range(10))
    # and two backoffs with their own random sources do not march in step
    a, b = Backoff(rand=random.Random(1).random), Backoff(rand=random.Random(2).random)
    assert [a.next_delay() for _ in range(8)] != [b.next_delay() for _ in range(8)]


def test_at_most_14_attempts_in_10_seconds_even_with_the_smallest_delays() -> None:
    b = Backoff(rand=lambda: 0.0)
    t, attempts = 0.0, 1  # the first attempt at t = 0 failed
    for _ in range(1000):
        t += b.next_delay()
        if t >= 10.0:
            break
        attempts += 1
    assert attempts == 14


def test_reset_and_connection_ended() -> None:
    b = Backoff(rand=lambda: 1.0 - 1e-12)
    for _ in range(6):
        b.next_delay()
    assert b.failures == 6
    b.connection_ended(STABLE_AFTER - 0.01)  # dropped soon after connecting: keeps backing off
    assert b.failures == 6 and b.next_delay() == pytest.approx(MAX_DELAY)
    b.connection_ended(STABLE_AFTER)  # stayed up: the next reconnect is quick again
    assert b.failures == 0 and b.next_delay() == pytest.approx(INITIAL_DELAY)
    b.next_delay()
    b.reset()
    assert b.failures == 0 and b.next_delay() == pytest.approx(INITIAL_DELAY)


def test_long_outages_and_arguments() -> None:
    b = Backoff(0.5, 3.0, factor=10.0, rand=lambda: 0.0)
    for _ in range(10_000):  # a long outage: no overflow, still at the cap
        d = b.next_delay()
    assert d == pytest.approx(1.5)
    big = Backoff(1.0, 5.0, factor=1e200, rand=lambda: 0.0)
    assert [big.next_delay() for _ in range(3)] == pytest.approx([0.5, 2.5, 2.5])
    with pytest.raises(ValueError):
        Backoff(0.0)
    with pytest.raises(ValueError):
        Backoff(1.0, 0.5)
    with pytest.raises(ValueError):
        Backoff(factor=0.5)
