"""Which queues the dashboard marks as dead-letter queues, empty ones too.

A queue is a dead-letter queue when any of these holds:
  * its name is a default dead-letter queue's, `<queue>:dead`, where
    MAXDELIVERIES without DEADLETTER sends a job;
  * a job held here names it with DEADLETTER;
  * its next job was dead-lettered (it got there by MAXDELIVERIES).
The first two do not need a job in the queue: a dead-letter queue emptied
by QREQUEUE, or one a consumer blocks on before any job has died, is
marked as the same queue holding dead jobs is.

No index keeps jobs by their DEADLETTER queue, so the names are learnt by
walking the jobs table (JSCAN's walk, whole partitions) WALK_STEP_JOBS jobs
at a time, one step every WALK_INTERVAL_S in the node's loop: a step costs
the node the same however many jobs it holds (a walk of a million jobs
takes about 200 steps), and a name is known from the step that meets the
first job naming it until a whole walk meets none.
"""

from __future__ import annotations

import asyncio
import traceback

from disque_py.base import log
from disque_py.engine import DEAD_QUEUE_SUFFIX

WALK_STEP_JOBS = 5000
WALK_INTERVAL_S = 1.0


class DeadLetterQueues:
    def __init__(self, node, step_jobs: int = WALK_STEP_JOBS) -> None:
        self.node = node
        self.step_jobs = step_jobs
        self._named: set[bytes] = set()       # DEADLETTER names of the last whole walk
        self._walking: set[bytes] = set()     # ... and of the walk in progress
        self._cursor = 0

    def is_dead_letter_queue(self, q) -> bool:
        name = q.name
        return name.endswith(DEAD_QUEUE_SUFFIX) or name in self._named or \
            name in self._walking or self._holds_dead_letters(q)

    def _holds_dead_letters(self, q) -> bool:
        head = q.jobs.peek(1)
        options = self.node.options_of(head[0]) if head else None
        return options is not None and options.dead_reason_name is not None

    def step(self) -> bool:
        """Walk the next WALK_STEP_JOBS jobs (whole partitions) for the
        DEADLETTER queues they name; a walk's end replaces the names known.
        True when this step ended a walk."""
        node = self.node
        self._cursor, jobs = node.jobs.scan(self._cursor, self.step_jobs, None, False)
        for job in jobs:
            options = node.options_of(job)
            if options is not None and options.deadletter is not None:
                self._walking.add(options.deadletter)
        if self._cursor != 0:
            return False
        self._named, self._walking = self._walking, set()
        return True

    async def run(self) -> None:
        """A step every WALK_INTERVAL_S until cancelled (the endpoint's
        cleanup); a step that fails is logged, not fatal to the node."""
        while True:
            try:
                self.step()
            except Exception:           # noqa: BLE001 (a bug here must not stop the node)
                log.warning("dashboard dead-letter walk: %s", traceback.format_exc().rstrip())
            await asyncio.sleep(WALK_INTERVAL_S)
