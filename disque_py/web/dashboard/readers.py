"""What the dashboard's pages show, read from the node at request time.

Every figure comes from the function the matching command uses: INFO's
section renderers, QSTAT's handler, SHOW's job_info, QPEEK's queue order
(the engine's JobQueue.peek, GETJOB's order), JSCAN's table scan, CLUSTER
NODES's link state, SLOWLOG's and LATENCY's stores. Nothing here changes
the node. Bytes from users (queue names, job bodies, slow log arguments)
are decoded for display only; the templates escape them.

Each read is bounded: a queue page lists PAGE_JOBS jobs at most
MAX_JOB_OFFSET deep, a body is shown up to BODY_SHOWN_BYTES. The jobs not
queued yet are looked for by walking the jobs table (no index keeps them
by queue) in small steps with the event loop turning between two: the
walk's cost grows with the jobs held, its stall does not.
"""

from __future__ import annotations

import asyncio

from disque_py.commands import info, queues
from disque_py.commands.cluster import link_state
from disque_py.commands.jobs import job_info
from disque_py.engine import ACTIVE, STATE_NAMES, is_valid_id
from disque_py.web.census import head_age, job_age

PAGE_JOBS = 50
MAX_JOB_OFFSET = 10_000
NOT_QUEUED_SHOWN = 20
SCAN_STEP_COUNT = 1                 # JSCAN COUNT of one step: at most 10 non-empty partitions
BODY_SHOWN_BYTES = 4096
BODY_PREVIEW_BYTES = 60
SLOWLOG_SHOWN = 50

# What a figure is, for the pages' `figure` filter (pages.py) to write it:
# a count (thousands separators), a size in bytes (binary units), or a
# value written as it is (versions, ports, yes/no).
COUNT, BYTES, AS_IS = "count", "bytes", "as-is"

# INFO fields the overview shows, by section, each with what it is.
NODE_FIELDS = {
    "server": (("disque_version", AS_IS), ("disque_py_version", AS_IS), ("tcp_port", AS_IS),
               ("uptime_in_seconds", COUNT)),
    "clients": (("connected_clients", COUNT), ("blocked_clients", COUNT)),
    "memory": (("used_memory", BYTES), ("used_memory_dataset", BYTES), ("maxmemory", BYTES)),
    "jobs": (("registered_jobs", COUNT),),
    "queues": (("registered_queues", COUNT),),
    "stats": (("total_commands_processed", COUNT), ("instantaneous_ops_per_sec", COUNT),
              ("total_jobs_created", COUNT), ("total_jobs_dead_lettered", COUNT)),
}
PERSISTENCE_FIELDS = (("loading", AS_IS), ("aof_enabled", AS_IS),
                      ("aof_last_write_status", AS_IS))
CLUSTER_FIELDS = (("cluster_known_nodes", COUNT), ("cluster_reachable_nodes", COUNT),
                  ("cluster_size", COUNT), ("cluster_leaving", AS_IS))
# Disque's cluster_reachable_nodes (CLUSTER INFO's; INFO's Cluster section
# repeats it) counts the other nodes only, where cluster_size counts this
# one too: a lone node showed "reachable 0" beside "size 1". CLUSTER INFO
# keeps Disque's name and figure; the overview names the figure for what
# it counts, as /metrics does (disque_cluster_reachable_peers).
SHOWN_AS = {"cluster_reachable_nodes": "cluster_reachable_peers"}


def text(raw) -> str:
    """User bytes as text for display (escaping is the template's job)."""
    if isinstance(raw, bytes):
        return raw.decode("utf-8", "backslashreplace")
    return str(raw)


def show_value(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, (list, tuple)):
        return ", ".join(show_value(item) for item in value) or "-"
    return text(value)


# ---------------------------------------------------------------- node

def node_fields(server) -> list[tuple[str, object, str]]:
    """The node's INFO fields the overview shows, in INFO's order: (label,
    value, what it is)."""
    shown = []

    def add(fields: dict, wanted) -> None:
        shown.extend((SHOWN_AS.get(name, name), fields[name], kind) for name, kind in wanted
                     if name in fields)

    for section, wanted in NODE_FIELDS.items():
        add(dict(info.SECTIONS[section][1](server)), wanted)
    add(dict(server.persistence_info()), PERSISTENCE_FIELDS)
    if server.cluster is not None:
        add(dict(server.cluster.info_fields()), CLUSTER_FIELDS)
    return shown


def cluster_nodes(server) -> list[dict]:
    """CLUSTER NODES's rows, this node first."""
    if server.cluster is None:
        return []
    membership = server.cluster.membership
    rows = []
    for node in membership.nodes.values():
        rows.append({"id": text(node.id), "address": f"{node.ip}:{node.port}",
                     "flags": node.flag_names, "link": link_state(node),
                     "myself": node is membership.myself,
                     "ping_sent": node.ping_sent, "pong_received": node.pong_received})
    rows.sort(key=lambda row: not row["myself"])
    return rows


# -------------------------------------------------------------- queues

