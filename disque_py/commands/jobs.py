"""Job commands: ADDJOB, SHOW, DELJOB, JSCAN, and SHOW's reply format.

ADDJOB is compiled (engine/net/hot.pxi parses, runs and answers it); the others
are parsed here, with their semantics in the node layer and the engine.
"""

from __future__ import annotations

from disque_py.commands.args import ArgReader, check_job_ids, job_ids, parse_scan_options
from disque_py.commands.context import compiled
from disque_py.engine import STATE_BY_NAME, STATE_NAMES, Job, JobOptions
from disque_py.base.errors import CommandError
from disque_py.formats.resp import Raw
from disque_py.base.replies import INVALID_REPLY_TYPE, INVALID_STATE, LOADJOB_ONLY_FROM_AOF


# ADDJOB queue job ms-timeout [REPLICATE n] [DELAY s] [RETRY s] [TTL s] [MAXLEN n] [ASYNC]
#        [BACKOFF base-ms max-ms] [MAXDELIVERIES n [DEADLETTER queue]] [PRIORITY n]
#        [DEDUP key [WINDOW seconds]]
addjob = compiled("addjob")


def loadjob(server, session, argv):
    """LOADJOB serialized-job crc (only while loading the AOF)"""
    if server.persistence is None:
        raise CommandError(LOADJOB_ONLY_FROM_AOF)
    return server.persistence.load_job(session, argv)


def show(server, session, argv):
    """SHOW job-id"""
    node = server.node
    check_job_ids(argv[1:])
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
    ] + _options_info(node.options_of(job), job.dedup)


def _options_info(options, dedup) -> list:
    """Fields beyond Disque's, after them, for a job that has options or a
    DEDUP key (dedup: (queue, key, window end ms), or None)."""
    if options is None and dedup is None:
        return []
    if options is None:
        options = JobOptions()
    return [
        b"backoff", [options.backoff_base_ms, options.backoff_max_ms]
        if options.backoff_base_ms else None,
        b"max-deliveries", options.max_deliveries or None,
        b"deadletter", options.deadletter,
        b"dead-reason", options.dead_reason_name,
        b"dead-from", options.origin,
        b"priority", options.priority,
        b"dedup-key", dedup[1] if dedup else None,
        b"dedup-until", dedup[2] if dedup else None,
    ]


def deljob(server, session, argv):
    """DELJOB job-id ... job-id"""
    return server.node.delete_jobs(job_ids(argv))


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


