"""The job: Disque's unit of work, its states, and its ID.

A job is a message in a named queue, plus the bookkeeping that lets a
cluster deliver it at least once (or at most once) while approximating a
single delivery:

  * state: wait-repl (waiting for synchronous replication), active (known
    here, not queued), queued (in a local queue, deliverable), acked
    (delivered and confirmed; kept only until garbage collection);
  * times: ctime (creation, ms * 1e6 plus a same-millisecond counter, the
    queue order), etime (absolute expire time, seconds), qtime (next time
    this node re-queues it, ms; 0 means never again, as for at-most-once
    jobs once queued), and the awake bucket it sits in;
  * spec: the tuple (repl, delay, retry) the producer asked for. Specs are
    interned, so the thousands of jobs created with the same options share
    one tuple instead of paying three slots each;
  * delivered: the nodes that may have a copy (a tuple of node IDs). A job
    with no such node is a "dummy ack": an ACKJOB for an ID we never had;
  * extra: counters and GC state most jobs never need, made on demand.

Memory is the product here (a node holds millions of these), so the class
has twelve slots and no per-job containers unless a job needs them.

Job IDs are 40 bytes: b"D-" + 8 hex of the creating node's ID + "-" + 24
base64 characters of pseudo-random bits + "-" + the TTL in minutes as 4 hex
digits, even for at-most-once jobs (retry 0) and odd otherwise, so any node
can tell the delivery guarantee and expire time of an ID it has never seen.
"""

from __future__ import annotations

import binascii
import hashlib
import re
import struct
from typing import NamedTuple

WAIT_REPL, ACTIVE, QUEUED, ACKED = 0, 1, 2, 3
STATE_NAMES = (b"wait-repl", b"active", b"queued", b"acked")
STATE_BY_NAME = {name: number for number, name in enumerate(STATE_NAMES)}

# Flags (a small int per job).
FLAG_BCAST_QUEUED = 1      # tell other nodes when this job is queued again
FLAG_BCAST_WILLQUEUE = 2   # tell other nodes shortly before re-queueing
FLAG_DELIVERED = 4         # this node handed the job to a consumer at least once

# Indexes into Job.spec.
REPL, DELAY, RETRY = 0, 1, 2

JOB_ID_LEN = 40
NODE_ID_LEN = 40
WILLQUEUE_ADVANCE_MS = 500
TIME_ERROR_MS = 500          # retry desynchronisation between nodes
DEFAULT_TTL_S = 24 * 3600
DEFAULT_RETRY_MAX_S = 5 * 60
TTL_MINUTES_MAX = 0xFFFF
RANDOM_ID_BYTES = 18        # 144 bits ...
RANDOM_ID_CHARS = 24        # ... in base64
IDS_PER_REFILL = 256
GC_RETRY_MIN_PERIOD_MS = 1000            # first GC retry after 1 s ...
GC_RETRY_MAX_PERIOD_MS = 3 * 60 * 1000   # ... doubling up to 3 minutes
GC_RETRY_COUNT_MAX = 10

_ID_RE = re.compile(rb"D-[0-9a-fA-F]{8}-[A-Za-z0-9+/]{24}-[0-9a-fA-F]{4}\Z")


class JobExtra:
    """Per-job state that only some jobs need."""

    __slots__ = ("nacks", "deliveries", "confirmed", "gc_retry", "waiter", "repl_added_at")

    def __init__(self) -> None:
        self.nacks = 0
        self.deliveries = 0
        # Nodes that confirmed: their copy (wait-repl) or the ack (acked).
        self.confirmed: set[bytes] | None = None
        self.gc_retry = 0
        self.waiter = None           # the producer parked until copies are made
        self.repl_added_at = 0       # when the last node was asked for a copy


