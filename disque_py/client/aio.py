"""The asyncio client: `AsyncClient`, and its `AsyncPipeline`.

The blocking client's twin (sync.py says how calls are routed, when one is
sent again, and what a pipeline answers), on redis-py's asyncio pools.
Its routing state is changed only from the event loop's thread.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Callable, Sequence
from types import TracebackType
from typing import Any, TypeVar, cast

from redis.asyncio.connection import Connection, ConnectionPool, SSLConnection

from disque_py.client import commands
from disque_py.client.async_api import AsyncCommands
from disque_py.client.base import ClientBase, blocking_wait_s
from disque_py.client.failover import Failover
from disque_py.client.errors import MOVE_ON, REFUSED, translate
from disque_py.client.replies import ScanPage
from disque_py.client.routing import Address
from disque_py.client.serializers import Serializer
from disque_py.client.settings import Settings
from disque_py.client.sync import LOST
from disque_py.client.types import JobInfo

T = TypeVar("T")


def no_timeout_as_inf(seconds: float | None) -> float:
    """redis-py's asyncio reads take math.inf for "no timeout" where its
    blocking ones take None."""
    return math.inf if seconds is None else seconds


class AsyncClient(ClientBase, AsyncCommands):
    """An asyncio client of a Disque (or disque-py) node or cluster.

        client = AsyncClient("disque://127.0.0.1:7711")
        job_id = await client.add("emails", b"to: tom")
        [job] = await client.get("emails")
        await client.ack(job.id)

    Arguments as for Client. Each call in flight holds its own connection,
    so blocking calls (GETJOB, WAITJOB, QWAIT) do not hold up the others."""

    def _setup(self, settings: Settings, codec: Serializer, clock: Callable[[], float]) -> None:
        super()._setup(settings, codec, clock)
        self._pools: dict[Address, ConnectionPool] = {}

    # ------------------------------------------------------------ plumbing

    def _pool(self, address: Address) -> ConnectionPool:
        pool = self._pools.get(address)
        if pool is None:
            cls = SSLConnection if self.settings.tls else Connection
            pool = ConnectionPool(connection_class=cls,
                                  **self.settings.connection_options(address))
            self._pools[address] = pool
        return pool

    def _lost(self, address: Address) -> None:
        self.routes.failed(address)
        self._discovered = False

    async def _discover(self) -> None:
        """HELLO on the best reachable node: learn the cluster's nodes."""
        error: BaseException | None = None
        call = commands.hello()
        for address in self.routes.discovery_order():
            pool = self._pool(address)
            try:
                connection = await pool.get_connection()
                try:
                    await connection.send_command(*call.args)
                    reply = await connection.read_response()
                except LOST:
                    await connection.disconnect()
                    raise
                finally:
                    await pool.release(connection)
            except REFUSED as refused:              # answered, with a no
                failure = translate(refused)
                if not isinstance(failure, MOVE_ON):
                    raise failure from refused
                error = failure
                self._lost(address)
                continue
            except LOST as lost:
                error = lost
                self._lost(address)
                continue
            self.routes.learn(call.parse(reply, self.codec), address)
            self.routes.current = address
            self._discovered = True
            return
        raise self.routes.no_node_error() from error

    async def _execute(self, call: commands.Call[T]) -> T:
        if not self._discovered:
            await self._discover()
        failover = Failover(self.routes, call.retry_safe)
        while True:
            address = self.routes.for_jobs(call.job_ids) if call.job_ids else self.routes.current
            pool = self._pools.get(address) or self._pool(address)
            try:
                connection = await pool.get_connection()
            except REFUSED as error:                     # AUTH or HELLO 3 refused
                raise translate(error) from error
            except LOST as error:                        # never sent: the next node?
                self._lost(address)
                if (failure := failover.unreachable(error)) is not None:
                    raise failure from error
                continue
            try:
                await connection.send_command(*call.args)
                # The connection's socket timeout: the client's option, or
                # redis-py's own default (5 s) when none was given.
                if call.blocks_ms is None:
                    reply = await connection.read_response()
                else:
                    reply = await connection.read_response(
                        timeout=no_timeout_as_inf(blocking_wait_s(call, connection.socket_timeout)))
            except REFUSED as error:
                await pool.release(connection)
                if (failure := failover.refused(error)) is not None:
                    raise failure from error
                self._lost(address)
                continue
            except LOST as error:
                await connection.disconnect()
                await pool.release(connection)
                self._lost(address)
                if (failure := failover.lost(error)) is error:
                    raise
                if failure is not None:
                    raise failure from error
                continue
            except BaseException:             # cancelled mid-call: its reply may be unread
                await connection.disconnect()
                await pool.release(connection)
                raise
            await pool.release(connection)
            result = call.parse(reply, self.codec)
            if call.hands_out:
                self.routes.handed_out(cast(Sequence[Any], result))
            return result

    # --------------------------------------------------------------- scans

    async def _pages(self, first: Callable[[int], commands.Call[ScanPage[T]]]
                     ) -> AsyncIterator[T]:
        cursor = 0
        while True:
            page = await self._execute(first(cursor))
            for item in page.items:
                yield item
            cursor = page.cursor
            if cursor == 0:
                return

    def qscan(self, count: int | None = None, minlen: int | None = None,
              maxlen: int | None = None, importrate: int | None = None) -> AsyncIterator[str]:
        """Every queue of the current node: `async for queue in client.qscan()`."""
        return self._pages(lambda cursor: commands.qscan(cursor, count, minlen, maxlen,
                                                         importrate))

    def jscan(self, count: int | None = None, queue: str | None = None,
              states: Sequence[str] = ()) -> AsyncIterator[str]:
        """Every job ID of the current node (JSCAN): `async for`."""
        return self._pages(lambda cursor: commands.jscan(cursor, count, queue, states))

    def jscan_info(self, count: int | None = None, queue: str | None = None,
                   states: Sequence[str] = ()) -> AsyncIterator[JobInfo]:
        """As jscan, each job as SHOW describes it (JSCAN ... REPLY ALL)."""
        return self._pages(lambda cursor: commands.jscan_info(cursor, count, queue, states))

    # ----------------------------------------------------------- lifecycle

    def pipeline(self) -> AsyncPipeline:
        """Calls sent together to the current node: see AsyncPipeline."""
        return AsyncPipeline(self)

    async def close(self) -> None:
        """Close every connection (the client connects again when used)."""
        for pool in list(self._pools.values()):
            await pool.disconnect()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        traceback: TracebackType | None) -> None:
        await self.close()


