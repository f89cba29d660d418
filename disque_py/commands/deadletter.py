"""QREQUEUE: dead-lettered jobs back to work (beyond Disque).

QREQUEUE dead-queue [TO queue] [COUNT n] moves up to n (default: all) of
the dead-lettered jobs queued in dead-queue back to `queue`, or each to the
queue it came from, queued at once with their counters reset, so each gets
MAXDELIVERIES more tries. Jobs in dead-queue that were not dead-lettered
(added to it directly) stay. Answers how many moved."""

from __future__ import annotations

from disque_py.commands.args import ArgReader
from disque_py.base.errors import CommandError
from disque_py.base.replies import COUNT_POSITIVE


def qrequeue(server, session, argv):
    """QREQUEUE dead-queue [TO queue] [COUNT n]"""
    options = ArgReader(argv, 2)
    to_queue, count = None, -1
    while options:
        option = options.option()
        if option == b"to" and options.has_value:
            to_queue = options.raw()
        elif option == b"count" and options.has_value:
            count = options.int_value()
            if count <= 0:
                raise CommandError(COUNT_POSITIVE)
        else:
            raise options.syntax_error()
    return server.node.requeue.requeue_dead(argv[1], to_queue, count)
