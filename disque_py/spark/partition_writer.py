"""Writing rows as jobs, one Spark partition at a time (no Spark needed here).

A PartitionWriter owns one connection to one node and pushes ADDJOBs in
pipelined batches, keeping up to `max_in_flight` batches on the wire (the
server lets pipelined ADDJOBs wait for their copies together, so one
connection is enough). Every reply is read and checked:

  * a job ID: the row is in the queue (with its copies, unless ASYNC);
  * NOREPL, LEAVING, LOADING or a lost connection: the rows still
    unanswered are sent again after a backoff, on another node when one is
    known (HELLO lists them with their priority; leaving nodes are skipped);
  * anything else (OOM, MAXLEN, PAUSED, a syntax error): the row cannot be
    added; the write fails with WriteFailed naming the rows and the reason.

Nothing is dropped silently. A row is at least once in the queue when the
write succeeds; it can be there twice if a connection broke after the node
took it but before the reply arrived, or if Spark re-ran the task. Each job
carries a row key so consumers can recognise such repeats. With `dedup`
the row key also goes out as ADDJOB's DEDUP key, so a row sent again to the
node that took it is answered with the first job's ID, not made twice;
`follow_cluster` False keeps the writer on the nodes it was given (no HELLO,
no moving elsewhere), which is what makes that hold for a retry.

The link is a plain socket read with hiredis rather than a redis-py
connection: the writer reads one reply per row, redis-py spends ~2.5 us on
each and rewrites error prefixes (OOM, LOADING) into exception classes,
while the exact error text is what the task must report.
"""

from __future__ import annotations

import random
import socket
import time
from collections import deque
from dataclasses import dataclass, field

import hiredis

from disque_py.formats.resp import encode_bulk, encode_command

RETRYABLE_PREFIXES = ("NOREPL", "LEAVING", "LOADING")
LEAVING_PRIORITY = 100
BACKOFF_START_S = 0.05
BACKOFF_MAX_S = 2.0
CONNECT_TIMEOUT_S = 5.0
RECV_BYTES = 256 * 1024
REPORT_ROWS = 10


class WriteFailed(Exception):
    """Rows that could not be added, and why (the task must fail)."""


@dataclass
class WriteOptions:
    queue: str
    nodes: list[str]
    replicate: int | None = None
    ttl: int | None = None
    retry: int | None = None
    delay: int | None = None
    maxlen: int | None = None
    asynchronous: bool = False
    priority: int | None = None
    dedup: bool = False              # the row key is ADDJOB's DEDUP key
    follow_cluster: bool = True      # learn the cluster (HELLO) and move on refusals
    timeout_ms: int = 5000
    batch_size: int = 1000
    max_in_flight: int = 4
    max_attempts: int = 8
    password: str | None = None
    socket_timeout_s: float = 30.0

    def addjob_framing(self) -> tuple[bytes, bytes]:
        """The bytes of an ADDJOB before and after its body."""
        tail: list = [b"%d" % self.timeout_ms]
        for name, value in ((b"REPLICATE", self.replicate), (b"TTL", self.ttl),
                            (b"RETRY", self.retry), (b"DELAY", self.delay),
                            (b"MAXLEN", self.maxlen), (b"PRIORITY", self.priority)):
            if value is not None:
                tail += [name, b"%d" % value]
        if self.asynchronous:
            tail.append(b"ASYNC")
        if self.dedup:
            tail.append(b"DEDUP")                 # the row's key follows it
        head = b"*%d\r\n%b%b" % (len(tail) + 3 + self.dedup, encode_bulk(b"ADDJOB"),
                                 encode_bulk(self.queue.encode()))
        return head, b"".join(map(encode_bulk, tail))


@dataclass
class WriteStats:
    added: int = 0
    retried: int = 0
    failed: int = 0
    nodes_used: set = field(default_factory=set)


class NodeLink:
    """One RESP connection: raw bytes out, replies in one at a time."""

    def __init__(self, address: str, password: str | None, timeout_s: float) -> None:
        host, _, port = address.rpartition(":")
        self.sock = socket.create_connection((host or "127.0.0.1", int(port)),
                                             timeout=CONNECT_TIMEOUT_S)
        self.sock.settimeout(timeout_s)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.reader = hiredis.Reader()
        self.buffer = bytearray(RECV_BYTES)
        if password is not None:
            self.call("AUTH", password)

    def call(self, *args):
        self.send(encode_command(*args))
        reply = self.reply()
        if isinstance(reply, hiredis.ReplyError):
            raise ConnectionError(f"{args[0]} refused: {reply}")
        return reply

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def reply(self):
        """The next reply (a hiredis.ReplyError for an error reply)."""
        reader = self.reader
        reply = reader.gets()
        while reply is False:
            count = self.sock.recv_into(self.buffer)
            if not count:
                raise ConnectionError("connection closed by the node")
            reader.feed(self.buffer, 0, count)
            reply = reader.gets()
        return reply

    def close(self) -> None:
        self.sock.close()


