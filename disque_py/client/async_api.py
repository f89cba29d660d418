"""The asyncio client's typed methods, one per command: the blocking
client's (sync_api.py), awaited. Each builds its call (commands.py, where
its docstring lives) and awaits `_execute`, which the AsyncClient runs and
the AsyncPipeline queues.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

from typing_extensions import Unpack

from disque_py.client import commands
from disque_py.client.commands import AddOptions, Arg, Call, PauseState
from disque_py.client.serializers import Serializer
from disque_py.client.sync_api import documented_by
from disque_py.client.types import Hello, Job, JobInfo, QueueStat

T = TypeVar("T")


class AsyncCommands:
    """Disque's commands and disque-py's extensions as coroutines."""

    codec: Serializer

    async def _execute(self, call: Call[T]) -> T:
        raise NotImplementedError

    @documented_by(commands.add)
    async def add(self, queue: str, body: Any, **options: Unpack[AddOptions]) -> str:
        return await self._execute(commands.add(self.codec, queue, body, options))

    @documented_by(commands.get)
    async def get(self, *queues: str, count: int | None = None, timeout: int | None = None,
                  nohang: bool = False, with_counters: bool = False,
                  pattern: str | None = None) -> list[Job]:
        return await self._execute(commands.get(queues, count, timeout, nohang,
                                                with_counters, pattern))

    @documented_by(commands.ack)
    async def ack(self, *job_ids: str) -> int:
        return await self._execute(commands.ack(job_ids))

    @documented_by(commands.fastack)
    async def fastack(self, *job_ids: str) -> int:
        return await self._execute(commands.fastack(job_ids))

    @documented_by(commands.nack)
    async def nack(self, *job_ids: str, delay: int | None = None) -> int:
        return await self._execute(commands.nack(job_ids, delay))

    @documented_by(commands.working)
    async def working(self, job_id: str) -> int:
        return await self._execute(commands.working(job_id))

    @documented_by(commands.enqueue)
    async def enqueue(self, *job_ids: str) -> int:
        return await self._execute(commands.enqueue(job_ids))

    @documented_by(commands.dequeue)
    async def dequeue(self, *job_ids: str) -> int:
        return await self._execute(commands.dequeue(job_ids))

    @documented_by(commands.delete)
    async def delete(self, *job_ids: str) -> int:
        return await self._execute(commands.delete(job_ids))

    @documented_by(commands.show)
    async def show(self, job_id: str) -> JobInfo | None:
        return await self._execute(commands.show(job_id))

    @documented_by(commands.wait)
    async def wait(self, job_ids: Iterable[str], timeout: int | None = None) -> list[str]:
        return await self._execute(commands.wait(tuple(job_ids), timeout))

    @documented_by(commands.qlen)
    async def qlen(self, queue: str) -> int:
        return await self._execute(commands.qlen(queue))

    @documented_by(commands.qpeek)
    async def qpeek(self, queue: str, count: int) -> list[Job]:
        return await self._execute(commands.qpeek(queue, count))

    @documented_by(commands.qstat)
    async def qstat(self, queue: str) -> QueueStat | None:
        return await self._execute(commands.qstat(queue))

    @documented_by(commands.qwait)
    async def qwait(self, queue: str, timeout: int | None = None) -> bool:
        return await self._execute(commands.qwait(queue, timeout))

    @documented_by(commands.qrequeue)
    async def qrequeue(self, dead_queue: str, to: str | None = None,
                       count: int | None = None) -> int:
        return await self._execute(commands.qrequeue(dead_queue, to, count))

    @documented_by(commands.pause)
    async def pause(self, queue: str, state: PauseState | None = None,
                    bcast: bool = False) -> str:
        return await self._execute(commands.pause(queue, state, bcast))

    @documented_by(commands.hello)
    async def hello(self) -> Hello:
        return await self._execute(commands.hello())

    @documented_by(commands.info)
    async def info(self, section: str | None = None) -> dict[str, str]:
        return await self._execute(commands.info(section))

    @documented_by(commands.ping)
    async def ping(self) -> bool:
        return await self._execute(commands.ping())

    @documented_by(commands.config_get)
    async def config_get(self, pattern: str) -> dict[str, str]:
        return await self._execute(commands.config_get(pattern))

    @documented_by(commands.config_set)
    async def config_set(self, directive: str, value: str | int) -> str:
        return await self._execute(commands.config_set(directive, value))

    @documented_by(commands.execute)
    async def execute_command(self, *args: Arg) -> Any:
        return await self._execute(commands.execute(args))
