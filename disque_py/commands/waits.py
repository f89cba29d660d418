"""Waiting for completion, beyond Disque: WAITJOB and QWAIT, and their replies.

Both read TIMEOUT as GETJOB does (milliseconds; 0 or absent: no timeout;
the same errors), answer at once when there is nothing to wait for, and
otherwise park the client in the node (node/waits.py) until the work is
done or the timeout passes. Every bad argument is an error and changes
nothing: IDs are checked, all of them, after the options.
"""

from __future__ import annotations

from disque_py.commands.args import check_job_ids, parse_timeout
from disque_py.commands.context import Park
from disque_py.node.waiters import DONE, WAITJOB
from disque_py.base.errors import CommandError
from disque_py.base.replies import SYNTAX_ERROR

TIMEOUT_OPTION = b"timeout"
QUEUE_EMPTIED = 1              # QWAIT: no open job left on the queue
QUEUE_STILL_BUSY = 0           # QWAIT: the timeout came first


def waitjob(server, session, argv):
    """WAITJOB job-id ... job-id [TIMEOUT ms]"""
    job_ids, timeout = _ids_and_timeout(argv)
    check_job_ids(job_ids)
    node = server.node
    statuses, waiter = node.waits.wait_for_jobs(session, job_ids, _deadline(node, timeout))
    return statuses if waiter is None else Park(waiter)


def qwait(server, session, argv):
    """QWAIT queue [TIMEOUT ms]"""
    if len(argv) == 2:
        timeout = 0
    elif len(argv) == 4 and argv[2].lower() == TIMEOUT_OPTION:
        timeout = parse_timeout(argv[3])
    else:
        raise CommandError(SYNTAX_ERROR)
    node = server.node
    waiter = node.waits.wait_for_queue(session, argv[1], _deadline(node, timeout))
    return QUEUE_EMPTIED if waiter is None else Park(waiter)


def render_completion(waiter, outcome):
    """A parked WAITJOB's or QWAIT's reply, from the outcome the node gave
    (DONE, TIMED_OUT): WAITJOB answers its statuses either way."""
    if waiter.kind == WAITJOB:
        return waiter.statuses
    return QUEUE_EMPTIED if outcome is DONE else QUEUE_STILL_BUSY


def _ids_and_timeout(argv: list[bytes]) -> tuple[list[bytes], int]:
    """WAITJOB's IDs, and its timeout: TIMEOUT, when given, follows the IDs
    and takes the last argument."""
    args = argv[1:]
    for index, arg in enumerate(args):
        if len(arg) == len(TIMEOUT_OPTION) and arg.lower() == TIMEOUT_OPTION:
            if index == 0 or index != len(args) - 2:
                raise CommandError(SYNTAX_ERROR)
            return args[:index], parse_timeout(args[-1])
    return args, 0


def _deadline(node, timeout_ms: int) -> int:
    return node.clock.now_ms() + timeout_ms if timeout_ms else 0
