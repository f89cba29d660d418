"""Queue commands: GETJOB, QLEN, QPEEK, QSTAT, QSCAN, ENQUEUE, DEQUEUE,
NACK, WORKING, PAUSE; and how a parked GETJOB is finally answered.

GETJOB, QLEN, ENQUEUE, NACK, DEQUEUE and WORKING are compiled (engine/net/hot.pxi
parses, runs and answers them); the others are parsed here."""

from __future__ import annotations

from disque_py.commands.args import ArgReader, int_or_error, parse_scan_options
from disque_py.commands.context import compiled
from disque_py.commands.waits import render_completion
from disque_py.node.waiters import COMPLETION_WAITS, GETJOB, TIMED_OUT
from disque_py.engine import PAUSED_ALL, PAUSED_IN, PAUSED_OUT, PAUSE_STATE_NAMES, render_jobs
from disque_py.base.errors import CommandError
from disque_py.base.replies import SYNTAX_ERROR
from disque_py.formats.resp import EMPTY_ARRAY, NULL_ARRAY, Raw

PAUSE_OPTIONS = {b"in": PAUSED_IN, b"out": PAUSED_OUT, b"all": PAUSED_ALL}


# GETJOB [NOHANG] [TIMEOUT ms] [COUNT n] [WITHCOUNTERS] FROM queue1 ... queueN
getjob = compiled("getjob")
# QLEN queue
qlen = compiled("qlen")
# ENQUEUE job-id ... job-id
enqueue = compiled("enqueue")
# NACK job-id ... job-id [DELAY seconds]
nack = compiled("nack")
# DEQUEUE job-id ... job-id
dequeue = compiled("dequeue")
# WORKING job-id
working = compiled("working")


def render_outcome(waiter, outcome):
    """The reply for a parked client, from the outcome the node handed back:
    GETJOB gets jobs or a null array on timeout; ADDJOB its job ID as a
    status reply; either may get an error (LEAVING, NOREPL). WAITJOB and
    QWAIT are answered by commands/waits.py."""
    if waiter.kind == GETJOB:
        if outcome is TIMED_OUT:
            return NULL_ARRAY
        if isinstance(outcome, list):
            return Raw(render_jobs(outcome, waiter.withcounters))
    elif waiter.kind in COMPLETION_WAITS:
        return render_completion(waiter, outcome)
    elif type(outcome) is bytes:
        return Raw(b"+%b\r\n" % outcome)
    return outcome


def qpeek(server, session, argv):
    """QPEEK queue count (negative count: newest first)"""
    count = int_or_error(argv[2])
    q = server.node.queues.get(argv[1])
    if q is None or not q.jobs:
        return EMPTY_ARRAY
    return Raw(render_jobs(q.jobs.peek(count), False))


def qstat(server, session, argv):
    """QSTAT queue"""
    node = server.node
    q = node.queues.get(argv[1])
    if q is None:
        return NULL_ARRAY
    now = node.clock.now_ms()
    now_s = now // 1000
    return [
        b"name", q.name,
        b"len", len(q.jobs),
        b"age", max(now_s - q.ctime, 0),
        b"idle", max(now_s - q.atime, 0),
        b"blocked", q.blocked,
        b"import-from", list(q.responders or ()),
        b"import-rate", q.import_rate(now),
        b"jobs-in", q.jobs_in,
        b"jobs-out", q.jobs_out,
        b"pause", q.pause_state,
    ]


def qscan(server, session, argv):
    """QSCAN [cursor] [COUNT n] [BUSYLOOP] [MINLEN n] [MAXLEN n] [IMPORTRATE rate]"""
    node = server.node
    bounds: dict = {}
    count, busyloop, cursor = parse_scan_options(ArgReader(argv, 1), {
        name: (lambda raw, name=name: bounds.__setitem__(name, _filter_value(raw)))
        for name in (b"minlen", b"maxlen", b"importrate")})
    minlen, maxlen = bounds.get(b"minlen"), bounds.get(b"maxlen")
    importrate = bounds.get(b"importrate")
    now = node.clock.now_ms()

    def keep(q) -> bool:
        length = len(q.jobs)
        if minlen is not None and length < minlen:
            return False
        if maxlen is not None and length > maxlen:
            return False
        return importrate is None or q.import_rate(now) >= importrate

    unfiltered = minlen is None and maxlen is None and importrate is None
    cursor, found = node.queues.scan(cursor, count, None if unfiltered else keep, busyloop)
    return [b"%d" % cursor, [q.name for q in found]]


def _filter_value(raw: bytes) -> int | None:
    """A QSCAN filter bound; -1 means "not given", as in Disque."""
    value = int_or_error(raw)
    return None if value == -1 else value


def pause(server, session, argv):
    """PAUSE queue in|out|all|none|state|bcast ..."""
    new_flags, update, broadcast = 0, False, False
    for raw in argv[2:]:
        option = raw.lower()
        if option == b"none":
            new_flags, update = 0, True
        elif option in PAUSE_OPTIONS:
            new_flags |= PAUSE_OPTIONS[option]
            update = True
        elif option == b"bcast":
            broadcast = True
        elif option != b"state":
            raise CommandError(SYNTAX_ERROR)
    state = server.node.consumers.pause(argv[1], new_flags if update else None, broadcast)
    return Raw(b"+%b\r\n" % PAUSE_STATE_NAMES[state])
