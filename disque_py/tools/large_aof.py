"""Large AOFs, written directly: many jobs without running a server.

A file of a million jobs takes a server minutes of ADDJOBs to write; here
it takes seconds. The records come from the product's own record writer
(the engine's aof_record over its pack_job), so the file is what a server
would have written: a header, then one 'J' record per job, each with its
checksum. Jobs are queued, with a long TTL and a retry, spread over a
few queues, every body the same size. Used by the load-progress tests.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from disque_py.engine import AOF_JOB, QUEUED, IdGenerator, aof_record, pack_job
from disque_py.persistence import aof_format

NODE_ID = b"ab" * 20            # the creating node: any 40 hex digits
TTL_S = 24 * 3600
RETRY_S = 300
QUEUES = 16
RECORDS_PER_WRITE = 10_000


def write_large_aof(path: Path, jobs: int, body_size: int = 100) -> int:
    """Write an AOF of `jobs` queued jobs at `path`; returns its size in bytes."""
    ids = IdGenerator(NODE_ID, os.urandom(16))
    now_ms = int(time.time() * 1000)
    etime = now_ms // 1000 + TTL_S
    body = b"x" * body_size
    queues = [b"queue-%d" % n for n in range(QUEUES)]
    with open(path, "wb") as handle:
        handle.write(aof_format.HEADER)
        for first in range(0, jobs, RECORDS_PER_WRITE):
            batch = []
            for n in range(first, min(first + RECORDS_PER_WRITE, jobs)):
                job = pack_job(ids.next_id(TTL_S, RETRY_S), QUEUED, 0, 1,
                               now_ms * 1_000_000 + n, etime, 0, RETRY_S, 0, 0,
                               queues[n % QUEUES], body, ())
                batch.append(aof_record(AOF_JOB, job))
            handle.write(b"".join(batch))
    return path.stat().st_size
