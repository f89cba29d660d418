"""The hot commands as tests run them on a node: through run_hot, the entry
point the command table calls (engine/net/hot.pxi), with the replies
decoded back into what a test checks (a count, the jobs taken).

A test that drives a node's commands goes through the same parsing and
checks a client's command does, not through a back door of its own.
"""

from __future__ import annotations

import hiredis

from disque_py.base.errors import DisqueError
from disque_py.engine import HOT_COMMANDS, SessionCore, run_hot


def command(node, *argv, session=None):
    """One hot command: its encoded reply, or (waiter, overlaps) when the
    client parks; an error is raised as the DisqueError it is."""
    words = [arg if isinstance(arg, bytes) else str(arg).encode() for arg in argv]
    kind = HOT_COMMANDS[words[0].decode().lower()]
    return run_hot(kind, node, session if session is not None else SessionCore(), words)


def _count(node, *argv) -> int:
    reply = command(node, *argv)
    assert reply.startswith(b":"), reply
    return int(reply[1:-2])


def ack_jobs(node, job_ids) -> int:
    """ACKJOB: how many known jobs moved to the acked state."""
    return _count(node, "ACKJOB", *job_ids) if job_ids else 0


def nack_jobs(node, job_ids, delay_ms: int = -1) -> int:
    """NACK [DELAY seconds]: how many were queued again (or will be)."""
    assert delay_ms < 0 or delay_ms % 1000 == 0, "NACK's DELAY is in seconds"
    delay = ("DELAY", delay_ms // 1000) if delay_ms >= 0 else ()
    return _count(node, "NACK", *job_ids, *delay)


def enqueue_jobs(node, job_ids, nack: bool = False) -> int:
    """ENQUEUE (or, with `nack`, NACK): how many were queued."""
    return _count(node, "NACK" if nack else "ENQUEUE", *job_ids)


def dequeue_jobs(node, job_ids) -> int:
    """DEQUEUE: how many left their queue."""
    return _count(node, "DEQUEUE", *job_ids)


def get_jobs(node, queue_names, count: int = 1) -> list:
    """GETJOB NOHANG COUNT n FROM ...: the jobs taken ([] if none)."""
    reply = command(node, "GETJOB", "NOHANG", "COUNT", count, "FROM", *queue_names)
    reader = hiredis.Reader()
    reader.feed(reply)
    taken = reader.gets()
    if isinstance(taken, hiredis.ReplyError):
        raise DisqueError(str(taken))
    return [node.lookup(job_id) for _, job_id, _ in taken or ()]
