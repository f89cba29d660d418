"""Files as Disque 1.0-rc1 writes them, for the tests of moving a Disque
node to disque-py: its AOF records and its nodes.conf line.

Written here from Disque's layout (src/job.c, storage serialization), not
with disque_py's code. tests/unit/test_disque_aof.py checks this encoder
against files the real Disque 1.0-rc1 wrote (tests/persistence/data/), so
the migration tests can make files with fresh expire times.
"""

from __future__ import annotations

import base64
import os
import struct
from dataclasses import dataclass, field

FIXED = struct.Struct("<40sBBHIQIIHH")     # the first 68 bytes of Disque's struct job
QUEUED, ACTIVE = 2, 1
FLAG_BCAST_QUEUED, FLAG_BCAST_WILLQUEUE = 1, 2


@dataclass
class DisqueJob:
    id: bytes
    queue: bytes
    body: bytes
    etime: int                      # absolute, unix seconds
    ctime: int                      # ms * 1,000,000
    state: int = QUEUED
    flags: int = FLAG_BCAST_QUEUED | FLAG_BCAST_WILLQUEUE
    repl: int = 1
    delay: int = 0
    retry: int = 300
    nacks: int = 0
    deliveries: int = 0
    gc_retry: int = 0               # the high 4 bits of the state byte
    holders: list[bytes] = field(default_factory=list)


def new_job_id(node_id: str, ttl_s: int, retry_s: int) -> bytes:
    minutes = ttl_s // 60
    minutes = minutes | 1 if retry_s else minutes & ~1
    random_part = base64.b64encode(os.urandom(18))
    return b"D-%s-%s-%04x" % (node_id[:8].encode(), random_part, minutes)


def serialize(job: DisqueJob) -> bytes:
    fixed = FIXED.pack(job.id, job.state | job.gc_retry << 4, job.flags, job.repl,
                       job.etime, job.ctime, job.delay, job.retry, job.nacks,
                       job.deliveries)
    rest = b"".join((struct.pack("<I", len(job.queue)), job.queue,
                     struct.pack("<I", len(job.body)), job.body,
                     struct.pack("<I", len(job.holders)), *job.holders))
    return struct.pack("<I", len(fixed) + len(rest)) + fixed + rest


def loadjob_record(job: DisqueJob) -> bytes:
    return resp_array(b"LOADJOB", serialize(job))


def deljob_record(job_id: bytes) -> bytes:
    return resp_array(b"DELJOB", job_id)


def resp_array(*args: bytes) -> bytes:
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


def nodes_conf_line(node_id: str) -> str:
    """The line a lone Disque node writes about itself."""
    return f"{node_id} :0 myself 0 0 connected\n"


def cluster_nodes_conf(myself: tuple[str, int], peers: list[tuple[str, int]]) -> str:
    """nodes.conf of a Disque node that met `peers` ((node ID, port) each)."""
    lines = [f"{myself[0]} 127.0.0.1:{myself[1]} myself 0 0 connected\n"]
    lines += [f"{node_id} 127.0.0.1:{port} noflags 0 1795293117481 connected\n"
              for node_id, port in peers]
    return "".join(lines)