class AsyncPipeline(AsyncCommands):
    """sync.Pipeline's twin: `async with client.pipeline() as pipe:`, the
    calls awaited inside answer None, `pipe.results` after the block."""

    def __init__(self, client: AsyncClient) -> None:
        self.client = client
        self.codec = client.codec
        self.calls: list[commands.Call[Any]] = []
        self.results: list[Any] = []

    async def _execute(self, call: commands.Call[T]) -> T:
        self.calls.append(call)
        return cast(T, None)

    async def execute(self, raise_on_error: bool = False) -> list[Any]:
        """Send the queued calls; their answers (and errors), in order."""
        calls, self.calls = self.calls, []
        if not calls:
            return []
        client = self.client
        if not client._discovered:
            await client._discover()
        address = client.routes.current
        pool = client._pool(address)
        connection = await pool.get_connection()
        results: list[Any] = []
        try:
            await connection.send_packed_command(
                connection.pack_commands([call.args for call in calls]))
            for call in calls:
                try:
                    results.append(call.parse(await connection.read_response(), self.codec))
                except REFUSED as error:
                    results.append(translate(error))
                    continue
                if call.hands_out:
                    client.routes.handed_out(results[-1])
        except LOST:
            await connection.disconnect()
            client._lost(address)
            raise
        except BaseException:         # interrupted: replies may be left unread
            await connection.disconnect()
            raise
        finally:
            await pool.release(connection)
        self.results = results
        if raise_on_error:
            for result in results:
                if isinstance(result, Exception):
                    raise result
        return results

    async def __aenter__(self) -> AsyncPipeline:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        traceback: TracebackType | None) -> None:
        if kind is None:
            await self.execute()