class Job:
    __slots__ = ("id", "queue", "body", "state", "flags", "spec", "ctime",
                 "etime", "qtime", "awake", "delivered", "extra")

    def __init__(self, job_id: bytes, queue: bytes, body: bytes | None,
                 state: int, spec: tuple, ctime: int, etime: int,
                 delivered: tuple) -> None:
        self.id = job_id
        self.queue = queue
        self.body = body
        self.state = state
        self.flags = 0
        self.spec = spec
        self.ctime = ctime
        self.etime = etime
        self.qtime = 0
        self.awake = None
        self.delivered = delivered
        self.extra: JobExtra | None = None

    @property
    def repl(self) -> int:
        return self.spec[REPL]

    @property
    def delay(self) -> int:
        return self.spec[DELAY]

    @property
    def retry(self) -> int:
        return self.spec[RETRY]

    @property
    def nacks(self) -> int:
        return self.extra.nacks if self.extra else 0

    @property
    def deliveries(self) -> int:
        return self.extra.deliveries if self.extra else 0

    @property
    def confirmed(self) -> set[bytes] | None:
        return self.extra.confirmed if self.extra else None

    def more(self) -> JobExtra:
        """The job's extra state, created on first use."""
        extra = self.extra
        if extra is None:
            extra = self.extra = JobExtra()
        return extra

    def is_dummy_ack(self) -> bool:
        return not self.delivered

    def __repr__(self) -> str:
        return f"<Job {self.id.decode()} {STATE_NAMES[self.state].decode()} q={self.queue!r}>"


_specs: dict[tuple, tuple] = {}


def intern_spec(repl: int, delay: int, retry: int) -> tuple:
    """One shared (repl, delay, retry) tuple per distinct combination."""
    key = (repl, delay, retry)
    spec = _specs.get(key)
    if spec is None:
        if len(_specs) > 4096:  # unbounded variety: stop sharing, stay bounded
            _specs.clear()
        spec = _specs[key] = key
    return spec


def is_valid_id(job_id: bytes) -> bool:
    """A well-formed job ID (any node's)."""
    return len(job_id) == JOB_ID_LEN and _ID_RE.match(job_id) is not None


def ttl_minutes_from_id(job_id: bytes) -> int:
    return int(job_id[36:40], 16)


def is_at_most_once_id(job_id: bytes) -> bool:
    """IDs of retry-0 jobs carry an even TTL field."""
    return ttl_minutes_from_id(job_id) & 1 == 0


