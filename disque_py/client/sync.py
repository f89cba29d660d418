"""The blocking client: `Client`, and its `Pipeline`.

A Client keeps one redis-py connection pool per node it talks to (RESP2 or
RESP3, hiredis when installed, TLS and AUTH from its URL) and routes each
call as routing.py decides. It may be shared between threads: the pools
are thread-safe, and the routing state is changed under a lock.

A call whose connection is refused goes to the next node. One whose
connection drops after it was sent is sent again elsewhere only when that
is safe (commands.Call.retry_safe: not ADDJOB without DEDUP, not
QREQUEUE); otherwise redis.ConnectionError reaches the caller, and the
next call goes to the next node. A -LEAVING or -LOADING answer (the node
is leaving the cluster, or loading its AOF, and did nothing) sends the
call to another node; other error answers raise their class (errors.py),
NOAUTH and WRONGPASS included, though redis-py raises those as
ConnectionError subclasses.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Sequence
from types import TracebackType
from typing import Any, TypeVar, cast

from redis._parsers import _HiredisParser
from redis.connection import Connection, ConnectionPool, SSLConnection
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from disque_py.client import commands
from disque_py.client.base import ClientBase, blocking_wait_s
from disque_py.client.batch import exchange, is_quiet
from disque_py.client.failover import Failover
from disque_py.client.errors import MOVE_ON, REFUSED, translate
from disque_py.client.replies import ScanPage
from disque_py.client.routing import Address
from disque_py.client.serializers import Serializer
from disque_py.client.settings import Settings
from disque_py.client.sync_api import SyncCommands
from disque_py.client.types import JobInfo

T = TypeVar("T")
# What a lost connection looks like from redis-py and the socket below it.
LOST = (RedisConnectionError, RedisTimeoutError, OSError)


class TlsConnection(SSLConnection):
    """redis-py's SSLConnection, whose readiness TLS decides. Before a
    pooled connection is used, redis-py asks whether it holds unread data;
    its hiredis parser (8.1) asks the raw socket, where a TLS 1.3 session
    ticket the server sends just after the handshake looks like data, so
    the pool drops a fresh connection, and after a second one gives up with
    ConnectionError. Reading through TLS first consumes the ticket (and
    hands any real data to the parser)."""

    def can_read(self, timeout: float = 0) -> bool:
        if self._sock is not None and isinstance(self._parser, _HiredisParser):
            self._parser.read_from_socket(timeout=timeout, raise_on_timeout=False)
        return bool(super().can_read(0))


class Client(ClientBase, SyncCommands):
    """A blocking client of a Disque (or disque-py) node or cluster.

        client = Client("disque://127.0.0.1:7711")
        job_id = client.add("emails", b"to: tom", retry=60)
        [job] = client.get("emails")
        client.ack(job.id)

    `url` names one node or several (settings.py); `nodes` adds addresses;
    `serializer` is "raw" (bytes, the default), "json", or an object with
    dumps() and loads(); `retry_after` is how long a lost node is left
    aside (seconds), `switch_after` how many jobs a consumer receives
    between two looks at which node produced them (routing.py); other
    keyword arguments go to every redis-py connection (`protocol=2`,
    `socket_timeout=...`, `parser_class=...`)."""

    def _setup(self, settings: Settings, codec: Serializer, clock: Callable[[], float]) -> None:
        super()._setup(settings, codec, clock)
        self._pools: dict[Address, ConnectionPool] = {}
        self._spare: dict[Address, Connection] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------ plumbing

    def _pool(self, address: Address) -> ConnectionPool:
        pool = self._pools.get(address)
        if pool is None:
            with self._lock:
                pool = self._pools.get(address)
                if pool is None:
                    cls = TlsConnection if self.settings.tls else Connection
                    pool = ConnectionPool(connection_class=cls,
                                          **self.settings.connection_options(address))
                    self._pools[address] = pool
        return pool

    def _batch_connection(self, address: Address) -> Connection:
        """A connection for a pipeline: the last pipeline's to this node,
        kept aside (redis-py's pool costs some 13 us a checkout, a pipeline
        of 16 adds 40), when its socket shows nothing (no close, no stray
        bytes) and no fork came between; else one from the pool."""
        spare = self._spare.pop(address, None)
        if spare is not None:
            if spare.pid == os.getpid() and is_quiet(spare):
                return spare
            spare.disconnect()
            self._pool(address).release(spare)
        return self._pool(address).get_connection()

    def _batch_done(self, address: Address, connection: Connection) -> None:
        """Keep a pipeline's connection aside for the next (not over TLS,
        whose socket cannot say it is quiet), else back to the pool."""
        if self.settings.tls or self._spare.setdefault(address, connection) is not connection:
            self._pool(address).release(connection)

    def _lost(self, address: Address) -> None:
        with self._lock:
            self.routes.failed(address)
            self._discovered = False

    def _discover(self) -> None:
        """HELLO on the best reachable node: learn the cluster's nodes."""
        error: BaseException | None = None
        call = commands.hello()
        for address in self.routes.discovery_order():
            try:
                reply = self._send(address, call.args)
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
            with self._lock:
                self.routes.learn(call.parse(reply, self.codec), address)
                self.routes.current = address
                self._discovered = True
            return
        raise self.routes.no_node_error() from error

    def _send(self, address: Address, args: tuple[commands.Arg, ...]) -> Any:
        pool = self._pool(address)
        connection = pool.get_connection()
        try:
            connection.send_command(*args)
            return connection.read_response()
        except LOST:
            connection.disconnect()
            raise
        finally:
            pool.release(connection)

    def _execute(self, call: commands.Call[T]) -> T:
        if not self._discovered:
            self._discover()
        failover = Failover(self.routes, call.retry_safe)
        while True:
            address = self.routes.for_jobs(call.job_ids) if call.job_ids else self.routes.current
            pool = self._pools.get(address) or self._pool(address)
            try:
                connection = pool.get_connection()
            except REFUSED as error:                     # AUTH or HELLO 3 refused
                raise translate(error) from error
            except LOST as error:                        # never sent: the next node?
                self._lost(address)
                if (failure := failover.unreachable(error)) is not None:
                    raise failure from error
                continue
            try:
                connection.send_command(*call.args)
                # The connection's socket timeout: the client's option, or
                # redis-py's own default (5 s) when none was given.
                if call.blocks_ms is None:
                    reply = connection.read_response()
                else:                                   # None: no timeout for this read
                    reply = connection.read_response(
                        timeout=blocking_wait_s(call, connection.socket_timeout))
            except REFUSED as error:
                pool.release(connection)
                if (failure := failover.refused(error)) is not None:
                    raise failure from error
                self._lost(address)
                continue
            except LOST as error:
                connection.disconnect()
                pool.release(connection)
                self._lost(address)
                if (failure := failover.lost(error)) is error:
                    raise
                if failure is not None:
                    raise failure from error
                continue
            pool.release(connection)
            result = call.parse(reply, self.codec)
            if call.hands_out:
                with self._lock:
                    self.routes.handed_out(cast(Sequence[Any], result))
            return result

    # --------------------------------------------------------------- scans

    def _pages(self, first: Callable[[int], commands.Call[ScanPage[T]]]) -> Iterator[T]:
        cursor = 0
        while True:
            page = self._execute(first(cursor))
            yield from page.items
            cursor = page.cursor
            if cursor == 0:
                return

    def qscan(self, count: int | None = None, minlen: int | None = None,
              maxlen: int | None = None, importrate: int | None = None) -> Iterator[str]:
        """Every queue of the current node (QSCAN, page by page), filtered
        by length and import rate when asked."""
        return self._pages(lambda cursor: commands.qscan(cursor, count, minlen, maxlen,
                                                         importrate))

    def jscan(self, count: int | None = None, queue: str | None = None,
              states: Sequence[str] = ()) -> Iterator[str]:
        """Every job ID of the current node (JSCAN), of one queue or in the
        given states when asked."""
        return self._pages(lambda cursor: commands.jscan(cursor, count, queue, states))

    def jscan_info(self, count: int | None = None, queue: str | None = None,
                   states: Sequence[str] = ()) -> Iterator[JobInfo]:
        """As jscan, each job as SHOW describes it (JSCAN ... REPLY ALL)."""
        return self._pages(lambda cursor: commands.jscan_info(cursor, count, queue, states))

    # ----------------------------------------------------------- lifecycle

    def pipeline(self) -> Pipeline:
        """Calls sent together to the current node: see Pipeline."""
        return Pipeline(self)

    def close(self) -> None:
        """Close every connection (the client connects again when used)."""
        for address in list(self._spare):
            spare = self._spare.pop(address, None)
            if spare is not None:
                self._pool(address).release(spare)
        for pool in list(self._pools.values()):
            pool.disconnect()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()


