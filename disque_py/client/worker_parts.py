"""The worker's parts that are not its loop: what a handler may raise, a
handler with the queue it serves, the figures a worker keeps, and its stop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from disque_py.client.types import Job

Handler = Callable[[Job], Any]
PATTERN_CHARS = frozenset("*?[\\")


class Retry(Exception):
    """Raise from a handler to put the job back after `delay` seconds
    (NACK ... DELAY), without logging a failure."""

    def __init__(self, delay: int | None = None) -> None:
        super().__init__(f"retry in {delay} s" if delay is not None else "retry")
        self.delay = delay


class DeadLetter(Exception):
    """Raise from a handler to move the job to its dead-letter queue now."""


@dataclass(slots=True)
class Route:
    """A handler and the queue (or pattern) it serves."""

    source: str
    fn: Handler
    is_async: bool
    dead_on: tuple[type[BaseException], ...]

    @property
    def is_pattern(self) -> bool:
        return not PATTERN_CHARS.isdisjoint(self.source)


@dataclass
class WorkerStats:
    """What a worker did so far."""

    started: float = field(default_factory=time.monotonic)
    done: int = 0
    failed: int = 0
    dead: int = 0
    running: int = 0

    def rate(self) -> float:
        """Jobs finished (done or failed) per second since the start."""
        elapsed = time.monotonic() - self.started
        return (self.done + self.failed) / elapsed if elapsed > 0 else 0.0

    def line(self) -> str:
        return (f"done {self.done}  failed {self.failed}  dead {self.dead}  "
                f"running {self.running}  {self.rate():,.0f} jobs/s")


class Stopping:
    """A worker's stop. Asked once, running jobs get their grace period;
    asked again (a second Ctrl-C), the grace ends at once."""

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.forced = asyncio.Event()
        self.acks_closed = False

    def set(self) -> None:
        if self.event.is_set():
            self.forced.set()
        self.event.set()

    def is_set(self) -> bool:
        return self.event.is_set()

    async def sleep(self, seconds: float) -> None:
        """Sleep, waking early on the stop."""
        try:
            await asyncio.wait_for(self.event.wait(), seconds)
        except asyncio.TimeoutError:
            pass

    async def grace(self, running: Iterable[asyncio.Future[Any]], seconds: float) -> None:
        """Wait until every future in `running` is done, `seconds` passed,
        or the stop is asked again."""
        left = {future for future in running if not future.done()}
        if not left:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        forced = asyncio.ensure_future(self.forced.wait())
        try:
            while left and not forced.done() and loop.time() < deadline:
                await asyncio.wait([*left, forced], timeout=deadline - loop.time(),
                                   return_when=asyncio.FIRST_COMPLETED)
                left = {future for future in left if not future.done()}
        finally:
            forced.cancel()
