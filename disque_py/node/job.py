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

from typing import NamedTuple

from disque_py.engine import (CONSTANTS, DEAD_REASON_NAMES, STATE_NAMES, IdGenerator, Job,
                              JobOptions, is_at_most_once_id, is_valid_id, new_job, pack_job,
                              serialize_job, unpack_job)

WAIT_REPL = CONSTANTS["WAIT_REPL"]
ACTIVE = CONSTANTS["ACTIVE"]
QUEUED = CONSTANTS["QUEUED"]
ACKED = CONSTANTS["ACKED"]
STATE_BY_NAME = {name: number for number, name in enumerate(STATE_NAMES)}

# Flags (a small int per job).
FLAG_BCAST_QUEUED = CONSTANTS["FLAG_BCAST_QUEUED"]        # tell others when queued again
FLAG_BCAST_WILLQUEUE = CONSTANTS["FLAG_BCAST_WILLQUEUE"]  # tell others before re-queueing
FLAG_DELIVERED = CONSTANTS["FLAG_DELIVERED"]              # handed to a consumer here
FLAG_COUNTED = CONSTANTS["FLAG_COUNTED"]                  # its next re-queue is counted
FLAG_BACKED_OFF = CONSTANTS["FLAG_BACKED_OFF"]            # BACKOFF pushed its retry back
FLAG_PROMISED = CONSTANTS["FLAG_PROMISED"]                # its ID answered a duplicate ADDJOB
FLAG_CONFIRMED = CONSTANTS["FLAG_CONFIRMED"]              # seen at its REPLICATE level here
DEAD_NONE = CONSTANTS["DEAD_NONE"]

JOB_ID_LEN = CONSTANTS["JOB_ID_LEN"]
NODE_ID_LEN = CONSTANTS["NODE_ID_LEN"]
WILLQUEUE_ADVANCE_MS = CONSTANTS["WILLQUEUE_ADVANCE_MS"]
TIME_ERROR_MS = CONSTANTS["TIME_ERROR_MS"]
DEFAULT_TTL_S = CONSTANTS["DEFAULT_TTL_S"]
DEFAULT_RETRY_MAX_S = CONSTANTS["DEFAULT_RETRY_MAX_S"]
GC_RETRY_COUNT_MAX = CONSTANTS["GC_RETRY_COUNT_MAX"]
JOB_MEMORY_OVERHEAD = CONSTANTS["JOB_MEMORY_OVERHEAD"]     # the memory estimate, per job
QUEUE_MEMORY_OVERHEAD = CONSTANTS["QUEUE_MEMORY_OVERHEAD"]  # ... and per queue
# Why a job still open left this node (NodeCore's hooks for core/waits.py).
GONE_ACKED = CONSTANTS["GONE_ACKED"]
GONE_DELETED = CONSTANTS["GONE_DELETED"]
GONE_EXPIRED = CONSTANTS["GONE_EXPIRED"]
GONE_MOVED = CONSTANTS["GONE_MOVED"]      # an at-most-once job handed to another node

__all__ = ["DEAD_REASON_NAMES", "Job", "JobOptions", "IdGenerator", "is_at_most_once_id",
           "is_valid_id", "new_job", "serialize_job"]


class JobExtra:
    """Per-job state that only jobs being replicated or collected need,
    kept by the node beside the job (Node.more), not in it."""

    __slots__ = ("confirmed", "waiter", "repl_added_at", "followers")

    def __init__(self) -> None:
        # Nodes that confirmed: their copy (wait-repl) or the ack (acked).
        self.confirmed: set[bytes] | None = None
        self.waiter = None           # the producer parked until copies are made
        self.repl_added_at = 0       # when the last node was asked for a copy
        self.followers: list | None = None   # duplicate ADDJOBs (DEDUP) awaiting the same


def ttl_minutes_from_id(job_id: bytes) -> int:
    return int(job_id[36:40], 16)


# ------------------------------------------------------------ serialization
#
# A job's bytes on the bus (REPLJOB, YOURJOBS) and in the AOF: the layout
# and its one packer and parser are the engine's (engine/wire.pxi). A
# JobRecord is a parsed job for the Python paths that want its fields.


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
    options: tuple | None = None      # option_fields(): its options block, if it has one


# Where fields() puts the DEDUP pair (engine/options.pxi).
DEDUP_KEY_FIELD, DEDUP_UNTIL_FIELD, DEDUP_QUEUE_FIELD = 7, 8, 9


def serialize_record(record: JobRecord) -> bytes:
    """A parsed job's bytes again (absolute expire time: for the AOF)."""
    return pack_job(*record)


def deserialize_job(data: bytes, now_s: int | None = None) -> JobRecord:
    """Parse serialize_job's bytes; with `now_s`, a message's relative time
    becomes absolute. ValueError on anything malformed."""
    return _new_tuple(JobRecord, unpack_job(data, now_s))


_new_tuple = tuple.__new__


def deserialize_jobs(blobs, now_s: int):
    """The jobs of a message (YOURJOBS), parsed in order; stops at the first
    malformed one, whose frame is not trusted any further."""
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
