"""Consumers that wait: a GETJOB that found nothing parks here, and PAUSE.

GETJOB itself (NodeCore.get_jobs, engine/node.pxi) takes jobs from the
named queues left to right, pass after pass, until COUNT jobs or a pass
that finds nothing. A client that found nothing parks as a Waiter on every
queue it named (or on its pattern: patterns.py); when a job is queued on
one of them the queue is marked ready and serve_ready() hands each waiter
exactly one job, oldest waiter first, as Disque does. A queue paused in output neither serves nor wakes
anyone until the pause is lifted.
"""

from __future__ import annotations

from disque_py.formats import bus as msg
from disque_py.node.waiters import COMPLETION_WAITS, DUPLICATE_ADD, GETJOB, JOB_REPLICATION, Waiter
from disque_py.engine import PAUSED_ALL, PAUSED_OUT
from disque_py.base.errors import LeavingError
from disque_py.base.replies import LEAVING_MESSAGE


class ConsumerMixin:
    def block(self, client, queue_names: list[bytes], deadline_ms: int,
              withcounters: bool) -> Waiter:
        """Park `client` until a job arrives on any of the queues."""
        waiter = Waiter(client, GETJOB, deadline_ms)
        waiter.queues = tuple(dict.fromkeys(queue_names))
        waiter.withcounters = withcounters
        for name in waiter.queues:
            self.queue(name).add_waiter(waiter)
            self.waiting_queues[name] = None
        self.start_waiting(waiter)
        return waiter

    def start_waiting(self, waiter: Waiter) -> None:
        """Count a parked client and arm its deadline; forget_waiter undoes both."""
        self.deadlines.add(waiter)
        self.blocked_clients += 1

    def forget_waiter(self, waiter: Waiter) -> None:
        """Take a waiter off every structure that knows it (idempotent)."""
        if not waiter.active:
            return
        waiter.active = False
        self.blocked_clients -= 1
        self.deadlines.discard(waiter)
        if waiter.kind in COMPLETION_WAITS:
            self.forget_completion_wait(waiter)
            return
        if waiter.pattern is not None:
            self.forget_pattern_waiter(waiter)
            return
        if waiter.kind == DUPLICATE_ADD:
            self.forget_follower(waiter)
            return
        queues = self.queues
        for name in waiter.queues:
            q = queues.get(name)
            if q is not None:
                q.remove_waiter(waiter)
                if q.waiters is None:
                    self.waiting_queues.pop(name, None)

    def cancel_waiter(self, waiter: Waiter) -> None:
        """The parked client went away: drop its wait without answering."""
        if waiter.kind == JOB_REPLICATION and waiter.active:
            self.abandon_replication(waiter.job, None, keep_promised=True)
        else:
            self.forget_waiter(waiter)

    def release_all_waiters_leaving(self) -> None:
        """This node is leaving: every parked client is told to go elsewhere.
        A waiting ADDJOB fails, but a job whose copy here was promised to a
        duplicate ADDJOB elsewhere stays, as when the ADDJOB times out: the
        duplicate may have counted this copy."""
        leaving = LeavingError(LEAVING_MESSAGE)
        for job in list(self.replicating):
            self.abandon_replication(job, leaving, keep_promised=True)
        for q in list(self.queues.values()):
            for waiter in list(q.waiters or ()):
                self.release(waiter, leaving)
        for waiter in list(self.pattern_waiters or ()):
            self.release(waiter, leaving)

    def serve_ready(self) -> None:
        """Give one job to each waiter of the queues that received jobs;
        what is left goes to nodes that asked for it (federation)."""
        ready = self.ready
        self.ready = {}
        queues = self.queues
        for name in ready:
            q = queues.get(name)
            if q is None or q.flags & PAUSED_OUT:
                continue
            if q.waiters is not None:
                for waiter in list(q.waiters):
                    job = self.fetch(q)
                    if job is None:
                        break
                    self.release(waiter, [job])
                if not q.jobs:
                    self.need_jobs(q, True)
            if self.pattern_waiters is not None and q.jobs:
                self.serve_patterns(q)
            if q.interested is not None and q.jobs:
                self.offer_to_interested(q)

    def queues_with_waiters(self):
        """Queues some parked consumer waits on: named by a GETJOB FROM, or
        matching a parked GETJOB PATTERN (each queue once)."""
        queues = self.queues
        names = dict.fromkeys(self.waiting_queues)
        for pattern in {waiter.pattern for waiter in self.pattern_waiters or ()}:
            names.update(dict.fromkeys(self.pattern_queues(pattern)))
        for name in names:
            q = queues.get(name)
            if q is not None:
                yield q

    # ------------------------------------------------------------ pausing

    def pause(self, name: bytes, flags: int | None, broadcast: bool) -> int:
        """PAUSE: set (None: keep) a queue's pause flags; returns them."""
        q = self.queues.get(name)
        if q is None and flags:
            q = self.queue(name)
        if q is not None and flags is not None:
            self.set_paused(q, flags)
        state = q.flags & PAUSED_ALL if q is not None else 0
        if broadcast and len(name) <= msg.MAX_QUEUE_NAME:
            self.send_to(self.known_peers, msg.PAUSE, msg.QueueOp(name, state))
        return state

    def on_pause(self, sender: bytes, name: bytes, flags: int) -> None:
        """A peer's PAUSE ... BCAST: take the same pause state."""
        q = self.queues.get(name)
        if q is None:
            if not flags & PAUSED_ALL:
                return
            q = self.queue(name)
        self.set_paused(q, flags & PAUSED_ALL)
