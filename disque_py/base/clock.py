"""The time the node reads, and a fake one that tests move by hand.

The node never calls time.time() itself: every timer, TTL and ctime is
computed from a Clock, so unit tests drive delays, retries and expiry
without sleeping. Times are integers in milliseconds since the epoch.
"""

from __future__ import annotations

import random
import time


class Clock:
    """Wall-clock time, as Disque uses it (jobs carry absolute times)."""

    __slots__ = ("random", "_uniform")
    # The engine reads a real clock itself, in C (the same CLOCK_REALTIME
    # as time.time_ns); only a clock that is not real is called.
    REAL = True

    def __init__(self, seed: int | None = None) -> None:
        # Desynchronisation jitter for retries and GC comes from here, so a
        # seeded clock makes a whole node deterministic.
        self.random = random.Random(seed)
        self._uniform = self.random.random

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def jitter(self, spread_ms: int) -> int:
        """A random error in [-spread/2, spread/2), as Disque's randomTimeError."""
        return int(self._uniform() * spread_ms) - spread_ms // 2


class FakeClock(Clock):
    """A clock that only moves when told to."""

    __slots__ = ("_now",)
    REAL = False

    def __init__(self, start_ms: int = 1_700_000_000_000, seed: int = 0) -> None:
        super().__init__(seed)
        self._now = start_ms

    def now_ms(self) -> int:
        return self._now

    def advance(self, ms: int) -> None:
        self._now += ms

    def set(self, now_ms: int) -> None:
        self._now = now_ms
