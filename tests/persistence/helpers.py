"""Tools shared by the persistence tests: load streams, an AOF reader of our
own, the check-aof command, INFO over raw sockets, refused starts.

The AOF reader here is deliberately independent of disque_py.persistence:
the tests find record boundaries with it, so an offset reported by the
server or by check-aof is checked against bytes we located ourselves, not
against the product's own arithmetic.

Load streams use RawClient connections that the ServerProcess does not
know about, so ServerProcess.kill() does not close them first: the
SIGKILL lands while commands are in flight.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import NamedTuple

import redis

from disque_py.engine import RECORD_OK, aof_record_at
from tests.support import HOST, RawClient, ServerProcess, encode_command, wait_for

AOF_NAME = "disque.aof"
ALWAYS = ["--appendonly", "yes", "--appendfsync", "always"]
EVERYSEC = ["--appendonly", "yes", "--appendfsync", "everysec"]
REPLY_TIMEOUT_S = 5.0
BODY = b"x" * 100


# ------------------------------------------------------------------ the file

class Record(NamedTuple):
    offset: int          # first byte of the record
    end: int             # first byte after it
    argv: list[bytes]
    arg_offsets: list[int]   # where each argument's bytes start (version 2: see parse_records)


def aof_path(server: ServerProcess) -> Path:
    return server.dir / AOF_NAME


def data_end(data: bytes) -> int:
    """Length without the trailing zero bytes (space reserved by fallocate)."""
    return len(data.rstrip(b"\0"))


def parse_records(data: bytes) -> list[Record]:
    """Every whole record of an AOF, in order: the header (a RESP array),
    then, by its version, RESP arrays of bulk strings (version 1) or binary
    records (version 2: kind, length, payload, checksum), those given in
    version 1's form (LOADJOB job, DELJOB id, DEDUP queue key id ms,
    UNDEDUP queue key id; arg_offsets: where each field's bytes are).

    Stops at the end of the data, at reserved zero bytes, or at the first
    record that is not whole; never raises."""
    records: list[Record] = []
    pos, size = 0, data_end(data)
    binary = False
    while pos < size:
        record = _read_binary(data, pos) if binary else _read_record(data, pos, size)
        if record is None:
            break
        if not records:
            binary = record.argv == [b"DQPAOF", b"2"]
        records.append(record)
        pos = record.end
    return records


def _read_binary(data: bytes, start: int) -> Record | None:
    """A version-2 record at start (its checksum may end in zero bytes: it is
    judged against the whole data, not the data's end)."""
    head = start + 5
    if head > len(data):
        return None
    kind, length = data[start], int.from_bytes(data[start + 1:head], "big")
    end = head + length + 4
    # The checksum (XXH3) is the engine's to compute; the fields are read here.
    if end > len(data) or aof_record_at(data, start, len(data))[0] != RECORD_OK:
        return None
    payload = data[head:end - 4]
    if kind == ord("J"):
        return Record(start, end, [b"LOADJOB", payload], [start, head])
    if kind == ord("D"):
        return Record(start, end, [b"DELJOB", payload], [start, head])
    if kind not in b"KU":
        return None
    queue_len = int.from_bytes(payload[48:52], "big")
    queue_at = head + 52
    key_at = queue_at + queue_len
    argv = [b"DEDUP" if kind == ord("K") else b"UNDEDUP", data[queue_at:key_at],
            data[key_at:end - 4], payload[8:48]]
    offsets = [start, queue_at, key_at, head + 8]
    if kind == ord("K"):
        argv.append(b"%d" % int.from_bytes(payload[:8], "big"))
        offsets.append(head)
    return Record(start, end, argv, offsets)


def _read_record(data: bytes, start: int, size: int) -> Record | None:
    line_end = data.find(b"\r\n", start, size)
    if line_end < 0 or data[start:start + 1] != b"*":
        return None
    count = int(data[start + 1:line_end])
    pos = line_end + 2
    argv, offsets = [], []
    for _ in range(count):
        line_end = data.find(b"\r\n", pos, size)
        if line_end < 0 or data[pos:pos + 1] != b"$":
            return None
        length = int(data[pos + 1:line_end])
        pos = line_end + 2
        if pos + length + 2 > size or data[pos + length:pos + length + 2] != b"\r\n":
            return None
        offsets.append(pos)
        argv.append(data[pos:pos + length])
        pos += length + 2
    return Record(start, pos, argv, offsets)


def loadjob_records(data: bytes) -> list[Record]:
    return [r for r in parse_records(data) if r.argv[0] == b"LOADJOB"]


def job_id_of(record: Record) -> bytes:
    """The job ID: the first 40 bytes of a LOADJOB record's serialized job."""
    return record.argv[1][:40]


# ---------------------------------------------------------------- check-aof

def check_aof_command(path: Path, fix: bool = False) -> list[str]:
    script = Path(sys.executable).with_name("disque-py")
    base = [str(script)] if script.exists() else [
        sys.executable, "-c", "from disque_py.tools.cli import main; main()"]
    return base + ["check-aof"] + (["--fix"] if fix else []) + [str(path)]


def check_aof(path: Path, fix: bool = False) -> subprocess.CompletedProcess:
    return subprocess.run(check_aof_command(path, fix), capture_output=True, text=True,
                          timeout=60)


# -------------------------------------------------------------- server talk

def call(raw: RawClient, *args) -> bytes:
    """One command; an AssertionError (not a hang) if no reply comes in time."""
    try:
        return raw.call(*args)
    except socket.timeout:
        raise AssertionError(f"no reply to {args[0]!r} within {raw.sock.gettimeout()}s "
                             f"(the server holds it back)") from None


def raw_client(server: ServerProcess, timeout: float = REPLY_TIMEOUT_S) -> RawClient:
    """A RawClient the ServerProcess does not close on kill()."""
    return RawClient(server.port, timeout=timeout)


def parse_info(text: bytes | str) -> dict[str, str]:
    if isinstance(text, bytes):
        text = text.decode()
    fields = {}
    for line in text.splitlines():
        if ":" in line and not line.startswith("#"):
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    return fields


def raw_info(server: ServerProcess, section: str = "") -> dict[str, str]:
    client = raw_client(server)
    try:
        reply = call(client, "INFO", *([section] if section else []))
    finally:
        client.close()
    return parse_info(reply.split(b"\r\n", 1)[1])


def info(server: ServerProcess, section: str = "") -> dict:
    client = redis.Redis(host=HOST, port=server.port, socket_timeout=REPLY_TIMEOUT_S)
    try:
        return client.execute_command("INFO", *([section] if section else []))
    finally:
        client.close()


def wait_rewrite_done(server: ServerProcess, timeout: float = 30) -> dict:
    return wait_for(lambda: (lambda i: i if i["aof_rewrite_in_progress"] == 0 else None)(
        info(server, "persistence")), timeout, message="the AOF rewrite to finish")


def show_all(server: ServerProcess, ids) -> dict[bytes, dict | None]:
    """SHOW for every ID (pipelined): id -> {field: value} or None."""
    client = redis.Redis(host=HOST, port=server.port, socket_timeout=30)
    try:
        out: dict[bytes, dict | None] = {}
        ids = list(ids)
        for first in range(0, len(ids), 2000):
            chunk = ids[first:first + 2000]
            pipe = client.pipeline(transaction=False)
            for job_id in chunk:
                pipe.execute_command("SHOW", job_id)
            for job_id, reply in zip(chunk, pipe.execute()):
                out[job_id] = None if reply is None else dict(zip(reply[::2], reply[1::2]))
        return out
    finally:
        client.close()


def add_jobs(server: ServerProcess, count: int, queue: str = "q", *options,
             body: bytes = BODY) -> list[bytes]:
    """ADDJOB count times, pipelined; returns the IDs in order."""
    client = redis.Redis(host=HOST, port=server.port, socket_timeout=60)
    try:
        ids: list[bytes] = []
        for first in range(0, count, 2000):
            pipe = client.pipeline(transaction=False)
            for _ in range(min(2000, count - first)):
                pipe.execute_command("ADDJOB", queue, body, 0, *options)
            ids += pipe.execute()
        return ids
    finally:
        client.close()


def refused_start(server: ServerProcess, timeout: float = 30) -> int:
    """Start a server that should refuse to start; its exit code."""
    server.start(wait=False)
    try:
        return server.proc.wait(timeout)
    except subprocess.TimeoutExpired:
        server.kill()
        raise AssertionError(f"the server started (or hung) instead of refusing:\n"
                             f"{server.log_text()[-2000:]}") from None


# ------------------------------------------------------------------- streams

class Stream:
    """Client threads sending a steady stream of commands over raw sockets.

    Each thread loops until stopped or until its connection fails (the
    server was killed). `acked` holds (job id, monotonic time the reply
    arrived) for every ADDJOB that returned an ID; `errors` error replies.
    """

    def __init__(self, port: int, queue: str, threads: int = 3, pipelined: int = 1,
                 batch: int = 16, options: tuple = (), body: bytes = BODY,
                 pace: float = 0.0) -> None:
        self.port = port
        self.pace = pace             # seconds between a thread's sends (0: flat out)
        self.queue = queue
        self.options = options
        self.body = body
        self.batch = batch
        self.acked: list[tuple[bytes, float]] = []
        self.sent = 0
        self.errors: list[bytes] = []
        self.failures: list[BaseException] = []
        self.started_at = 0.0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._sequential, daemon=True)
                         for _ in range(threads)]
        self._threads += [threading.Thread(target=self._pipelined, daemon=True)
                          for _ in range(pipelined)]

    def _command(self) -> bytes:
        return encode_command("ADDJOB", self.queue, self.body, 0, *self.options)

    def _record(self, reply: bytes) -> None:
        with self._lock:
            if reply.startswith(b"+"):
                self.acked.append((reply[1:-2], time.monotonic()))
            else:
                self.errors.append(reply)

    def _sequential(self) -> None:
        self._run(1)

    def _pipelined(self) -> None:
        self._run(self.batch)

    def _run(self, batch: int) -> None:
        try:
            client = RawClient(self.port, timeout=30)
        except OSError as error:
            self.failures.append(error)
            return
        payload = self._command() * batch
        try:
            while not self._stop.is_set():
                with self._lock:
                    self.sent += batch
                client.send(payload)
                for _ in range(batch):
                    self._record(client.read_reply())
                if self.pace:
                    self._stop.wait(self.pace)
        except (ConnectionError, OSError):
            pass                      # the server went away: that is the point
        finally:
            client.close()

    def start(self) -> "Stream":
        self.started_at = time.monotonic()
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self.join()

    def join(self, timeout: float = 30) -> None:
        for thread in self._threads:
            thread.join(timeout)
            assert not thread.is_alive(), "a load thread did not finish"

    @property
    def ids(self) -> list[bytes]:
        with self._lock:
            return [job_id for job_id, _ in self.acked]

    def count(self) -> int:
        return len(self.acked)

    def span(self) -> float:
        """Seconds between the first and the last acknowledged job."""
        with self._lock:
            return self.acked[-1][1] - self.acked[0][1] if len(self.acked) > 1 else 0.0