LINK_ERRORS = (OSError, hiredis.ProtocolError)


class PartitionWriter:
    """Push one partition's (key, body) pairs to the cluster."""

    def __init__(self, options: WriteOptions, partition_id: int) -> None:
        self.options = options
        self.partition_id = partition_id
        self.stats = WriteStats()
        self._head, self._tail = options.addjob_framing()
        self._candidates = list(options.nodes)
        self._priority: dict[str, int] = {}
        self._rehomed = False
        self._bad: set[str] = set()
        self._link: NodeLink | None = None
        self._node = ""
        self._errors: list[str] = []
        self._rng = random.Random(partition_id)
        self._inflight: deque[deque] = deque()   # sent batches; rows leave as answered
        self._retry: list = []                   # (key, command) to send again
        self._failures: list[tuple[str, str]] = []
        self._attempt = 0
        self._last_refusal = ""

    # ------------------------------------------------------------ nodes

    def _connect(self) -> None:
        """Connect to the best node, starting from this partition's share of
        the given ones, and learn the rest of the cluster from HELLO. When
        none answers, wait and try them all again (a node may be restarting)."""
        for round_number in range(self.options.max_attempts):
            if self._try_nodes():
                return
            time.sleep(min(BACKOFF_START_S * (2 ** round_number), BACKOFF_MAX_S))
            self._bad.clear()
        raise WriteFailed("no node reachable after %d rounds: %s"
                          % (self.options.max_attempts, "; ".join(self._errors[-5:])))

    def _try_nodes(self) -> bool:
        for address in self._node_order():
            link = self._open(address)
            if link is None:
                continue
            share = self._node_order()[0]
            if share != address and not self._rehomed:
                # HELLO showed the cluster: this partition's share is elsewhere.
                self._rehomed = True
                better = self._open(share)
                if better is not None:
                    link.close()
                    link, address = better, share
            self._link, self._node = link, address
            self.stats.nodes_used.add(address)
            return True
        return False

    def _open(self, address: str) -> NodeLink | None:
        """A link to `address` after HELLO, or None (unreachable, or leaving
        while another node is worth trying)."""
        link = None
        try:
            link = NodeLink(address, self.options.password, self.options.socket_timeout_s)
            hello = link.call("HELLO") if self.options.follow_cluster else None
        except LINK_ERRORS as error:
            if link is not None:
                link.close()
            self._errors.append(f"{address}: {error}")
            self._bad.add(address)
            return None
        if hello is not None and self._learn(address, hello):
            link.close()
            return None
        return link

    def _node_order(self) -> list[str]:
        """Healthy nodes first, the best-priority ones spread over partitions
        by partition id; nodes that failed last."""
        priority = self._priority
        healthy = sorted((n for n in self._candidates if n not in self._bad),
                         key=lambda n: (priority.get(n, 1), n))
        failed = [n for n in self._candidates if n in self._bad]
        if not healthy:
            return failed
        best = [n for n in healthy if priority.get(n, 1) == priority.get(healthy[0], 1)]
        start = self.partition_id % len(best)
        return best[start:] + best[:start] + healthy[len(best):] + failed

    def _learn(self, address: str, hello) -> bool:
        """Add the nodes HELLO lists; True when the node we asked is leaving
        and another one is still worth trying."""
        myself = hello[1]
        leaving = False
        for node_id, ip, port, priority in hello[2:]:
            known = f"{ip.decode() or '127.0.0.1'}:{int(port)}"
            self._priority[known] = int(priority)
            if known not in self._candidates:
                self._candidates.append(known)
            if int(priority) >= LEAVING_PRIORITY:
                self._bad.add(known)
                leaving |= node_id == myself
        if leaving:
            self._bad.add(address)
        return leaving and any(n not in self._bad for n in self._candidates)

    def close(self) -> None:
        if self._link is not None:
            self._link.close()
            self._link = None

    def _drop_node(self) -> None:
        self.close()
        self._bad.add(self._node)
        if len(self._bad) >= len(self._candidates):
            self._bad.clear()          # every node failed once: try them all again

    # ------------------------------------------------------------ writing

    def write(self, rows) -> WriteStats:
        """rows: iterable of (key, body bytes). Returns the counts; raises
        WriteFailed if some rows cannot be added."""
        try:
            batch: list = []
            for row in rows:
                batch.append(row)
                if len(batch) >= self.options.batch_size:
                    self.send(batch)
                    batch = []
            self.send(batch)
            return self.finish()
        finally:
            self.close()

    def send(self, rows: list) -> None:
        """Put (key, body) rows on the wire as one batch (at most
        max_in_flight unanswered); finish() reads what is left."""
        if not rows:
            return
        head, tail = self._head, self._tail
        if self.options.dedup:
            commands = [(key, b"%b$%d\r\n%b\r\n%b$%d\r\n%b\r\n"
                         % (head, len(body), body, tail, len(key_bytes), key_bytes))
                        for key, body in rows for key_bytes in (key.encode(),)]
        else:
            commands = [(key, b"%b$%d\r\n%b\r\n%b" % (head, len(body), body, tail))
                        for key, body in rows]
        self._send(commands)

    def finish(self) -> WriteStats:
        """Wait for every reply (sending refused rows again); the counts, or
        WriteFailed naming the rows that could not be added."""
        try:
            while self._inflight or self._retry:
                if self._inflight:
                    self._read_oldest()
                else:
                    self._send_retries()
        finally:
            self.close()
        return self._result()

    def _result(self) -> WriteStats:
        failures = self._failures
        if not failures:
            return self.stats
        self.stats.failed += len(failures)
        shown = ", ".join(f"{key}: {why}" for key, why in failures[:REPORT_ROWS])
        raise WriteFailed(f"{len(failures)} rows could not be added to queue "
                          f"{self.options.queue!r} (partition {self.partition_id}): {shown}"
                          + (" ..." if len(failures) > REPORT_ROWS else ""))

    def _send(self, rows: list) -> None:
        """Put a batch on the wire, keeping at most max_in_flight unanswered."""
        while len(self._inflight) >= self.options.max_in_flight:
            self._read_oldest()
        if self._link is None:
            self._connect()
        self._inflight.append(deque(rows))
        try:
            self._link.send(b"".join([command for _, command in rows]))
        except LINK_ERRORS as error:
            self._connection_lost(error)

    def _read_oldest(self) -> None:
        batch = self._inflight[0]
        reply = self._link.reply
        stats = self.stats
        try:
            while batch:
                answer = reply()
                if type(answer) is bytes and answer[:2] == b"D-":
                    stats.added += 1
                    self._attempt = 0
                else:
                    self._refused(batch[0], answer)
                batch.popleft()
        except LINK_ERRORS as error:
            self._connection_lost(error)
            return
        self._inflight.popleft()

    def _refused(self, row: tuple, answer) -> None:
        message = str(answer) if isinstance(answer, hiredis.ReplyError) \
            else f"unexpected reply {answer!r}"
        if message.startswith(RETRYABLE_PREFIXES):
            self._retry.append(row)
            self._last_refusal = f"{self._node}: {message}"
            self._bad.add(self._node)       # another node may do better: go there next
        else:
            self._failures.append((row[0], message))

    def _connection_lost(self, error: Exception) -> None:
        """Every unanswered row goes again, to another node if possible
        (it may already be in the queue: at least once)."""
        self._last_refusal = f"{self._node}: connection lost ({error})"
        self._errors.append(self._last_refusal)
        for batch in self._inflight:
            self._retry.extend(batch)
        self._inflight.clear()
        self._drop_node()

    def _send_retries(self) -> None:
        self._attempt += 1
        rows, self._retry = self._retry, []
        if self._attempt > self.options.max_attempts:
            last = self._last_refusal
            self._failures.extend((key, f"not added after {self.options.max_attempts} "
                                   f"attempts (last: {last})") for key, _ in rows)
            return
        self.stats.retried += len(rows)
        time.sleep(min(BACKOFF_START_S * (2 ** self._attempt), BACKOFF_MAX_S)
                   * (0.5 + self._rng.random()))
        if self._link is not None and self._node in self._bad:
            self._drop_node()
        for start in range(0, len(rows), self.options.batch_size):
            self._send(rows[start:start + self.options.batch_size])
