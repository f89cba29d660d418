"""The Worker (disque_py/client/worker.py) in this process against a real
node: which jobs it takes (patterns beside plain queues), how many run at
once (measured inside the handlers), and what a stop does with the jobs
fetched, running, and running past the grace.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

import pytest

from disque_py.client import AsyncClient, Job
from disque_py.client.worker import Worker
from tests.worker_support import (
    WORKER_LOG, add_jobs, as_coroutine, blocked_clients, eventually, failures_logged,
    node_url, quick_worker, run, serving, sleeps,
)


@pytest.fixture
def url(server) -> str:
    return node_url(server)


# ------------------------------------------------------------ routing

def test_a_pattern_handler_gets_the_jobs_of_every_matching_queue(url):
    """"orders:*" (GETJOB PATTERN) beside the plain queue "emails": each
    job goes to its handler; a queue neither serves is left alone."""
    handled: dict[str, list[tuple[str, str]]] = {"orders": [], "emails": []}

    async def scenario() -> tuple[list[str], list[str], int]:
        async with AsyncClient(url) as client:
            orders = await add_jobs(client, "orders:eu", 3) + await add_jobs(client, "orders:us", 3)
            emails = await add_jobs(client, "emails", 2)
            await add_jobs(client, "billing", 1)
            worker = quick_worker(url)
            worker.handler("orders:*")(
                as_coroutine(lambda job: handled["orders"].append((job.id, job.queue))))
            worker.handler("emails")(lambda job: handled["emails"].append((job.id, job.queue)))
            async with serving(worker):
                await eventually(lambda: worker.stats.done == 8, message="8 jobs")
            return orders, emails, await client.qlen("billing")

    orders, emails, billing_left = run(scenario())
    assert sorted(handled["orders"]) == sorted(
        [(job_id, "orders:eu") for job_id in orders[:3]] +
        [(job_id, "orders:us") for job_id in orders[3:]])
    assert sorted(handled["emails"]) == sorted((job_id, "emails") for job_id in emails)
    assert billing_left == 1


@pytest.mark.parametrize("concurrency", [1, 4])
def test_a_pattern_is_served_while_the_plain_queue_stays_empty(url, concurrency):
    """The plain queues' fetcher, blocked on an empty queue, must not keep
    every slot from the pattern's fetcher (it did: the pattern's jobs never
    ran). With one slot the fetchers take turns; with more, each its share."""
    async def scenario() -> Worker:
        async with AsyncClient(url) as client:
            await add_jobs(client, "orders:eu", 6)
            worker = quick_worker(url, concurrency=concurrency)
            worker.handler("emails")(sleeps(0))
            worker.handler("orders:*")(sleeps(0))
            async with serving(worker):
                await eventually(lambda: worker.stats.done == 6, message="the pattern's jobs")
            return worker

    assert run(scenario()).stats.done == 6


class Peak:
    """How many handlers run at once, and the most there ever were. The
    first `hold` entrants wait (up to a deadline) until `hold` run
    together, so reaching the bound does not depend on scheduling luck."""

    def __init__(self, hold: int) -> None:
        self.hold = hold
        self.now = self.most = self.entered = 0
        self.lock = threading.Lock()

    def enter(self) -> bool:
        with self.lock:
            self.now += 1
            self.entered += 1
            self.most = max(self.most, self.now)
            return self.entered <= self.hold

    def leave(self) -> None:
        with self.lock:
            self.now -= 1

    def together(self) -> bool:
        return self.most >= self.hold


@pytest.mark.parametrize("kind", ["async", "sync"])
def test_no_more_than_concurrency_handlers_run_at_once(url, kind):
    """Concurrency 4 shared by the plain queues' fetcher and a pattern's:
    4 handlers run together, never 5."""
    peak = Peak(hold=4)

    async def in_loop(job: Job) -> None:
        if peak.enter():
            await eventually(peak.together, timeout=10, message="4 handlers at once")
        await asyncio.sleep(0.02)
        peak.leave()

    def in_thread(job: Job) -> None:
        if peak.enter():
            deadline = time.monotonic() + 10
            while not peak.together() and time.monotonic() < deadline:
                time.sleep(0.01)
        time.sleep(0.02)
        peak.leave()

    async def scenario() -> None:
        async with AsyncClient(url) as client:
            for queue in ("batch", "batch:a", "batch:b"):
                await add_jobs(client, queue, 12)
            worker = quick_worker(url, concurrency=4)
            chosen = in_loop if kind == "async" else in_thread
            worker.handler("batch")(chosen)
            worker.handler("batch:*")(chosen)
            async with serving(worker):
                await eventually(lambda: worker.stats.done == 36, message=f"36 jobs {peak.__dict__} {worker.stats}")

    run(scenario())
    assert peak.most == 4 and peak.entered == 36


# ------------------------------------------------------------ stopping

def test_jobs_fetched_after_the_stop_go_back_unrun(url):
    """The stop comes while GETJOB waits; the job it then brings is NACKed
    without running (its nack counted), and serve() returns."""
    ran: list[str] = []

    async def scenario() -> tuple[Any, asyncio.Task[Any]]:
        async with AsyncClient(url) as client:
            worker = Worker(url, poll_ms=10_000)
            worker.handler("late")(as_coroutine(lambda job: ran.append(job.id)))
            serve = asyncio.create_task(worker.serve())
            await eventually(lambda: blocked_clients(client), message="GETJOB blocked")
            worker.stop()
            [job_id] = await add_jobs(client, "late", 1)
            await asyncio.wait_for(serve, 10)
            await worker.client.close()
            return await client.show(job_id), worker

    shown, worker = run(scenario())
    assert ran == [] and worker.stats.done == 0
    assert (shown.state, shown.nacks) == ("queued", 1)


@pytest.mark.parametrize("kind", ["async", "sync"])
def test_running_jobs_finish_within_the_grace(url, kind):
    """A stop lets a running job end (grace 10 s) and sends its ACK before
    serve() returns."""
    started, finished = threading.Event(), threading.Event()

    async def in_loop(job: Job) -> None:
        started.set()
        await asyncio.sleep(0.5)
        finished.set()

    def in_thread(job: Job) -> None:
        started.set()
        time.sleep(0.5)
        finished.set()

    async def scenario() -> tuple[Any, Worker]:
        async with AsyncClient(url) as client:
            [job_id] = await add_jobs(client, "report", 1)
            worker = quick_worker(url, grace=10.0)
            worker.handler("report")(in_loop if kind == "async" else in_thread)
            async with serving(worker) as served:
                await eventually(started.is_set, message="the job started")
                served.stop()
            return await client.show(job_id), worker

    shown, worker = run(scenario())
    assert finished.is_set() and shown is None and worker.stats.done == 1


def test_an_async_job_past_the_grace_is_cancelled_nacked_and_comes_back(url, caplog):
    caplog.set_level(logging.INFO, logger=WORKER_LOG)
    cancelled = threading.Event()

    async def endless(job: Job) -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async def scenario() -> tuple[str, Job]:
        async with AsyncClient(url) as client:
            [job_id] = await add_jobs(client, "stuck", 1)
            worker = quick_worker(url, grace=0.2)
            worker.handler("stuck")(endless)
            async with serving(worker) as served:
                await eventually(lambda: worker.stats.running, message="the job started")
                served.stop()
            [again] = await client.get("stuck", timeout=5000, with_counters=True)
            await client.ack(again.id)
            return job_id, again

    job_id, again = run(scenario())
    assert cancelled.is_set()
    assert (again.id, again.nacks, again.additional_deliveries) == (job_id, 1, 0)
    [warning] = failures_logged(caplog, logging.WARNING)
    assert job_id in warning and "grace" in warning


def test_a_thread_past_the_grace_is_left_running_and_not_nacked(url):
    """A plain handler cannot be cancelled: at the grace's end its thread
    runs on, so its job is not NACKed (it would run twice at once): it stays
    delivered, to come back after its RETRY; threads_busy says so (the CLI
    then exits without waiting for it)."""
    release = threading.Event()

    async def scenario() -> tuple[Any, bool]:
        async with AsyncClient(url) as client:
            [job_id] = await add_jobs(client, "stuck", 1)
            worker = quick_worker(url, grace=0.2)
            worker.handler("stuck")(lambda job: release.wait(30))
            try:
                async with serving(worker) as served:
                    await eventually(lambda: worker.stats.running, message="the job started")
                    served.stop()
                busy = worker.threads_busy
            finally:
                release.set()
            return await client.show(job_id), busy

    shown, busy = run(scenario())
    assert busy and (shown.state, shown.nacks, shown.additional_deliveries) == ("active", 0, 0)


@pytest.mark.parametrize("loops", ["a new loop each time", "the same loop"])
def test_a_worker_serves_again_after_it_stopped(url, caplog, loops):
    """run() twice (each on a loop of its own), or serve() twice on one
    loop: the second run serves and acks as the first did (it returned at
    once, or failed on the first loop's events and connections)."""
    caplog.set_level(logging.INFO, logger=WORKER_LOG)
    ran: list[bytes] = []
    worker = quick_worker(url)
    worker.handler("again")(as_coroutine(lambda job: ran.append(job.body)))

    async def add(body: bytes) -> str:
        async with AsyncClient(url) as client:
            return await client.add("again", body, retry=300)

    async def twice_on_one_loop() -> list[str]:
        first = await add(b"first")
        await worker.serve(burst=True)
        second = await add(b"second")
        await worker.serve(burst=True)
        return [first, second]

    if loops == "the same loop":
        job_ids = run(twice_on_one_loop())
    else:
        job_ids = [run(add(b"first"))]
        worker.run(install_signals=False, burst=True)
        job_ids.append(run(add(b"second")))
        worker.run(install_signals=False, burst=True)
    assert ran == [b"first", b"second"] and failures_logged(caplog) == []

    async def shown() -> list[Any]:
        async with AsyncClient(url) as client:
            return [await client.show(job_id) for job_id in job_ids]
    assert run(shown()) == [None, None]
