"""The blocking client's typed methods, one per command.

Each method builds its call (commands.py, where its docstring lives) and
hands it to `_execute`, which the Client runs and the Pipeline queues. The
asyncio twin is async_api.py: same names, same arguments, awaited.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from typing_extensions import Unpack

from disque_py.client import commands
from disque_py.client.commands import AddOptions, Arg, Call, PauseState
from disque_py.client.serializers import Serializer
from disque_py.client.types import Hello, Job, JobInfo, QueueStat

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


def documented_by(builder: Callable[..., Any]) -> Callable[[F], F]:
    """Give a client method the docstring of the call it sends."""
    def decorate(method: F) -> F:
        method.__doc__ = builder.__doc__
        return method
    return decorate


class SyncCommands:
    """Disque's commands and disque-py's extensions as blocking methods."""

    codec: Serializer

    def _execute(self, call: Call[T]) -> T:
        raise NotImplementedError

    @documented_by(commands.add)
    def add(self, queue: str, body: Any, **options: Unpack[AddOptions]) -> str:
        return self._execute(commands.add(self.codec, queue, body, options))

    @documented_by(commands.get)
    def get(self, *queues: str, count: int | None = None, timeout: int | None = None,
            nohang: bool = False, with_counters: bool = False,
            pattern: str | None = None) -> list[Job]:
        return self._execute(commands.get(queues, count, timeout, nohang, with_counters,
                                          pattern))

    @documented_by(commands.ack)
    def ack(self, *job_ids: str) -> int:
        return self._execute(commands.ack(job_ids))

    @documented_by(commands.fastack)
    def fastack(self, *job_ids: str) -> int:
        return self._execute(commands.fastack(job_ids))

    @documented_by(commands.nack)
    def nack(self, *job_ids: str, delay: int | None = None) -> int:
        return self._execute(commands.nack(job_ids, delay))

    @documented_by(commands.working)
    def working(self, job_id: str) -> int:
        return self._execute(commands.working(job_id))

    @documented_by(commands.enqueue)
    def enqueue(self, *job_ids: str) -> int:
        return self._execute(commands.enqueue(job_ids))

    @documented_by(commands.dequeue)
    def dequeue(self, *job_ids: str) -> int:
        return self._execute(commands.dequeue(job_ids))

    @documented_by(commands.delete)
    def delete(self, *job_ids: str) -> int:
        return self._execute(commands.delete(job_ids))

    @documented_by(commands.show)
    def show(self, job_id: str) -> JobInfo | None:
        return self._execute(commands.show(job_id))

    @documented_by(commands.wait)
    def wait(self, job_ids: Iterable[str], timeout: int | None = None) -> list[str]:
        return self._execute(commands.wait(tuple(job_ids), timeout))

    @documented_by(commands.qlen)
    def qlen(self, queue: str) -> int:
        return self._execute(commands.qlen(queue))

    @documented_by(commands.qpeek)
    def qpeek(self, queue: str, count: int) -> list[Job]:
        return self._execute(commands.qpeek(queue, count))

    @documented_by(commands.qstat)
    def qstat(self, queue: str) -> QueueStat | None:
        return self._execute(commands.qstat(queue))

    @documented_by(commands.qwait)
    def qwait(self, queue: str, timeout: int | None = None) -> bool:
        return self._execute(commands.qwait(queue, timeout))

    @documented_by(commands.qrequeue)
    def qrequeue(self, dead_queue: str, to: str | None = None,
                 count: int | None = None) -> int:
        return self._execute(commands.qrequeue(dead_queue, to, count))

    @documented_by(commands.pause)
    def pause(self, queue: str, state: PauseState | None = None, bcast: bool = False) -> str:
        return self._execute(commands.pause(queue, state, bcast))

    @documented_by(commands.hello)
    def hello(self) -> Hello:
        return self._execute(commands.hello())

    @documented_by(commands.info)
    def info(self, section: str | None = None) -> dict[str, str]:
        return self._execute(commands.info(section))

    @documented_by(commands.ping)
    def ping(self) -> bool:
        return self._execute(commands.ping())

    @documented_by(commands.config_get)
    def config_get(self, pattern: str) -> dict[str, str]:
        return self._execute(commands.config_get(pattern))

    @documented_by(commands.config_set)
    def config_set(self, directive: str, value: str | int) -> str:
        return self._execute(commands.config_set(directive, value))

    @documented_by(commands.execute)
    def execute_command(self, *args: Arg) -> Any:
        return self._execute(commands.execute(args))
