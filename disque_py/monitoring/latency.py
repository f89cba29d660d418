"""The latency monitor: per event, the spikes longer than a threshold.

It owns the samples LATENCY LATEST/HISTORY/RESET/GRAPH/DOCTOR read, and
keeps Disque 1.0's rules for them:

  * latency-monitor-threshold (milliseconds): 0 turns sampling off (what
    was recorded stays readable); otherwise an event that took at least
    that long is recorded.
  * One sample per event per second: a second spike in the same second
    only raises that second's sample. HISTORY_LEN samples are kept per
    event, oldest dropped first.
  * Each event also keeps its all-time high, until it is reset.
  * Event names are matched exactly by HISTORY and GRAPH, and ignoring
    case by RESET.

Measuring is the caller's job (server code, never the node): begin() reads
the clock only when sampling is on, observe_since() turns the elapsed time
into whole milliseconds and records it if it is a spike.
"""

from __future__ import annotations

import time
from collections import deque
from typing import NamedTuple

HISTORY_LEN = 160

# The events the server measures (Disque's names).
COMMAND = "command"                     # a command without the F flag
FAST_COMMAND = "fast-command"           # a command with the F flag
JOBS_PROCESSING = "jobs-processing"     # one slice of due job timers
EVICTION_CYCLE = "eviction-cycle"       # freeing memory near maxmemory
AOF_WRITE = "aof-write"                 # every write of AOF records
AOF_WRITE_ALONE = "aof-write-alone"     # ... with no fsync or rewrite running
AOF_WRITE_PENDING_FSYNC = "aof-write-pending-fsync"
AOF_WRITE_ACTIVE_CHILD = "aof-write-active-child"   # ... while a rewrite runs
AOF_FSYNC_ALWAYS = "aof-fsync-always"   # an fsync replies wait for
AOF_REWRITE_DIFF_WRITE = "aof-rewrite-diff-write"   # a rewrite's last records
AOF_RENAME = "aof-rename"               # the rewritten file replacing the AOF


class EventStats(NamedTuple):
    """What DOCTOR says of one event (integer milliseconds, as Disque)."""

    samples: int
    average: int
    mean_deviation: int
    lowest: int
    highest: int
    all_time_high: int
    period: int          # seconds from the oldest sample to now, at least 1


class EventSeries:
    """One event's samples: [unix second, milliseconds], oldest first."""

    __slots__ = ("samples", "all_time_high")

    def __init__(self) -> None:
        self.samples: deque[list[int]] = deque(maxlen=HISTORY_LEN)
        self.all_time_high = 0

    def add(self, second: int, ms: int) -> None:
        samples = self.samples
        if samples and samples[-1][0] == second:
            if ms > samples[-1][1]:
                samples[-1][1] = ms
        else:
            samples.append([second, ms])
        # Disque 1.0 forgets a same-second spike here; its all-time high
        # then reads lower than a sample. We keep the true high.
        if ms > self.all_time_high:
            self.all_time_high = ms


class LatencyMonitor:
    __slots__ = ("threshold_ms", "events", "_wall", "_clock")

    def __init__(self, threshold_ms: int, wall=time.time, clock=time.monotonic_ns) -> None:
        self.threshold_ms = threshold_ms
        self.events: dict[str, EventSeries] = {}
        self._wall = wall              # unix seconds: the samples' time
        self._clock = clock            # nanoseconds, monotonic: durations

    # ------------------------------------------------------------ recording

    def begin(self) -> int | None:
        """The clock now if sampling is on, else None (no clock read)."""
        return self._clock() if self.threshold_ms else None

    def elapsed_ms(self, began: int | None) -> int:
        """Whole milliseconds since begin(); 0 if sampling was off."""
        if began is None:
            return 0
        return (self._clock() - began) // 1_000_000

    def observe_since(self, event: str, began: int | None) -> None:
        if began is not None:
            self.observe(event, self.elapsed_ms(began))

    def observe(self, event: str, ms: int) -> None:
        """Record ms for event if sampling is on and ms is a spike."""
        threshold = self.threshold_ms
        if threshold and ms >= threshold:
            self.add(event, ms)

    def add(self, event: str, ms: int) -> None:
        series = self.events.get(event)
        if series is None:
            series = self.events[event] = EventSeries()
        series.add(int(self._wall()), ms)

    # ------------------------------------------------------------- reading

    def latest(self) -> list[list]:
        """[[event, time, ms, all-time high], ...] of each event's last sample."""
        reply = []
        for event, series in self.events.items():
            second, ms = series.samples[-1]
            reply.append([event.encode(), second, ms, series.all_time_high])
        return reply

    def history(self, event: str) -> list[list[int]]:
        series = self.events.get(event)
        return [list(sample) for sample in series.samples] if series else []

    def reset(self, names: list[str] | None = None) -> int:
        """Forget the named events (any case), or all; how many were known."""
        if names is None:
            count = len(self.events)
            self.events.clear()
            return count
        count = 0
        for name in names:
            folded = name.lower()
            for event in [e for e in self.events if e.lower() == folded]:
                del self.events[event]
                count += 1
        return count

    def stats(self, event: str) -> EventStats:
        series = self.events[event]
        values = [ms for _, ms in series.samples]
        count = len(values)
        average = sum(values) // count
        deviation = sum(abs(average - ms) for ms in values) // count
        oldest = min(second for second, _ in series.samples)
        period = max(int(self._wall()) - oldest, 1)
        return EventStats(count, average, deviation, min(values), max(values),
                          series.all_time_high, period)

    def now(self) -> int:
        return int(self._wall())
