"""Clients parked inside the node, and the deadlines that release them.

Waiter, Deadlines and Parking are the engine's (engine/node/parking.pxi,
which says what each keeps): compiled, so that the bus's fast path can
answer a producer whose copies are made without a Python call. Here: the
kinds of waiter and the outcomes handed back in an Unblock effect:
  * a list of jobs (GETJOB served),
  * TIMED_OUT (the deadline passed),
  * a DisqueError (for example LEAVING, or NOREPL for replication waits),
  * a job ID (bytes) for a completed replication wait,
  * DONE (what a WAITJOB or QWAIT waited for has happened).
"""

from __future__ import annotations

from disque_py.engine import (WAIT_DUPLICATE_ADD, WAIT_GETJOB, WAIT_JOB_REPLICATION, WAIT_QWAIT,
                              WAIT_WAITJOB, Deadlines, Parking, Waiter)

GETJOB = WAIT_GETJOB
JOB_REPLICATION = WAIT_JOB_REPLICATION
WAITJOB = WAIT_WAITJOB
QWAIT = WAIT_QWAIT
DUPLICATE_ADD = WAIT_DUPLICATE_ADD        # replication.py's followers
COMPLETION_WAITS = (WAITJOB, QWAIT)       # kept by waits.py

TIMED_OUT = "timed-out"
DONE = "done"

__all__ = ["GETJOB", "JOB_REPLICATION", "WAITJOB", "QWAIT", "DUPLICATE_ADD", "COMPLETION_WAITS",
           "TIMED_OUT", "DONE", "Deadlines", "Parking", "Waiter"]