class Consumers:
    """Threads that GETJOB NOHANG and ACKJOB what they got; `acked` holds the
    IDs whose ACKJOB returned 1, `taken` those fetched (acked or not)."""

    def __init__(self, port: int, queues: list[str], threads: int = 2) -> None:
        self.port = port
        self.queues = queues
        self.acked: list[bytes] = []
        self.taken: list[bytes] = []
        self.errors: list[bytes] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, daemon=True) for _ in range(threads)]

    def _run(self) -> None:
        client = redis.Redis(host=HOST, port=self.port, socket_timeout=30)
        try:
            while not self._stop.is_set():
                got = client.execute_command("GETJOB", "NOHANG", "COUNT", 5, "FROM",
                                             *self.queues)
                if not got:
                    continue
                ids = [job[1] for job in got]
                with self._lock:
                    self.taken += ids
                if client.execute_command("ACKJOB", *ids) == len(ids):
                    with self._lock:
                        self.acked += ids
        except redis.ResponseError as error:
            self.errors.append(str(error).encode())
        except (redis.ConnectionError, OSError):
            pass
        finally:
            client.close()

    def start(self) -> "Consumers":
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(30)
            assert not thread.is_alive(), "a consumer thread did not finish"


def file_size(path: Path) -> int:
    return os.path.getsize(path)


