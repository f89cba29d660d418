"""Reading an AOF written by Disque 1.0-rc1, so a Disque node can be
restarted as disque-py on the same directory.

That is Disque's own upgrade path (its README, "controlled restarts"):
CONFIG SET aof-enqueue-jobs-once yes, CONFIG REWRITE, SHUTDOWN REWRITE-AOF,
then start the new software on the same files. nodes.conf already has the
same layout in both, so the node keeps its ID; this module reads the AOF.

Disque's file has no header. Its records are `LOADJOB <job>` and
`DELJOB <job-id>`, each an array of two bulk strings. A job is Disque's
storage serialization, little endian whatever the host:

    u32 length of what follows
    40 bytes ID, u8 state (low 4 bits; the high 4 are a GC retry counter
    that is reset on load), u8 flags, u16 repl, u32 absolute expire time
    (seconds), u64 ctime, u32 delay, u32 retry, u16 nacks,
    u16 additional deliveries
    u32 queue name length + name, u32 body length + body,
    u32 count + count 40-byte IDs of the nodes that may have a copy

States and flags are numbered as in the engine (engine/model/job.pxd). Acknowledged jobs are
never written by Disque (an ack is a DELJOB), so a body is always there.
"""

from __future__ import annotations

import struct

from disque_py.engine import ACKED, NODE_ID_LEN, JobRecord, is_valid_id

LOADJOB = b"LOADJOB"
DELJOB = b"DELJOB"
_FIXED = struct.Struct("<I40sBBHIQIIHH")
_U32 = struct.Struct("<I")
_STATE_BITS = 0x0F


def is_disque_record(argv: list[bytes]) -> bool:
    """Whether a file's first record is one Disque writes (it has no header)."""
    return len(argv) == 2 and argv[0].upper() in (LOADJOB, DELJOB)


def parse_job(data: bytes) -> JobRecord:
    """A job from Disque's storage serialization; ValueError if malformed."""
    try:
        (length, job_id, state, flags, repl, etime, ctime, delay, retry, nacks,
         deliveries) = _FIXED.unpack_from(data, 0)
        pos = _FIXED.size
        queue, pos = _sized(data, pos)
        body, pos = _sized(data, pos)
        (count,) = _U32.unpack_from(data, pos)
        pos += 4
    except struct.error as error:
        raise ValueError(f"truncated Disque job: {error}") from None
    end = pos + count * NODE_ID_LEN
    if end != len(data) or length != len(data) - 4:
        raise ValueError("Disque job length does not match its fields")
    state &= _STATE_BITS
    if not is_valid_id(job_id) or state > ACKED:
        raise ValueError("bad job ID or state in a Disque job")
    delivered = tuple(data[at:at + NODE_ID_LEN] for at in range(pos, end, NODE_ID_LEN))
    return JobRecord(job_id, state, flags, repl, ctime, etime, delay, retry,
                     nacks, deliveries, queue, body, delivered)


def _sized(data: bytes, pos: int) -> tuple[bytes, int]:
    (size,) = _U32.unpack_from(data, pos)
    start = pos + 4
    if start + size > len(data):
        raise ValueError("Disque job shorter than its fields")
    return data[start:start + size], start + size
