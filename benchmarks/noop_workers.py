"""The workers bench_client.py runs with `disque-py worker`: one handler on
the queue `bench`, doing nothing, as an async function (run on the event
loop) or a plain one (run in the worker's thread pool).

    cd benchmarks && disque-py worker noop_workers:async_worker --url disque://... \\
        --concurrency 50

The URL and concurrency given here are replaced by the command line's.

With BENCH_CLIENT_GATE=1 in its environment, importing this module prints
"ready" and waits for a line on stdin: the benchmark starts its clock when
it writes that line, the worker process having imported everything by
then (its first GETJOB follows at once).
"""

import os
import sys

from disque_py.client import Job
from disque_py.client.worker import Worker

QUEUE = "bench"
CONCURRENCY = 50
GATE = "BENCH_CLIENT_GATE"

async_worker = Worker(concurrency=CONCURRENCY)
sync_worker = Worker(concurrency=CONCURRENCY)


@async_worker.handler(QUEUE)
async def async_noop(job: Job) -> None:
    """Nothing: what remains is the worker's own cost per job."""


@sync_worker.handler(QUEUE)
def sync_noop(job: Job) -> None:
    """Nothing, in a thread of the pool."""


if os.environ.get(GATE):
    print("ready", flush=True)
    sys.stdin.readline()
