"""Real disque-server processes for tests, and the tools to talk to them.

ServerProcess is the project's (disque_py/tools/loopback.py: a free
loopback port, its own directory, PING to know it is up; stopped politely,
killed with SIGKILL, SIGSTOPped, restarted on the same port and directory)
with the clients a test opens to it, closed before it stops. RawClient speaks RESP over a plain socket so tests can check
exact reply bytes. wait_for polls a condition until a deadline: tests never
sleep blindly.
"""

from __future__ import annotations

import socket
import time

import redis

from disque_py.cluster.nodes import BUS_PORT_OFFSET
from disque_py.formats.resp import encode_command
from disque_py.tools import loopback
from disque_py.tools.loopback import HOST, free_port  # noqa: F401 (tests import them from here)

CLUSTER_PORT_OFFSET = BUS_PORT_OFFSET


def wait_for(condition, timeout: float = 10.0, interval: float = 0.02, message: str = ""):
    """Poll `condition` until it returns a truthy value; fail after `timeout`."""
    deadline = time.monotonic() + timeout
    last_error = None
    while True:
        try:
            value = condition()
            if value:
                return value
        except Exception as error:  # the condition may fail while things settle
            last_error = error
        if time.monotonic() > deadline:
            detail = f" (last error: {last_error!r})" if last_error else ""
            raise AssertionError(f"timed out after {timeout}s waiting for "
                                 f"{message or condition}{detail}")
        time.sleep(interval)


class ServerProcess(loopback.ServerProcess):
    """One disque-server process under test, and the clients tests open to it
    (closed before it stops)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._clients: list = []

    def client(self, **kwargs) -> redis.Redis:
        """A redis-py client (default: plain redis.Redis, as users write it)."""
        client = redis.Redis(host=HOST, port=self.port, **kwargs)
        self._clients.append(client)
        return client

    def raw(self) -> "RawClient":
        client = RawClient(self.port)
        self._clients.append(client)
        return client

    def before_stop(self) -> None:
        self._close_clients()

    def _close_clients(self) -> None:
        for client in self._clients:
            try:
                client.close()
            except Exception:
                pass
        self._clients.clear()


class RawClient:
    """RESP over a plain socket: send exact bytes, read exact reply bytes."""

    def __init__(self, port: int, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection((HOST, port), timeout=timeout)
        self._pending = b""

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def call(self, *args) -> bytes:
        """Send one command (multibulk), return the raw bytes of its reply."""
        self.send(encode_command(*args))
        return self.read_reply()

    def read_reply(self) -> bytes:
        """The raw bytes of exactly one reply."""
        data = self._pending
        while True:
            end = reply_length(data, 0)
            if end is not None:
                self._pending = data[end:]
                return data[:end]
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError(f"connection closed; got {data!r}")
            data += chunk

    def read_all(self, timeout: float = 1.0) -> bytes:
        """Everything the server sends until it closes (or `timeout` of silence)."""
        self.sock.settimeout(timeout)
        data = self._pending
        self._pending = b""
        try:
            while True:
                chunk = self.sock.recv(65536)
                if not chunk:
                    break
                data += chunk
        except socket.timeout:
            pass
        return data

    def is_closed(self, timeout: float = 2.0) -> bool:
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except socket.timeout:
            return False
        except ConnectionResetError:
            return True

    def close(self) -> None:
        self.sock.close()


def reply_length(data: bytes, pos: int) -> int | None:
    """End offset of the complete reply starting at `pos`, or None if partial."""
    newline = data.find(b"\r\n", pos)
    if newline < 0:
        return None
    kind, header = data[pos:pos + 1], data[pos + 1:newline]
    end = newline + 2
    if kind in (b"+", b"-", b":", b"_", b"#", b","):
        return end
    if kind in (b"$", b"="):
        size = int(header)
        if size < 0:
            return end
        return end + size + 2 if len(data) >= end + size + 2 else None
    if kind in (b"*", b"%", b"~"):
        count = int(header) * (2 if kind == b"%" else 1)
        for _ in range(max(count, 0)):
            end = reply_length(data, end)
            if end is None:
                return None
        return end
    raise AssertionError(f"not a RESP reply: {data[pos:pos + 40]!r}")


class Status(bytes):
    """A +status reply (as opposed to a $bulk string)."""


class Error(bytes):
    """A -error reply."""


class NullArray:
    """The *-1 reply."""

    def __repr__(self) -> str:
        return "NullArray"


NULL_ARRAY = NullArray()


def parse(data: bytes):
    """One RESP2 reply, typed: Status, Error, int, bytes, None ($-1),
    NULL_ARRAY (*-1) or list. The whole input must be one reply."""
    value, end = _parse(data, 0)
    assert end == len(data), f"trailing bytes after reply: {data[end:]!r}"
    return value


def _parse(data: bytes, pos: int):
    newline = data.index(b"\r\n", pos)
    kind, header, end = data[pos:pos + 1], data[pos + 1:newline], newline + 2
    if kind == b"+":
        return Status(header), end
    if kind == b"-":
        return Error(header), end
    if kind == b":":
        return int(header), end
    if kind == b"$":
        size = int(header)
        if size < 0:
            return None, end
        assert data[end + size:end + size + 2] == b"\r\n"
        return data[end:end + size], end + size + 2
    if kind == b"*":
        count = int(header)
        if count < 0:
            return NULL_ARRAY, end
        items = []
        for _ in range(count):
            item, end = _parse(data, end)
            items.append(item)
        return items, end
    raise AssertionError(f"not RESP2: {data[pos:pos + 20]!r}")


def bulk(value) -> bytes:
    if isinstance(value, str):
        value = value.encode()
    return b"$%d\r\n%b\r\n" % (len(value), value)
