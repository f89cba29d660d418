"""The job's Python side: its constants, extra state, wire format and the
rules about IDs that need no job.

The job record itself (engine/job.pxi: C fields, not tracked by the
cyclic GC), the job table, the awake schedule and ID generation live in the
compiled engine; this module names the engine's constants for Python and
re-exports its types, so the rest of the core imports them from here.

Job IDs are 40 bytes: b"D-" + 8 hex of the creating node's ID + "-" + 24
base64 characters of pseudo-random bits + "-" + the TTL in minutes as 4 hex
digits, even for at-most-once jobs (retry 0) and odd otherwise, so any node
can tell the delivery guarantee and expire time of an ID it has never seen.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from disque_py.engine import (CONSTANTS, STATE_NAMES, IdGenerator, Job, is_at_most_once_id,
                              is_valid_id, new_job)

WAIT_REPL = CONSTANTS["WAIT_REPL"]
ACTIVE = CONSTANTS["ACTIVE"]
QUEUED = CONSTANTS["QUEUED"]
ACKED = CONSTANTS["ACKED"]
STATE_BY_NAME = {name: number for number, name in enumerate(STATE_NAMES)}

# Flags (a small int per job).
FLAG_BCAST_QUEUED = CONSTANTS["FLAG_BCAST_QUEUED"]        # tell others when queued again
FLAG_BCAST_WILLQUEUE = CONSTANTS["FLAG_BCAST_WILLQUEUE"]  # tell others before re-queueing
FLAG_DELIVERED = CONSTANTS["FLAG_DELIVERED"]              # handed to a consumer here

JOB_ID_LEN = CONSTANTS["JOB_ID_LEN"]
NODE_ID_LEN = CONSTANTS["NODE_ID_LEN"]
WILLQUEUE_ADVANCE_MS = CONSTANTS["WILLQUEUE_ADVANCE_MS"]
TIME_ERROR_MS = CONSTANTS["TIME_ERROR_MS"]
DEFAULT_TTL_S = CONSTANTS["DEFAULT_TTL_S"]
DEFAULT_RETRY_MAX_S = CONSTANTS["DEFAULT_RETRY_MAX_S"]
GC_RETRY_COUNT_MAX = CONSTANTS["GC_RETRY_COUNT_MAX"]
JOB_MEMORY_OVERHEAD = CONSTANTS["JOB_MEMORY_OVERHEAD"]     # the memory estimate, per job
QUEUE_MEMORY_OVERHEAD = CONSTANTS["QUEUE_MEMORY_OVERHEAD"]  # ... and per queue

__all__ = ["Job", "IdGenerator", "is_at_most_once_id", "is_valid_id", "new_job"]


class JobExtra:
    """Per-job state that only jobs being replicated or collected need,
    kept by the node beside the job (Node.more), not in it."""

    __slots__ = ("confirmed", "waiter", "repl_added_at")

    def __init__(self) -> None:
        # Nodes that confirmed: their copy (wait-repl) or the ack (acked).
        self.confirmed: set[bytes] | None = None
        self.waiter = None           # the producer parked until copies are made
        self.repl_added_at = 0       # when the last node was asked for a copy


def ttl_minutes_from_id(job_id: bytes) -> int:
    return int(job_id[36:40], 16)


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
    return _pack(job.id, job.state, flags, job.repl, job.ctime, etime, job.delay, job.retry,
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
