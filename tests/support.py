"""Real disque-server processes for tests, and the tools to talk to them.

ServerProcess starts `python -m disque_py` on a free loopback port in its
own directory, waits until it answers PING, and can be stopped politely,
killed with SIGKILL, SIGSTOPped and restarted on the same port and
directory. RawClient speaks RESP over a plain socket so tests can check
exact reply bytes. wait_for polls a condition until a deadline: tests never
sleep blindly.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import redis

HOST = "127.0.0.1"
START_TIMEOUT_S = 20
CLUSTER_PORT_OFFSET = 10000


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


_handed_out: set[int] = set()


def free_port() -> int:
    """A port free on loopback, whose cluster bus port (+10000) is free too.

    Ports handed out before in this test run are never handed out again: the
    servers of a cluster are started after all their ports are chosen, so a
    probe alone could give two of them the same port (or one's client port as
    another's bus port)."""
    for _ in range(200):
        with socket.socket() as probe:
            probe.bind((HOST, 0))
            port = probe.getsockname()[1]
        bus_port = port + CLUSTER_PORT_OFFSET
        if bus_port > 65535 or {port, bus_port} & _handed_out:
            continue
        with socket.socket() as bus:
            try:
                bus.bind((HOST, bus_port))
            except OSError:
                continue
        _handed_out.update((port, bus_port))
        return port
    raise RuntimeError("no free port pair found")


class ServerProcess:
    """One disque-server process under test."""

    def __init__(self, directory: Path, port: int | None = None,
                 args: list[str] | None = None, config_text: str | None = None) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.args = list(args or [])
        self.config_path = None
        if config_text is not None:
            self.config_path = self.dir / "disque.conf"
            self.config_path.write_text(config_text)
        self.proc: subprocess.Popen | None = None
        self.log_path = self.dir / "server.log"
        self._clients: list = []

    @property
    def pid(self) -> int:
        return self.proc.pid

    def command_line(self) -> list[str]:
        cmd = [sys.executable, "-m", "disque_py"]
        if self.config_path is not None:
            cmd.append(str(self.config_path))
        cmd += ["--port", str(self.port), "--bind", HOST, "--dir", str(self.dir),
                "--logfile", str(self.log_path)]
        return cmd + self.args

    def start(self, wait: bool = True) -> "ServerProcess":
        self.proc = subprocess.Popen(self.command_line(), stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, cwd=self.dir)
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"disque-server exited with {self.proc.returncode}:\n"
                                     f"{self.stderr_text()}\n{self.log_text()}")
            try:
                with socket.create_connection((HOST, self.port), timeout=0.5) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(64).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            time.sleep(0.02)
        raise AssertionError(f"disque-server did not answer PING within {START_TIMEOUT_S}s:\n"
                             f"{self.log_text()}")

    def client(self, **kwargs) -> redis.Redis:
        """A redis-py client (default: plain redis.Redis, as users write it)."""
        client = redis.Redis(host=HOST, port=self.port, **kwargs)
        self._clients.append(client)
        return client

    def raw(self) -> "RawClient":
        client = RawClient(self.port)
        self._clients.append(client)
        return client

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return "(no log)"

    def stderr_text(self) -> str:
        if self.proc is None or self.proc.stderr is None or self.proc.poll() is None:
            return ""
        return self.proc.stderr.read().decode(errors="replace")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 10) -> int:
        """SIGTERM and wait (a clean shutdown)."""
        self._close_clients()
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def kill(self) -> None:
        """kill -9: no chance to clean up."""
        self._close_clients()
        if self.alive():
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def pause(self) -> None:
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.proc.pid, signal.SIGCONT)

    def restart(self) -> "ServerProcess":
        if self.alive():
            self.stop()
        return self.start()

    def rss_bytes(self) -> int:
        with open(f"/proc/{self.proc.pid}/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

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


def encode_command(*args) -> bytes:
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        if isinstance(arg, str):
            arg = arg.encode()
        elif isinstance(arg, int):
            arg = b"%d" % arg
        parts.append(b"$%d\r\n%b\r\n" % (len(arg), arg))
    return b"".join(parts)


# ------------------------------------------------------------ typed replies

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
