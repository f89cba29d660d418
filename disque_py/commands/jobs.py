"""Job commands: ADDJOB, SHOW, DELJOB, JSCAN, and the job reply formats.

Parsing is done here, semantics in core/. Replies on the hot path (ADDJOB's
ID, GETJOB's jobs) are encoded directly to bytes; the rest use reply values.
"""

from __future__ import annotations

from disque_py.commands.args import (ArgReader, check_job_ids, job_ids, parse_int,
                                     parse_scan_options, parse_timeout)
from disque_py.commands.context import Park
from disque_py.core.job import DEFAULT_TTL_S, STATE_BY_NAME, STATE_NAMES, WAIT_REPL, Job
from disque_py.errors import CommandError
from disque_py.resp import Raw

REPLICATE_RANGE = "REPLICATE must be between 1 and 65535"
TTL_POSITIVE = "TTL must be a number > 0"
RETRY_NON_NEGATIVE = "RETRY time must be a non negative number"
DELAY_NON_NEGATIVE = "DELAY time must be a non negative number"
MAXLEN_POSITIVE = "MAXLEN must be a positive number"
INVALID_STATE = "Invalid job state name"
INVALID_REPLY_TYPE = "Invalid REPLY type, try ID or ALL"
MAX_REPLICATION = 65535


def addjob(server, session, argv):
    """ADDJOB queue job ms-timeout [REPLICATE n] [DELAY s] [RETRY s] [TTL s]
    [MAXLEN n] [ASYNC]"""
    if len(argv) == 4:
        repl = retry = None
        delay = maxlen = 0
        ttl = DEFAULT_TTL_S
        async_ = False
    else:
        repl, delay, retry, ttl, maxlen, async_ = _addjob_options(ArgReader(argv, 4))
    timeout = parse_timeout(argv[3])
    job = server.node.add_job(argv[1], argv[2], repl, delay, retry, ttl, maxlen, async_,
                              session, timeout)
    if job.state == WAIT_REPL:
        return Park(server.node.more(job).waiter, True)
    return Raw(b"+%b\r\n" % job.id)


def _addjob_options(args: ArgReader):
    repl = retry = None
    delay = maxlen = 0
    ttl = DEFAULT_TTL_S
    async_ = False
    while args:
        option = args.option()
        if option == b"replicate" and args.has_value:
            repl = parse_int(args.raw())
            if repl is None or not 0 < repl <= MAX_REPLICATION:
                raise CommandError(REPLICATE_RANGE)
        elif option == b"ttl" and args.has_value:
            ttl = parse_int(args.raw())
            if ttl is None or ttl <= 0:
                raise CommandError(TTL_POSITIVE)
        elif option == b"retry" and args.has_value:
            retry = parse_int(args.raw())
            if retry is None or retry < 0:
                raise CommandError(RETRY_NON_NEGATIVE)
        elif option == b"delay" and args.has_value:
            delay = parse_int(args.raw())
            if delay is None or delay < 0:
                raise CommandError(DELAY_NON_NEGATIVE)
        elif option == b"maxlen" and args.has_value:
            maxlen = parse_int(args.raw())
            if maxlen is None or maxlen <= 0:
                raise CommandError(MAXLEN_POSITIVE)
        elif option == b"async":
            async_ = True
        else:
            raise args.syntax_error()
    return repl, delay, retry, ttl, maxlen, async_


def loadjob(server, session, argv):
    """LOADJOB serialized-job crc (only while loading the AOF)"""
    if server.persistence is None:
        raise CommandError("LOADJOB is a special command only processed from AOF")
    return server.persistence.load_job(session, argv)


def show(server, session, argv):
    """SHOW job-id"""
    node = server.node
    check_job_ids(argv[1:], node.lookup)
    job = node.lookup(argv[1])
    if job is None:
        return None
    return job_info(node, job, node.clock.now_ms())


def job_info(node, job: Job, now_ms: int) -> list:
    """Every field of a job, in Disque's order (SHOW, JSCAN REPLY ALL)."""
    extra = node.extra_of(job)
    confirmed = sorted(extra.confirmed) if extra is not None and extra.confirmed else []
    requeue = None if job.qtime == 0 else max(job.qtime - now_ms, 0)
    due = job.awake_due
    awake = None if due is None else max(due - now_ms, 0)
    return [
        b"id", job.id,
        b"queue", job.queue,
        b"state", STATE_NAMES[job.state],
        b"repl", job.repl,
        b"ttl", max(job.etime - now_ms // 1000, 0),
        b"ctime", job.ctime,
        b"delay", job.delay,
        b"retry", job.retry,
        b"nacks", job.nacks,
        b"additional-deliveries", job.deliveries,
        b"nodes-delivered", list(job.delivered),
        b"nodes-confirmed", confirmed,
        b"next-requeue-within", requeue,
        b"next-awake-within", awake,
        b"body", job.body,
    ]


def deljob(server, session, argv):
    """DELJOB job-id ... job-id"""
    return server.node.delete_jobs(job_ids(server, argv))


def jscan(server, session, argv):
    """JSCAN [cursor] [COUNT n] [BUSYLOOP] [QUEUE q] [STATE s ...] [REPLY all|id]"""
    node = server.node
    wanted: dict = {"queue": None, "states": set(), "all": False}

    def state(raw: bytes) -> None:
        number = STATE_BY_NAME.get(raw.lower())
        if number is None:
            raise CommandError(INVALID_STATE)
        wanted["states"].add(number)

    def reply(raw: bytes) -> None:
        kind = raw.lower()
        if kind not in (b"id", b"all"):
            raise CommandError(INVALID_REPLY_TYPE)
        wanted["all"] = kind == b"all"

    count, busyloop, cursor = parse_scan_options(ArgReader(argv, 1), {
        b"queue": lambda raw: wanted.__setitem__("queue", raw),
        b"state": state,
        b"reply": reply,
    })
    queue, states = wanted["queue"], wanted["states"]

    def keep(job: Job) -> bool:
        if not job.delivered:           # a dummy ack is not a job to show
            return False
        if queue is not None and job.queue != queue:
            return False
        return not states or job.state in states

    cursor, found = node.jobs.scan(cursor, count, keep, busyloop)
    if wanted["all"]:
        now = node.clock.now_ms()
        items = [job_info(node, job, now) for job in found]
    else:
        items = [Raw(b"+%b\r\n" % job.id) for job in found]   # IDs are status replies
    return [b"%d" % cursor, items]


def render_jobs(jobs: list[Job], withcounters: bool) -> Raw:
    """GETJOB's reply: [[queue, id, body(, counters)] ...], encoded at once."""
    parts = [b"*%d\r\n" % len(jobs)]
    append = parts.append
    if withcounters:
        for job in jobs:
            queue, body = job.queue, job.body
            append(b"*7\r\n$%d\r\n%b\r\n$40\r\n%b\r\n$%d\r\n%b\r\n"
                   b"$5\r\nnacks\r\n:%d\r\n$21\r\nadditional-deliveries\r\n:%d\r\n"
                   % (len(queue), queue, job.id, len(body), body, job.nacks, job.deliveries))
    else:
        for job in jobs:
            queue, body = job.queue, job.body
            append(b"*3\r\n$%d\r\n%b\r\n$40\r\n%b\r\n$%d\r\n%b\r\n"
                   % (len(queue), queue, job.id, len(body), body))
    return Raw(b"".join(parts))

