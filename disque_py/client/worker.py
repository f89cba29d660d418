"""Worker: the loop every consumer of a job queue needs, written once.

    worker = Worker("disque://127.0.0.1:7711", concurrency=50)

    @worker.handler("emails")
    async def send_email(job):
        ...

    worker.run()            # until SIGTERM or SIGINT

What it promises, and how:
- **At most `concurrency` jobs run at once.** Fetchers ask for as many jobs
  as there are free slots (GETJOB COUNT, WITHCOUNTERS), blocking at most
  `poll_ms` so that a stop is noticed. Plain queues share one fetcher; each
  pattern (a handler on "orders:*") has its own (GETJOB PATTERN); they take
  slots in turn, each at most its share, so none waits on another's idle
  GETJOB.
- **A job that returns is acknowledged; one that raises is not.** ACKJOB
  takes every job finished since the last one was sent (one call in
  flight, so they batch themselves under load). An exception NACKs the job
  (its BACKOFF and MAXDELIVERIES then apply) and is logged with the job's
  ID; `Retry(delay=s)` NACKs it with a delay; an exception listed in the
  handler's `dead_on`, or `DeadLetter`, moves it to its dead-letter queue
  at once (dead_letter.py), as does a body the serializer cannot read
  (an UnreadableBody: no handler could run it). A job already in a
  dead-letter queue is not moved on: it returns after its RETRY.
- **A long job is kept.** Once it has run `keepalive_after` seconds, and
  then every half of its RETRY (WORKING's answer), WORKING postpones its
  redelivery. GETJOB does not restart a job's RETRY clock (only WORKING
  does, in Disque too), so a job queued for long may come back before the
  first WORKING: one that comes back here while it runs is not run twice.
- **A stop loses nothing.** `stop()` (SIGTERM, SIGINT) fetches no more;
  jobs fetched meanwhile are NACKed unrun; running jobs get `grace`
  seconds (a second stop, a second Ctrl-C, ends it at once), then async
  ones are cancelled and NACKed; a plain one left running in its thread
  is not NACKed (it would run twice at once) and returns after its RETRY.
  Pending ACKs are sent before `run` returns.
- Handlers are async functions (run on the loop) or plain functions (run
  in a thread pool of `concurrency` threads). A handler gets the Job, its
  body already read by the client's serializer.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import uvloop

from disque_py.base.globmatch import glob_match
from disque_py.client.aio import AsyncClient
from disque_py.client.dead_letter import dead_letter, is_dead_letter_queue
from disque_py.client.serializers import Serializer
from disque_py.client.sync import Client
from disque_py.client.types import Job, UnreadableBody
from disque_py.client.worker_parts import (
    DeadLetter, Handler, Retry, Route, Stopping, WorkerStats,
)

__all__ = ["DeadLetter", "Retry", "Worker", "WorkerStats"]

log = logging.getLogger("disque_py.worker")

H = TypeVar("H", bound=Handler)

DEFAULT_CONCURRENCY = 50
DEFAULT_POLL_MS = 1000
DEFAULT_GRACE_S = 30.0
DEFAULT_KEEPALIVE_AFTER_S = 0.5
# The least time between two WORKING of one job.
MIN_KEEPALIVE_S = 0.5


class Worker:
    """Runs handlers over the jobs of their queues: see the module's text."""

    def __init__(self, client: AsyncClient | Client | str | None = None, *,
                 concurrency: int = DEFAULT_CONCURRENCY, batch: int | None = None,
                 poll_ms: int = DEFAULT_POLL_MS, grace: float = DEFAULT_GRACE_S,
                 keepalive_after: float = DEFAULT_KEEPALIVE_AFTER_S,
                 serializer: str | Serializer | None = None) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.client = _async_client(client, serializer)
        self.concurrency = concurrency
        self.batch = batch or concurrency
        self.poll_ms = poll_ms
        self.grace = grace
        self.keepalive_after = keepalive_after
        self.routes: dict[str, Route] = {}
        self.stats = WorkerStats()
        self._stopping = Stopping()
        self._free = concurrency
        self._slot_freed = asyncio.Event()
        self._acks: list[str] = []
        self._ack_due = asyncio.Event()
        self._running: dict[str, asyncio.Future[Any]] = {}
        self._chores: set[asyncio.Task[None]] = set()
        self._threads: ThreadPoolExecutor | None = None
        self._threads_lock = threading.Lock()
        self._in_threads = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._burst = False
        self._idle_fetchers: set[int] = set()
        self._fetchers = 0
        self._share = concurrency
        self._taking = asyncio.Lock()

    # ------------------------------------------------------------ handlers

    def handler(self, source: str, *,
                dead_on: tuple[type[BaseException], ...] = ()) -> Callable[[H], H]:
        """Register a function for the jobs of queue `source`, or of every
        queue matching it when it is a glob ("orders:*"). Exceptions in
        `dead_on` dead-letter the job at once instead of NACKing it."""
        def register(fn: H) -> H:
            if source in self.routes:
                raise ValueError(f"a handler for {source!r} is already registered")
            self.routes[source] = Route(source, fn, asyncio.iscoroutinefunction(fn),
                                        tuple(dead_on))
            return fn
        return register

    def route_for(self, queue: str) -> Route | None:
        """The handler of a job from `queue`: its own, else the first pattern."""
        route = self.routes.get(queue)
        if route is not None:
            return route
        for route in self.routes.values():
            if route.is_pattern and glob_match(route.source.encode(), queue.encode()):
                return route
        return None

    # ------------------------------------------------------------- running

    def run(self, install_signals: bool = True, burst: bool = False) -> WorkerStats:
        """Run until stopped (SIGTERM or SIGINT with `install_signals`); with
        `burst`, only until every queue is empty and no job runs (as RQ's
        burst mode: for batch runs, tests and scripts)."""
        return uvloop.run(self.serve(install_signals, burst))

    def stop(self) -> None:
        """Fetch no more jobs; finish (within the grace period) and return.
        Safe to call from any thread (a signal handler, another thread)."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            try:
                running = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if running is not loop:
                loop.call_soon_threadsafe(self.stop)
                return
        self._stopping.set()
        self._slot_freed.set()

    async def serve(self, install_signals: bool = False, burst: bool = False) -> WorkerStats:
        """The worker's coroutine: run until stop() (or a signal, with
        `install_signals`; or until idle, with `burst`), then finish as the
        module's text says."""
        if not self.routes:
            raise ValueError("register a handler first: @worker.handler(queue)")
        loop = asyncio.get_running_loop()
        if self._loop is not None and self._loop is not loop:
            # The client's connections belong to the last run's loop.
            self.client = AsyncClient.from_settings(self.client.settings, self.client.codec)
        self._loop = loop
        if install_signals:
            for signum in (signal.SIGTERM, signal.SIGINT):
                self._loop.add_signal_handler(signum, self.stop)
        self._burst = burst
        self._idle_fetchers.clear()
        self._threads = ThreadPoolExecutor(self.concurrency, "disque-worker")
        self.stats = WorkerStats()
        self._free = self.concurrency
        acker = asyncio.create_task(self._send_acks())
        plain = tuple(r.source for r in self.routes.values() if not r.is_pattern)
        fetchers = [asyncio.create_task(self._fetch(plain, None))] if plain else []
        fetchers += [asyncio.create_task(self._fetch((), route))
                     for route in self.routes.values() if route.is_pattern]
        self._fetchers = len(fetchers)
        self._share = max(1, self.concurrency // len(fetchers))
        self._taking = asyncio.Lock()
        try:
            await asyncio.gather(*fetchers)
            await self._finish_running()
        finally:
            for fetcher in fetchers:
                fetcher.cancel()
            while self._chores:
                await asyncio.gather(*self._chores)
            self._stopping.acks_closed = True
            self._ack_due.set()
            await acker
            self._threads.shutdown(wait=False, cancel_futures=True)
            self._ready_to_serve_again()
        return self.stats

    def _ready_to_serve_again(self) -> None:
        """A new stop and new events for the next serve(): this run's stop
        would end it at once, and asyncio's events are bound to the loop
        that first used them (run() makes a new one each time)."""
        self._stopping = Stopping()
        self._slot_freed = asyncio.Event()
        self._ack_due = asyncio.Event()

    def _spawn(self, chore: Awaitable[None]) -> None:
        """Run a NACK, WORKING or dead-lettering beside the jobs; a stop
        waits for them."""
        task = asyncio.ensure_future(chore)
        self._chores.add(task)
        task.add_done_callback(self._chores.discard)

    async def _fetch(self, queues: tuple[str, ...], pattern: Route | None) -> None:
        """Fetch jobs of `queues` (or of `pattern`'s queues) into free slots."""
        while not self._stopping.is_set():
            asked = await self._take_slots()
            if not asked:
                continue
            try:
                jobs = await self._get(queues, pattern, asked)
            except Exception:
                self._give_slots(asked)
                log.exception("GETJOB failed; trying again")
                await self._stopping.sleep(1.0)
                continue
            self._give_slots(asked - len(jobs))
            self._note_idle(pattern, idle=not jobs)
            if self._stopping.is_set():
                await self._give_back(jobs)
                return
            for job in jobs:
                self._start(job, self.route_for(job.queue) or pattern)

    async def _get(self, queues: tuple[str, ...], pattern: Route | None,
                   asked: int) -> list[Job]:
        """Up to `asked` jobs, waiting up to poll_ms for the first. A parked
        GETJOB is handed one job (Disque's rule), so one job for more asked
        is topped up at once with a GETJOB NOHANG: else the batch would stay
        split (1, then the rest, in turn) for as long as jobs keep coming."""
        source = pattern.source if pattern else None
        jobs = await self.client.get(*queues, pattern=source, count=asked,
                                     timeout=self.poll_ms, with_counters=True)
        if len(jobs) == 1 < asked:
            try:
                jobs += await self.client.get(*queues, pattern=source, count=asked - 1,
                                              nohang=True, with_counters=True)
            except Exception:                  # the one job runs; the next GETJOB retries
                log.warning("GETJOB NOHANG after a parked GETJOB failed", exc_info=True)
        return jobs

    async def _take_slots(self) -> int:
        """Free slots for one GETJOB (0 once stopping). Fetchers take them in
        turn (an asyncio.Lock serves its waiters first come, first served),
        and each at most its share: a fetcher blocked on an empty queue must
        not hold every slot while another's queues have jobs."""
        async with self._taking:
            while self._free <= 0 and not self._stopping.is_set():
                self._slot_freed.clear()
                await self._slot_freed.wait()
                await asyncio.sleep(0)        # let the jobs finishing now free theirs too
            if self._stopping.is_set():
                return 0
            asked = min(self._free, self.batch, self._share)
            self._free -= asked
            return asked

    def _give_slots(self, count: int) -> None:
        """Slots a GETJOB did not fill: free again, and a waiting fetcher told."""
        if count > 0:
            self._free += count
            self._slot_freed.set()

    def _note_idle(self, pattern: Route | None, idle: bool) -> None:
        """Burst mode's end: every fetcher found nothing and no job runs."""
        key = id(pattern) if pattern is not None else 0
        if not idle:
            self._idle_fetchers.discard(key)
            return
        self._idle_fetchers.add(key)
        if self._burst and len(self._idle_fetchers) == self._fetchers and \
                not self.stats.running and not self._chores:
            self.stop()

    def _start(self, job: Job, route: Route | None) -> None:
        if job.id in self._running:
            # Delivered again while it runs here: its requeue time came
            # first (it is not reset by GETJOB, only by WORKING). One run.
            self._give_slots(1)
            self._spawn(self._working(job))
            return
        if route is None:        # a queue no handler serves (a handler was removed)
            self._give_slots(1)
            self._spawn(self._nack(job, None))
            return
        self.stats.running += 1
        if isinstance(job.body, UnreadableBody):       # no handler can ever run it
            future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            future.set_exception(DeadLetter(f"unreadable body: {job.body.error}"))
        elif route.is_async:
            future = asyncio.ensure_future(route.fn(job))
        else:
            assert self._threads is not None
            future = asyncio.get_running_loop().run_in_executor(
                self._threads, self._in_thread, route.fn, job)
        self._running[job.id] = future
        keepalive = asyncio.get_running_loop().call_later(
            self.keepalive_after, self._keepalive, job)
        future.add_done_callback(lambda done: self._finished(job, route, done, keepalive))

    def _finished(self, job: Job, route: Route, future: asyncio.Future[Any],
                  keepalive: asyncio.TimerHandle) -> None:
        keepalive.cancel()
        self._running.pop(job.id, None)
        self.stats.running -= 1
        self._free += 1
        self._slot_freed.set()
        if future.cancelled():
            if route.is_async:              # stopped for sure: it may run elsewhere now
                self._spawn(self._nack(job, None))
            return
        error = future.exception()
        if error is None:
            self.stats.done += 1
            self._acks.append(job.id)
            self._ack_due.set()
        else:
            self._spawn(self._failed(job, route, error))

    async def _failed(self, job: Job, route: Route, error: BaseException) -> None:
        if isinstance(error, Retry):
            await self._nack(job, error.delay)
            return
        self.stats.failed += 1
        if isinstance(error, DeadLetter) or isinstance(error, route.dead_on):
            if is_dead_letter_queue(job.queue):
                log.error("job %s from dead-letter queue %s failed: %r; left for its RETRY",
                          job.id, job.queue, error)
                return
            log.error("job %s from %s failed, dead-lettered: %r", job.id, job.queue, error)
            try:
                await dead_letter(self.client, job)
                self.stats.dead += 1
            except Exception:
                log.exception("job %s: dead-lettering failed, NACKed instead", job.id)
                await self._nack(job, None)
            return
        log.error("job %s from %s failed, NACKed", job.id, job.queue,
                  exc_info=(type(error), error, error.__traceback__))
        await self._nack(job, None)

    async def _nack(self, job: Job, delay: int | None) -> None:
        try:
            await self.client.nack(job.id, delay=delay)
        except Exception:
            log.exception("job %s: NACK failed (it returns after its RETRY)", job.id)

    async def _give_back(self, jobs: list[Job]) -> None:
        """Jobs fetched as the worker stopped: back to their queues, unrun."""
        if jobs:
            try:
                await self.client.nack(*(job.id for job in jobs))
            except Exception:
                log.exception("NACK of %d unrun jobs failed (they return after their "
                              "RETRY)", len(jobs))

    def _keepalive(self, job: Job) -> None:
        self._spawn(self._working(job))

    async def _working(self, job: Job) -> None:
        if job.id not in self._running:
            return
        try:
            retry = await self.client.working(job.id)
        except Exception as error:
            log.warning("job %s: WORKING failed, it may be delivered again: %r", job.id, error)
            return
        future = self._running.get(job.id)
        if future is not None and not future.done():
            delay = max(MIN_KEEPALIVE_S, retry / 2)
            handle = asyncio.get_running_loop().call_later(delay, self._keepalive, job)
            future.add_done_callback(lambda _: handle.cancel())

    async def _send_acks(self) -> None:
        """ACKJOB every finished job, as many per call as finished meanwhile."""
        while True:
            await self._ack_due.wait()
            self._ack_due.clear()
            while self._acks:
                batch, self._acks = self._acks, []
                try:
                    await self.client.ack(*batch)
                except Exception:
                    log.exception("ACKJOB of %d jobs failed (they return after their RETRY)",
                                  len(batch))
            if self._stopping.acks_closed and not self._acks:
                return

    async def _finish_running(self) -> None:
        """After the stop: wait `grace` seconds for the running jobs, then
        cancel the rest. An async job cancelled is NACKed (its callback does
        it); a plain one cannot be stopped, so it is not: NACKed, it could
        run elsewhere while its thread runs on here. It returns after its
        RETRY, once this process (which should exit) sends no WORKING."""
        await self._stopping.grace(list(self._running.values()), self.grace)
        late = list(self._running.items())
        for job_id, future in late:
            log.warning("job %s still running after the %.0f s grace: %s", job_id, self.grace,
                        "cancelled and NACKed" if isinstance(future, asyncio.Task) else
                        "its thread runs on, the job returns after its RETRY")
            future.cancel()
        if late:
            await asyncio.wait([future for _, future in late])

    @property
    def threads_busy(self) -> bool:
        """Whether a plain handler still runs in a thread: one cancelled at
        the grace's end runs on, so its process should exit (the CLI does)."""
        return self._in_threads > 0

    def _in_thread(self, fn: Handler, job: Job) -> Any:
        with self._threads_lock:
            self._in_threads += 1
        try:
            return fn(job)
        finally:
            with self._threads_lock:
                self._in_threads -= 1


def _async_client(client: AsyncClient | Client | str | None,
                  serializer: str | Serializer | None) -> AsyncClient:
    if isinstance(client, AsyncClient):
        return client
    if isinstance(client, Client):
        return AsyncClient.from_settings(client.settings, client.codec)
    return AsyncClient(client, serializer=serializer)
