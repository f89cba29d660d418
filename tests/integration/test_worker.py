"""The Worker runtime (disque_py/client/worker.py, dead_letter.py) in this
process against a real node: handlers run and their jobs are acked; a
failure is NACKed, backed off and dead-lettered at its limit; Retry,
DeadLetter and dead_on; WORKING keeps a slow job. Which jobs a worker
takes, how many at once and what a stop does are test_worker_slots.py's;
the command line (SIGTERM, several processes) test_worker_cli.py's.

Timing is asserted as lower bounds only (a loaded machine makes things
later, never earlier); every wait has a deadline.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

import pytest

from disque_py.client import AsyncClient, Client, Job
from disque_py.client.worker import DeadLetter, Retry, Worker
from tests.worker_support import (
    LONG_RETRY, WORKER_LOG, add_jobs, as_coroutine, blocked_clients, eventually,
    failures_logged, node_url, quick_worker, run, serving, sleeps,
)


class TransientError(Exception):
    """A failure worth another try."""


class MalformedBody(Exception):
    """A failure no retry can mend."""


@pytest.fixture
def url(server) -> str:
    return node_url(server)


# ------------------------------------------------------------ success

@pytest.mark.parametrize("kind", ["async", "sync"])
def test_handlers_run_and_their_jobs_are_acked(url, kind):
    """Async handlers run on the loop's thread, plain ones in the pool's;
    WAITJOB, sent before the work starts, sees every job acked, then the
    node has forgotten them all (it holds the only copy)."""
    handled: dict[str, tuple[bytes, str]] = {}
    loop_thread = threading.current_thread().name

    def record(job: Job) -> None:
        handled[job.id] = (job.body, threading.current_thread().name)

    async def scenario() -> tuple[list[str], list[str]]:
        async with AsyncClient(url) as client:
            job_ids = await add_jobs(client, "emails", 20)
            waiting = asyncio.create_task(client.wait(job_ids, timeout=30_000))
            await eventually(lambda: blocked_clients(client), message="WAITJOB blocked")
            worker = quick_worker(url, concurrency=5)
            if kind == "async":
                worker.handler("emails")(as_coroutine(record))
            else:
                worker.handler("emails")(record)
            async with serving(worker):
                statuses = await waiting
            assert worker.stats.done == 20 and worker.stats.failed == 0
            assert await client.qlen("emails") == 0
            assert [await client.show(job_id) for job_id in job_ids] == [None] * 20
            assert [job_id async for job_id in client.jscan()] == []
            return job_ids, statuses

    job_ids, statuses = run(scenario())
    assert statuses == ["acked"] * 20
    assert {job_id: body for job_id, (body, _) in handled.items()} == \
        {job_id: f"emails {n}".encode() for n, job_id in enumerate(job_ids)}
    threads = {thread for _, thread in handled.values()}
    if kind == "async":
        assert threads == {loop_thread}
    else:
        assert loop_thread not in threads and all("disque-worker" in t for t in threads)


# ------------------------------------------------------------ failures

def test_a_failing_handler_is_nacked_backed_off_and_dead_lettered_at_its_limit(url, caplog):
    """BACKOFF 200 1000 and MAXDELIVERIES 3: the handler sees deliveries
    1, 2, 3 (nacks 0, 1, 2), at least 0.9 x 200 ms then 0.9 x 400 ms
    apart (the backoff's jitter is 10 %), then the node dead-letters the
    job; each failure is logged with the job's ID and its traceback."""
    caplog.set_level(logging.INFO, logger=WORKER_LOG)
    seen: list[tuple[float, int | None, int | None, int | None]] = []

    async def scenario() -> tuple[str, Any, Worker]:
        async with AsyncClient(url) as client:
            job_id = await client.add("resize", b"img/42.png", retry=LONG_RETRY,
                                      backoff=(200, 1000), max_deliveries=3)
            worker = quick_worker(url)

            @worker.handler("resize")
            async def always_fails(job: Job) -> None:
                seen.append((time.monotonic(), job.nacks, job.additional_deliveries,
                             job.deliveries))
                raise TransientError("the image service is busy")

            async with serving(worker):
                await eventually(lambda: client.qlen("resize:dead"), message="dead-lettered")
            assert await client.qlen("resize") == 0
            return job_id, await client.show(job_id), worker

    job_id, dead, worker = run(scenario())
    assert [(nacks, extra, deliveries) for _, nacks, extra, deliveries in seen] == \
        [(0, 0, 1), (1, 0, 2), (2, 0, 3)]
    first, second, third = (at for at, *_ in seen)
    assert second - first >= 0.18 and third - second >= 0.36
    assert (dead.queue, dead.dead_reason, dead.dead_from, dead.body) == \
        ("resize:dead", "max-deliveries", "resize", b"img/42.png")
    assert (worker.stats.failed, worker.stats.done, worker.stats.dead) == (3, 0, 0)
    failures = [record for record in caplog.records
                if record.name == WORKER_LOG and record.levelno == logging.ERROR]
    assert len(failures) == 3
    for record in failures:
        assert job_id in record.getMessage() and "NACKed" in record.getMessage()
        assert record.exc_info and record.exc_info[0] is TransientError


def test_retry_puts_the_job_back_after_its_delay_and_is_no_failure(url, caplog):
    """Retry(delay=1) is NACK ... DELAY 1: the job comes back no sooner,
    its nack counted, and nothing is logged as a failure."""
    caplog.set_level(logging.INFO, logger=WORKER_LOG)
    seen: list[tuple[float, int | None]] = []

    async def scenario() -> tuple[Any, Worker]:
        async with AsyncClient(url) as client:
            [job_id] = await add_jobs(client, "reports", 1)
            worker = quick_worker(url)

            @worker.handler("reports")
            async def later_please(job: Job) -> None:
                seen.append((time.monotonic(), job.nacks))
                if len(seen) == 1:
                    raise Retry(delay=1)

            async with serving(worker):
                await eventually(lambda: worker.stats.done, message="the second run")
            return await client.show(job_id), worker

    shown, worker = run(scenario())
    assert [nacks for _, nacks in seen] == [0, 1]
    assert seen[1][0] - seen[0][0] >= 0.9
    assert shown is None and worker.stats.failed == 0
    assert failures_logged(caplog) == []


DEAD_AT_ONCE = {
    "DeadLetter raised": (DeadLetter("no such account"), ()),
    "an error listed in dead_on": (MalformedBody("not JSON"), (MalformedBody,)),
    "a subclass of one listed": (MalformedBody("not JSON"), (ValueError, Exception)),
}


@pytest.mark.parametrize("error, dead_on", DEAD_AT_ONCE.values(), ids=DEAD_AT_ONCE.keys())
@pytest.mark.parametrize("options, dead_queue", [
    ({}, "orders:dead"),
    ({"max_deliveries": 5, "deadletter": "rejected"}, "rejected"),
], ids=["default dead queue", "the job's DEADLETTER"])
def test_a_hopeless_job_is_dead_lettered_at_once_and_the_original_acked(
        url, caplog, error, dead_on, options, dead_queue):
    """dead_letter.py: the body goes to the job's dead-letter queue as a
    new job (the failed ID as its DEDUP key) and the original is acked;
    one delivery, logged with the job's ID."""
    caplog.set_level(logging.INFO, logger=WORKER_LOG)
    runs: list[str] = []

    async def scenario() -> tuple[str, list[Job], Any, Worker]:
        async with AsyncClient(url) as client:
            [job_id] = await add_jobs(client, "orders", 1, **options)
            worker = quick_worker(url)

            @worker.handler("orders", dead_on=dead_on)
            async def hopeless(job: Job) -> None:
                runs.append(job.id)
                raise error

            async with serving(worker):
                await eventually(lambda: client.qlen(dead_queue), message="dead-lettered")
            dead = await client.qpeek(dead_queue, 10)
            assert await client.qlen("orders") == 0
            return job_id, dead, await client.show(job_id), worker

    job_id, dead, original, worker = run(scenario())
    assert runs == [job_id] and original is None
    [dead_job] = dead
    assert dead_job.body == b"orders 0" and dead_job.id != job_id
    assert (worker.stats.failed, worker.stats.dead) == (1, 1)
    [logged] = failures_logged(caplog)
    assert job_id in logged and "dead-lettered" in logged


def test_an_error_not_in_dead_on_is_nacked_as_usual(url):
    """dead_on names what is hopeless; anything else is retried."""
    runs: list[int | None] = []

    async def scenario() -> int:
        async with AsyncClient(url) as client:
            await add_jobs(client, "orders", 1)
            worker = quick_worker(url)

            @worker.handler("orders", dead_on=(MalformedBody,))
            async def flaky(job: Job) -> None:
                runs.append(job.nacks)
                if len(runs) == 1:
                    raise TransientError("timeout")

            async with serving(worker):
                await eventually(lambda: worker.stats.done, message="the second run")
            return await client.qlen("orders:dead")

    assert run(scenario()) == 0
    assert runs == [0, 1]


# ------------------------------------------------------------ WORKING

def test_a_slow_job_is_kept_by_working_and_not_delivered_again(url):
    """RETRY 1 and handlers of 3 s (one async, one in a thread): WORKING
    keeps both from a second worker polling the same queues, and at the
    end of their run the node still counts no other delivery. The control:
    a worker that would send WORKING only after a minute loses its job to
    the second worker, so RETRY 1 would have re-delivered the others too.
    The slow workers have no free slot, so only the second could re-take."""
    counters: dict[str, tuple[int, int]] = {}
    taken_by_second: list[str] = []

    async def scenario() -> None:
        async with AsyncClient(url) as client:
            async def hold(job: Job) -> None:
                await asyncio.sleep(3)
                shown = await client.show(job.id)
                counters[job.queue] = (shown.nacks, shown.additional_deliveries)

            def hold_in_thread(job: Job) -> None:
                time.sleep(3)
                with Client(url) as blocking:
                    shown = blocking.show(job.id)
                counters[job.queue] = (shown.nacks, shown.additional_deliveries)

            keeping = quick_worker(url, concurrency=2, keepalive_after=0.1)
            keeping.handler("slow-async")(hold)
            keeping.handler("slow-sync")(hold_in_thread)
            careless = quick_worker(url, concurrency=1, keepalive_after=60)
            careless.handler("slow-unkept")(sleeps(3))
            second = quick_worker(url)
            second.handler("slow-*")(lambda job: taken_by_second.append(job.queue))
            for queue in ("slow-async", "slow-sync", "slow-unkept"):
                await client.add(queue, b"x", retry=1)
            async with serving(keeping), serving(careless), serving(second):
                await eventually(lambda: keeping.stats.done == 2 and taken_by_second,
                                 message="the slow jobs, and the unkept one re-taken")

    run(scenario())
    assert counters == {"slow-async": (0, 0), "slow-sync": (0, 0)}
    assert taken_by_second == ["slow-unkept"]


def test_a_job_delivered_again_while_it_runs_here_runs_once(url):
    """GETJOB does not restart a job's RETRY clock (Disque's does not
    either): a job queued for most of its RETRY is delivered again soon
    after it was taken, before the first WORKING. The worker holding it
    must not start it a second time beside the first."""
    runs: list[tuple[float, float | None, int | None]] = []

    async def slow(job: Job) -> None:
        run = len(runs)
        runs.append((time.monotonic(), None, job.additional_deliveries))
        await asyncio.sleep(0.6)
        runs[run] = (runs[run][0], time.monotonic(), runs[run][2])

    async def scenario() -> Any:
        async with AsyncClient(url) as client:
            job_id = await client.add("late", b"x", retry=1)

            async def requeue_due_soon() -> bool:
                shown = await client.show(job_id)
                return shown.next_requeue_within < 300
            await eventually(requeue_due_soon, message="the requeue time close")
            worker = quick_worker(url, keepalive_after=30)
            worker.handler("late")(slow)
            async with serving(worker):
                await eventually(lambda: worker.stats.done, message="the run's end")
            return await client.show(job_id)

    assert run(scenario()) is None
    [(start, end, extra)] = runs
    assert end is not None and extra == 0
