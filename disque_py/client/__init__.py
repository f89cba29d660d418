"""disque_py.client: a Python client and worker for Disque and disque-py.

    from disque_py.client import Client, Worker

    client = Client("disque://127.0.0.1:7711")
    job_id = client.add("emails", b"to: tom", retry=60)

A layer of its own: it imports redis-py and the base layer's error
classes, never the compiled engine or the server, so an application that
only talks to a cluster loads neither (tests/unit/test_client_layer.py).

    commands.py    each command's words and reply parser (sans-IO)
    replies.py     replies made into answers; types.py: the answers
    routing.py     which node to talk to (HELLO, failover, producers)
    failover.py    what a failed call does next (the same rule for both clients)
    settings.py    URLs: addresses, TLS, AUTH, connection options
    base.py        what both clients share: making one, the blocking-read rule
    sync.py        Client and Pipeline; sync_api.py: their methods
    aio.py         AsyncClient and AsyncPipeline; async_api.py: theirs
    worker.py      Worker: handlers, batches, WORKING, clean stops
    worker_parts.py  what handlers raise, the stats, the stop and its grace
    dead_letter.py   a job to its dead-letter queue now, client-side
    batch.py       a pipeline's round trip (hiredis reads the replies)
    serializers.py bodies as bytes, JSON (orjson), or your own
    errors.py      Disque's error prefixes as exception classes
"""

from disque_py.client.aio import AsyncClient, AsyncPipeline
from disque_py.client.errors import (
    AckedError, BadIdError, CommandError, DisqueError, LeavingError, LoadingError,
    MaxlenError, MisconfError, NoAuthError, NoJobError, NoReplError, OOMError, PausedError,
    TooLateError,
)
from disque_py.client.routing import NoNodeError
from disque_py.client.serializers import JSON, RAW, Serializer
from disque_py.client.sync import Client, Pipeline
from disque_py.client.types import Hello, Job, JobInfo, Node, QueueStat, UnreadableBody
from disque_py.client.worker import Worker
from disque_py.client.worker_parts import DeadLetter, Retry, WorkerStats

__all__ = [
    "AckedError", "AsyncClient", "AsyncPipeline", "BadIdError", "Client", "CommandError",
    "DeadLetter", "DisqueError", "Hello", "JSON", "Job", "JobInfo", "LeavingError", "LoadingError",
    "MaxlenError", "MisconfError", "NoAuthError", "NoJobError", "NoNodeError", "NoReplError",
    "Node", "OOMError", "PausedError", "Pipeline", "QueueStat", "RAW", "Retry", "Serializer",
    "TooLateError", "UnreadableBody", "Worker", "WorkerStats",
]