# ------------------------------------------------------- the writer, in process

WRITER_TIMEOUT_S = 5.0


class RecordSource:
    """A real node whose AofLog (`log`) an AofWriter under test takes its
    records from: note() makes a job there, as ADDJOB does, and returns
    the record the writer will write for it."""

    def __init__(self) -> None:
        from disque_py.base.clock import FakeClock
        from disque_py.node.node import Node
        self.node = Node(b"5e" * 20, FakeClock(seed=5), id_seed=b"writer-tests")
        self.node.aof_enabled = True
        self.log = self.node.aof

    def note(self, body: bytes = BODY) -> bytes:
        from disque_py.engine import aof_job_record
        return aof_job_record(self.node.add_job(b"q", body, 1, 0, 5, 3600, 0, False))


def open_writer(loop, tmp_path, policy: str, ops, source: RecordSource, latency=None):
    """An AofWriter on a fresh file in tmp_path, open and appending the
    records noted in `source`."""
    from disque_py.persistence.aof import AofWriter
    writer = AofWriter(str(tmp_path / AOF_NAME), policy, loop, source.log, ops, latency=latency)
    writer.open(0)
    return writer


def run_loop_until(loop, condition) -> None:
    """Run the loop (fsync results arrive through it) until condition()."""
    async def poll():
        deadline = loop.time() + WRITER_TIMEOUT_S
        while not condition():
            assert loop.time() < deadline, "timed out waiting for the writer"
            await asyncio.sleep(0.005)
    loop.run_until_complete(poll())
