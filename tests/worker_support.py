"""The in-process Worker tests' tools (tests/integration/test_worker*.py):
a scenario on its own event loop, a worker serving beside a test's block,
waits with deadlines on that loop, and jobs added through an AsyncClient.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import uvloop

from disque_py.client import AsyncClient, Job
from disque_py.client.worker import Worker
from tests.support import HOST

WORKER_LOG = "disque_py.worker"
# Seconds: long enough that no RETRY re-delivery happens unless a test asks.
LONG_RETRY = 300


def node_url(server) -> str:
    return f"disque://{HOST}:{server.port}"


def run(scenario: Awaitable[Any]) -> Any:
    return uvloop.run(scenario)


async def eventually(condition: Callable[[], Any], timeout: float = 20.0,
                     message: str = "") -> Any:
    """Await until `condition()` (a value or an awaitable) is truthy."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}")
        await asyncio.sleep(0.02)


def quick_worker(url: str, **options: Any) -> Worker:
    """A worker that notices a stop within a tenth of a second."""
    return Worker(url, **{"poll_ms": 100, "grace": 10.0, **options})


class Served:
    """A worker serving beside a test's block: `stop()` once (a second
    stop would end the grace at once)."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.task = asyncio.create_task(worker.serve())
        self.stopped = False

    def stop(self) -> None:
        if not self.stopped:
            self.stopped = True
            self.worker.stop()


@contextlib.asynccontextmanager
async def serving(worker: Worker) -> AsyncIterator[Served]:
    """The worker running beside the block; stopped, and awaited, after it."""
    served = Served(worker)
    try:
        yield served
    finally:
        served.stop()
        await asyncio.wait_for(served.task, 30)
        await worker.client.close()


async def blocked_clients(client: AsyncClient) -> int:
    return int((await client.info("clients"))["blocked_clients"])


async def add_jobs(client: AsyncClient, queue: str, count: int, **options: Any) -> list[str]:
    options.setdefault("retry", LONG_RETRY)
    return [await client.add(queue, f"{queue} {n}".encode(), **options)
            for n in range(count)]


def failures_logged(caplog: pytest.LogCaptureFixture, level: int = logging.ERROR) -> list[str]:
    return [record.getMessage() for record in caplog.records
            if record.name == WORKER_LOG and record.levelno == level]


def as_coroutine(fn: Callable[[Job], Any]) -> Callable[[Job], Awaitable[Any]]:
    async def handler(job: Job) -> Any:
        return fn(job)
    return handler


def sleeps(seconds: float) -> Callable[[Job], Awaitable[None]]:
    async def handler(job: Job) -> None:
        await asyncio.sleep(seconds)
    return handler