def qstat(server, name: bytes) -> dict | None:
    """QSTAT's fields as a dict (None: no such queue)."""
    reply = queues.qstat(server, None, [b"qstat", name])
    if not isinstance(reply, list):
        return None
    return {text(key): value for key, value in zip(reply[::2], reply[1::2])}


def queue_row(server, name: bytes, dead_letters) -> dict | None:
    """A queue's QSTAT figures, its next job's age, and whether it is a
    dead-letter queue (deadletters.py's DeadLetterQueues says)."""
    stat = qstat(server, name)
    if stat is None:
        return None
    q = server.node.queues.get(name)
    return {"name": name, "label": text(name), "len": stat["len"], "blocked": stat["blocked"],
            "pause": text(stat["pause"]), "jobs_in": stat["jobs-in"],
            "jobs_out": stat["jobs-out"],
            "head_age": head_age(q, server.node.clock.now_ms()),
            "dead": dead_letters.is_dead_letter_queue(q)}


def queue_rows(server, names, dead_letters) -> list[dict]:
    """The rows of the queues named, in that order (queues gone are left out)."""
    rows = [queue_row(server, name, dead_letters) for name in names]
    return [row for row in rows if row is not None]


def queue_jobs(server, name: bytes, offset: int) -> tuple[list[dict], bool]:
    """A page of the queue's jobs in GETJOB order (QPEEK's), and whether
    more follow; offsets are clamped to 0..MAX_JOB_OFFSET."""
    q = server.node.queues.get(name)
    if q is None:
        return [], False
    offset = min(max(offset, 0), MAX_JOB_OFFSET)
    jobs = q.jobs.peek(offset + PAGE_JOBS + 1)[offset:]
    return [job_row(server, job) for job in jobs[:PAGE_JOBS]], len(jobs) > PAGE_JOBS


async def jobs_not_queued(server, name: bytes, cursor: int) -> tuple[list[dict], int]:
    """Active jobs of the queue held here and due to be queued later
    (DELAY, RETRY, NACK DELAY, BACKOFF): JSCAN's walk of the jobs table
    from `cursor`, in steps of at most SCAN_STEP_PARTITIONS non-empty
    partitions with the event loop turning between two, until
    NOT_QUEUED_SHOWN are found or the table ends. Returns them and the
    cursor to go on from (0: the walk is complete)."""
    node = server.node

    def keep(job) -> bool:
        return job.queue == name and job.state == ACTIVE and job.qtime != 0 and \
            bool(job.delivered)

    found = []
    while True:
        cursor, step = node.jobs.scan(cursor, SCAN_STEP_COUNT, keep, False)
        found.extend(step)
        if cursor == 0 or len(found) >= NOT_QUEUED_SHOWN:
            break
        await asyncio.sleep(0)
    now = node.clock.now_ms()
    rows = []
    for job in found:
        row = job_row(server, job)
        row["requeue_in_s"] = max(job.qtime - now, 0) / 1000
        rows.append(row)
    return rows, cursor


def job_row(server, job) -> dict:
    body = job.body
    preview = text(body[:BODY_PREVIEW_BYTES]) + ("..." if len(body) > BODY_PREVIEW_BYTES else "")
    return {"id": text(job.id), "state": text(STATE_NAMES[job.state]),
            "age": job_age(job, server.node.clock.now_ms()), "nacks": job.nacks,
            "deliveries": job.deliveries, "body": preview}


# ---------------------------------------------------------------- jobs

def job_fields(server, job_id: bytes) -> tuple[list[tuple[str, str]], bytes, str] | None:
    """SHOW's fields but the body, the job's queue, and the body shown
    (cut at BODY_SHOWN_BYTES); None for an unknown or malformed ID."""
    if not is_valid_id(job_id):
        return None
    node = server.node
    job = node.lookup(job_id)
    if job is None:
        return None
    reply = job_info(node, job, node.clock.now_ms())
    fields = [(text(reply[i]), show_value(reply[i + 1])) for i in range(0, len(reply), 2)
              if reply[i] != b"body"]
    body = job.body
    shown = text(body[:BODY_SHOWN_BYTES])
    if len(body) > BODY_SHOWN_BYTES:
        shown += f"\n... ({len(body) - BODY_SHOWN_BYTES} more bytes)"
    return fields, job.queue, shown


# --------------------------------------------------------- diagnostics

def latency_events(server) -> list[dict]:
    """LATENCY LATEST's rows, each with its HISTORY samples (ms, oldest
    first) and the seconds they cover."""
    monitor = server.latency
    events = []
    for raw_name, at, latest, highest in monitor.latest():
        name = raw_name.decode("latin-1")           # LATENCY's event names are str
        history = monitor.history(name)
        events.append({"name": name, "at": at, "latest": latest, "highest": highest,
                       "history": [ms for _, ms in history],
                       "span": history[-1][0] - history[0][0] if history else 0})
    return events


def slowlog_entries(server) -> list[dict]:
    """SLOWLOG GET's entries, newest first."""
    return [{"id": entry_id, "at": at, "us": duration,
             "argv": " ".join(text(arg) for arg in argv)}
            for entry_id, at, duration, argv in server.slowlog.newest(SLOWLOG_SHOWN)]
