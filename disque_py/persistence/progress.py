"""Progress of long work: how far, how fast, how long still, when to say so.

A ProgressMeter follows one piece of work whose size is known up front
(the bytes of an AOF) while it is done in steps, counting the items done
on the way (jobs, records). The AOF load reads it for its log lines and
for INFO's loading_* fields; check-aof for its plain progress lines.
Rules kept:
  * The clock is passed in (time.monotonic by default): unit tests drive
    a fake one; nothing here sleeps or reads the wall clock.
  * report_due() owes a report once `interval` seconds have passed since
    the start or since the last report, never more often: a step that
    took 12 s owes one report, not two.
  * The rate is over the whole run so far (items per second since the
    start): what an operator compares between runs.
  * The ETA is Disque's INFO loading_eta_seconds: elapsed x remaining /
    done, in whole seconds, and 1 while there is nothing to extrapolate
    from (nothing done yet, or less than a second elapsed), as Disque
    shows it.
"""

from __future__ import annotations

import time

REPORT_INTERVAL_S = 5.0
_MB = 1024 * 1024


class ProgressMeter:
    def __init__(self, total: int, clock=time.monotonic,
                 interval: float = REPORT_INTERVAL_S) -> None:
        self.total = total            # units of work (bytes)
        self.done = 0                 # units done
        self.items = 0                # things done on the way (jobs)
        self._clock = clock
        self._interval = interval
        self.started = clock()
        self._next_report = self.started + interval

    def update(self, done: int, items: int) -> None:
        self.done = done
        self.items = items

    def elapsed(self) -> float:
        return self._clock() - self.started

    @property
    def percent(self) -> float:
        if self.total <= 0:
            return 100.0
        return min(self.done * 100 / self.total, 100.0)

    def rate(self) -> float:
        """Items per second since the start (0 before any time passed)."""
        elapsed = self.elapsed()
        return self.items / elapsed if elapsed > 0 else 0.0

    def eta_seconds(self) -> int:
        elapsed = self.elapsed()
        if self.done <= 0 or elapsed < 1:
            return 1
        return int(elapsed * max(self.total - self.done, 0) / self.done)

    def report_due(self) -> bool:
        """Whether a report is owed now; if so, the next is owed an interval on."""
        now = self._clock()
        if now < self._next_report:
            return False
        self._next_report = now + self._interval
        return True

    def describe(self, items_name: str) -> str:
        """One line: '45.20% (103.2 of 228.4 MB), 452000 jobs, 26116 jobs/s, 9 s left'."""
        return (f"{self.percent:.2f}% ({self.done / _MB:.1f} of {self.total / _MB:.1f} MB), "
                f"{self.items} {items_name}, {self.rate():.0f} {items_name}/s, "
                f"{self.eta_seconds()} s left")
