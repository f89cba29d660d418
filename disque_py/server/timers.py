"""The server's clocks: the node's job timer, and the cron.

JobTimer runs the node's timers (node.tick: jobs due, parked clients'
deadlines, each component's paced work) when the node says they are due,
and carries out their effects. It sleeps until the node's next due time,
but never more than TIMER_MAX_SLEEP_MS, so a deadline set by a command that
arrives meanwhile is honoured within that bound; when more jobs are due
than one slice handles, the next slice runs on the next loop turn, after
I/O. How late the loop ran it is kept (ServerState.timer_lateness, for
/metrics), and each slice is timed as the latency monitor's
jobs-processing event.

Cron runs `hz` times a second: the instantaneous rates INFO shows, the
idle queues the node forgets, clients idle past `timeout`, the AOF's
once-a-second work, and the garbage collector's tenure.

Garbage collection: jobs are acyclic by design (the one cycle, job <->
awake bucket, is cut whenever a job leaves the schedule), so the cron moves
survivors into gc's permanent generation; full collections then never walk
millions of jobs and stall the server. Frozen objects are never collected,
so each cron first collects what is not frozen yet (what was allocated
since the last cron, cheap): cyclic garbage made meanwhile, such as a
raised exception and its frames, is freed rather than kept for good.
"""

from __future__ import annotations

import gc
import time

from disque_py.monitoring.latency import JOBS_PROCESSING

TIMER_MAX_SLEEP_MS = 10
TIMER_MIN_SLEEP_MS = 1


class JobTimer:
    """Runs the node's timers on the event loop."""

    def __init__(self, loop, node, server, effects) -> None:
        self.loop = loop
        self.node = node
        self.server = server
        self.effects = effects
        self._handle = None
        self._due = 0.0          # loop time the timer was set for

    def start(self) -> None:
        self._schedule(0)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()

    def _schedule(self, delay_ms: float) -> None:
        self._due = self.loop.time() + delay_ms / 1000
        self._handle = self.loop.call_later(delay_ms / 1000, self._run)

    def _run(self) -> None:
        # How much later than asked the loop ran us: due jobs wait that long.
        self.server.timer_lateness.observe(max(self.loop.time() - self._due, 0.0))
        node = self.node
        monitor = self.server.latency
        began = monitor.begin()
        more = node.tick()
        monitor.observe_since(JOBS_PROCESSING, began)
        if node.effects:
            self.effects.apply()
        if more:
            self._due = self.loop.time()
            self._handle = self.loop.call_soon(self._run)
            return
        due = node.next_wakeup()
        if due is None:
            delay = TIMER_MAX_SLEEP_MS
        else:
            delay = min(max(due - node.clock.now_ms(), TIMER_MIN_SLEEP_MS), TIMER_MAX_SLEEP_MS)
        self._schedule(delay)


class Cron:
    """The server's periodic chores, `hz` times a second."""

    def __init__(self, loop, config, server, node, persistence) -> None:
        self.loop = loop
        self.config = config
        self.server = server
        self.node = node
        self.persistence = persistence
        self._handle = None
        self._runs = 0

    def start(self) -> None:
        self._handle = self.loop.call_later(1 / self._hz(), self._run)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()

    def _hz(self) -> int:
        return max(self.config.hz, 1)

    def _run(self) -> None:
        self._runs += 1
        if self._runs % self._hz() == 0:
            self.persistence.every_second()
        self.server.stats.sample_ops()
        self.node.memory.evict_idle_queues()
        self._close_idle_clients(self.config.timeout)
        tenure_survivors()
        self._handle = self.loop.call_later(1 / self._hz(), self._run)

    def _close_idle_clients(self, max_idle_s: int) -> None:
        if not max_idle_s:
            return
        limit = time.monotonic() - max_idle_s
        for session in list(self.server.clients.values()):
            if session.last_interaction < limit and not session.waiting \
                    and not session.monitor and session.conn is not None:
                session.conn.close()


def tenure_survivors() -> None:
    """Free the cyclic garbage made since the last call (a collection walks
    only unfrozen objects), then freeze what survived."""
    gc.collect()
    gc.freeze()
