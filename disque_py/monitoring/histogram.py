"""Durations counted into fixed buckets, for /metrics's histograms.

A DurationHistogram keeps, as Prometheus's histograms do, how many
observations fell at or under each bucket's upper bound, their count and
their sum, in seconds. It is fed off the command path only (a timer tick,
an fsync), and an observation costs one bisect and three additions. The
figures only grow (no reset: Prometheus computes rates from them); the
exporter turns the per-bucket counts into cumulative ones.
"""

from __future__ import annotations

from bisect import bisect_left

# Upper bounds, seconds: 100 us to 10 s, as fits an event loop's timers and
# a disk's fsyncs.
DURATION_BUCKETS_S = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                      0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class DurationHistogram:
    __slots__ = ("bounds", "counts", "count", "sum")

    def __init__(self, bounds: tuple[float, ...] = DURATION_BUCKETS_S) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)     # the last: over every bound (+Inf)
        self.count = 0
        self.sum = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect_left(self.bounds, seconds)] += 1
        self.count += 1
        self.sum += seconds

    def cumulative(self) -> list[tuple[str, int]]:
        """[(upper bound, observations at or under it), ..., ("+Inf", count)]."""
        buckets, running = [], 0
        for bound, count in zip(self.bounds, self.counts):
            running += count
            buckets.append((repr(bound), running))
        buckets.append(("+Inf", self.count))
        return buckets