class IdGenerator:
    """Makes job IDs for one node: a hash, in counter mode, of a start-up seed.

    Each refill hashes (seed || counter) with SHAKE-256, an extendable-output
    hash, into the 144 random bits of IDS_PER_REFILL IDs at once, encodes
    them in one base64 call (18 bytes are exactly 24 characters, so IDs never
    straddle a padding boundary) and keeps them ready with the node prefix
    in front. Making an ID is then a list pop and one concatenation with the
    cached TTL suffix: this runs once per ADDJOB.
    """

    __slots__ = ("_prefix", "_seed", "_counter", "_suffixes", "_spare")

    def __init__(self, node_id: bytes, seed: bytes) -> None:
        self._prefix = b"D-" + node_id[:8] + b"-"
        self._seed = seed
        self._counter = 0
        self._suffixes: dict[int, bytes] = {}   # ttl_s * 2 + at-least-once -> suffix
        self._spare: list[bytes] = []           # prefix + random part, next one last

    def next_id(self, ttl_s: int, retry_s: int) -> bytes:
        spare = self._spare
        if not spare:
            spare = self._refill()
        suffix = self._suffixes.get(ttl_s * 2 + (retry_s > 0))
        if suffix is None:
            suffix = self._ttl_suffix(ttl_s, retry_s)
        return spare.pop() + suffix

    def _refill(self) -> list[bytes]:
        self._counter += 1
        random_bytes = hashlib.shake_256(
            self._seed + self._counter.to_bytes(8, "little")).digest(
                RANDOM_ID_BYTES * IDS_PER_REFILL)
        encoded = binascii.b2a_base64(random_bytes, newline=False)
        prefix = self._prefix
        spare = self._spare = [prefix + encoded[at:at + RANDOM_ID_CHARS] for at in
                               range(len(encoded) - RANDOM_ID_CHARS, -1, -RANDOM_ID_CHARS)]
        return spare

    def _ttl_suffix(self, ttl_s: int, retry_s: int) -> bytes:
        if len(self._suffixes) > 1024:
            self._suffixes.clear()
        minutes = min(ttl_s // 60, TTL_MINUTES_MAX)
        minutes = minutes | 1 if retry_s > 0 else minutes & ~1
        suffix = self._suffixes[ttl_s * 2 + (retry_s > 0)] = b"-%04x" % minutes
        return suffix


# ------------------------------------------------------------ serialization
#
# A job on the wire (REPLJOB, YOURJOBS) and on disk (the AOF) is:
#   40 bytes ID, u8 state, u8 flags, u16 repl, u64 ctime, i64 expire time,
#   u32 delay, u32 retry, u16 nacks, u16 additional deliveries,
#   u32 queue name length + name, u32 body length + body (NO_BODY for an
#   ack without body), u16 node count + 40-byte node IDs that may have it.
# For messages the expire time is the TTL left (seconds, at least 1), so
# nodes need not agree on the clock; on disk it is absolute.

_FIXED = struct.Struct(">40sBBHQqIIHHI")
_U32 = struct.Struct(">I")
_U16 = struct.Struct(">H")
NO_BODY = 0xFFFFFFFF
COUNTER_MAX = 0xFFFF


class JobRecord(NamedTuple):
    id: bytes
    state: int
    flags: int
    repl: int
    ctime: int
    etime: int
    delay: int
    retry: int
    nacks: int
    deliveries: int
    queue: bytes
    body: bytes | None
    delivered: tuple


def serialize_job(job: Job, now_s: int | None = None) -> bytes:
    """The job's bytes; with `now_s`, for a message (relative expire time)."""
    flags = job.flags
    etime = job.etime
    if now_s is not None:
        etime = max(etime - now_s + 1, 1)
        flags &= ~FLAG_DELIVERED          # a local fact, not the receiver's
    repl, delay, retry = job.spec
    return _pack(job.id, job.state, flags, repl, job.ctime, etime, delay, retry,
                 job.nacks, job.deliveries, job.queue or b"", job.body, job.delivered)


def serialize_record(record: JobRecord) -> bytes:
    """A parsed job's bytes again (absolute expire time: for the AOF)."""
    return _pack(*record)


def _pack(job_id, state, flags, repl, ctime, etime, delay, retry, nacks, deliveries,
          queue, body, delivered) -> bytes:
    return b"".join((
        _FIXED.pack(job_id, state, flags, repl, ctime, etime, delay, retry,
                    min(nacks, COUNTER_MAX), min(deliveries, COUNTER_MAX), len(queue)),
        queue,
        _U32.pack(NO_BODY if body is None else len(body)),
        body or b"",
        _U16.pack(len(delivered)),
        *delivered,
    ))


# Every copy of a replicated job is decoded here, so: records are built with
# tuple.__new__ (NamedTuple's generated __new__ costs a Python call), and
# the holders' IDs are read by one precompiled struct for the usual counts.
_new_tuple = tuple.__new__
_NODE_IDS = [struct.Struct("40s" * count) for count in range(8)]


def deserialize_job(data: bytes, now_s: int | None = None) -> JobRecord:
    """Parse serialize_job's bytes; with `now_s`, a message's relative time
    becomes absolute. ValueError on anything malformed."""
    try:
        fields = _FIXED.unpack_from(data, 0)
        pos = _FIXED.size
        queue_len = fields[10]
        queue = data[pos:pos + queue_len]
        pos += queue_len
        (body_len,) = _U32.unpack_from(data, pos)
        pos += 4
        body = None
        if body_len != NO_BODY:
            body = data[pos:pos + body_len]
            pos += body_len
        (count,) = _U16.unpack_from(data, pos)
        pos += 2
        layout = _NODE_IDS[count] if count < 8 else struct.Struct("40s" * count)
        delivered = layout.unpack_from(data, pos)
        pos += 40 * count
    except struct.error as error:
        raise ValueError(f"truncated job: {error}") from None
    if pos != len(data) or len(queue) != queue_len or (body is not None and len(body) != body_len):
        raise ValueError("job length does not match its fields")
    job_id, state, flags, repl, ctime, etime, delay, retry, nacks, deliveries, _ = fields
    if not is_valid_id(job_id) or state > ACKED:
        raise ValueError("bad job ID or state")
    if now_s is not None:
        etime += now_s
    return _new_tuple(JobRecord, (job_id, state, flags, repl, ctime, etime, delay, retry,
                                  nacks, deliveries, queue, body, delivered))


def deserialize_jobs(blobs, now_s: int):
    """The jobs of a message (REPLJOB, YOURJOBS), parsed in order; stops at
    the first malformed one, whose frame is not trusted any further."""
    for data in blobs:
        try:
            yield deserialize_job(data, now_s)
        except ValueError:
            return


def compare_node_ids_by_job(node_a: bytes, node_b: bytes, job_id: bytes) -> int:
    """Which of two nodes wins a re-queue race for this job (>0: node_a).

    Node IDs are mixed with the job's random part first, so the same node
    does not always win: the comparison depends on the job."""
    mix = job_id[11:35]
    a = bytes(x ^ mix[i % 24] for i, x in enumerate(node_a))
    b = bytes(x ^ mix[i % 24] for i, x in enumerate(node_b))
    return (a > b) - (a < b)