class Pipeline(SyncCommands):
    """Calls written in one go to the current node, their answers read after.

        with client.pipeline() as pipe:
            for n in range(1000):
                pipe.add("q", b"job %d" % n)
        job_ids = pipe.results

    Inside a pipeline each method queues its call and answers None; leaving
    the block (or `execute()`) sends them and keeps the answers, in order,
    in `results`. A call answered with an error has the error (a
    DisqueError) in its place, unless `execute(raise_on_error=True)`. Not
    sent again on a lost connection: some calls may have run."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.codec = client.codec
        self.calls: list[commands.Call[Any]] = []
        self.results: list[Any] = []

    def _execute(self, call: commands.Call[T]) -> T:
        self.calls.append(call)
        return None  # type: ignore[return-value]     # the answer comes with execute()

    def execute(self, raise_on_error: bool = False) -> list[Any]:
        """Send the queued calls; their answers (and errors), in order."""
        calls, self.calls = self.calls, []
        if not calls:
            return []
        client = self.client
        if not client._discovered:
            client._discover()
        address = client.routes.current
        connection = client._batch_connection(address)
        try:
            replies = exchange(connection, [call.args for call in calls])
        except BaseException as error:    # interrupted or lost: replies may be unread
            connection.disconnect()
            client._pool(address).release(connection)
            if isinstance(error, LOST):
                client._lost(address)
            raise
        client._batch_done(address, connection)
        codec = self.codec
        results = [translate(reply) if isinstance(reply, ResponseError) else
                   call.parse(reply, codec) for call, reply in zip(calls, replies)]
        for call, result in zip(calls, results):
            if call.hands_out and not isinstance(result, Exception):      # a GETJOB
                with client._lock:
                    client.routes.handed_out(result)
        self.results = results
        if raise_on_error:
            for result in results:
                if isinstance(result, Exception):
                    raise result
        return results

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if kind is None:
            self.execute()
