"""Reconnect backoff: capped exponential delays with jitter (sans-IO, shared by server and client).

Every path that dials a peer again after a failure (the slave's HA client, the client's
``RemotingClient`` and so everything built on it: producers, consumers, admin, the broker's
nameserver registration and slave sync, the Spark link, the dashboard) waits
``Backoff.next_delay()`` seconds between attempts, so a peer that refuses connections, or
accepts and drops them at once, is dialled a few times a second at most instead of in a
tight loop.

Contract:

* The n-th consecutive failure (n = 0, 1, ...) gives a delay drawn uniformly from
  ``[d/2, d]`` with ``d = min(cap, initial * factor**n)`` ("equal jitter": half fixed, half
  random). The random half spreads a fleet of reconnecting peers apart; the fixed half
  bounds the attempt rate of each one: with the defaults (0.1 s doubling to a 2 s cap) at
  most 14 attempts in any 10 s after the first failure, and a peer that comes back is
  retried within 2 s.
* ``reset()`` starts again from ``initial``. ``connection_ended(uptime)`` resets when the
  connection that just ended had stayed up at least ``stable_after`` seconds, and otherwise
  leaves the count alone: a peer that accepts and drops connections at once backs off as one
  that refuses them, while one that served for a while is redialled quickly.
* ``failures``: the consecutive failures counted so far (``next_delay`` calls since the last
  reset).

No clock and no sleeping here: callers measure uptimes and wait (on their own events) for
the delays this returns.
"""

from __future__ import annotations

import random
from collections.abc import Callable

__all__ = ["Backoff", "INITIAL_DELAY", "MAX_DELAY", "STABLE_AFTER"]

INITIAL_DELAY = 0.1
MAX_DELAY = 2.0
STABLE_AFTER = 5.0


class Backoff:
    """Delays between reconnect attempts (see the module docstring).

    Args:
        initial: upper bound of the first delay, seconds (> 0).
        cap: largest upper bound, seconds (>= initial).
        factor: growth of the upper bound per consecutive failure (>= 1).
        stable_after: a connection up this long resets the backoff when it ends.
        rand: a ``random.random``-like source in [0, 1), for tests.
    """

    __slots__ = ("initial", "cap", "factor", "stable_after", "failures", "_rand")

    def __init__(self, initial: float = INITIAL_DELAY, cap: float = MAX_DELAY, *,
                 factor: float = 2.0, stable_after: float = STABLE_AFTER,
                 rand: Callable[[], float] = random.random) -> None:
        if not initial > 0:
            raise ValueError(f"initial delay must be > 0, not {initial}")
        if cap < initial:
            raise ValueError(f"cap {cap} is below the initial delay {initial}")
        if factor < 1:
            raise ValueError(f"factor must be >= 1, not {factor}")
        self.initial = initial
        self.cap = cap
        self.factor = factor
        self.stable_after = stable_after
        self.failures = 0
        self._rand = rand

    def next_delay(self) -> float:
        """Count one more failure; the seconds to wait before the next attempt."""
        n = self.failures
        self.failures = n + 1
        try:
            bound = min(self.cap, self.initial * self.factor ** min(n, 64))
        except OverflowError:  # factor ** 64 beyond a float: long past the cap anyway
            bound = self.cap
        return bound / 2 + self._rand() * bound / 2

    def reset(self) -> None:
        self.failures = 0

    def connection_ended(self, uptime: float) -> None:
        """A connection that had been up ``uptime`` seconds ended: reset if it was stable."""
        if uptime >= self.stable_after:
            self.failures = 0
