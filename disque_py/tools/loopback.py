"""disque-server processes on loopback, for the tools, the tests and the
benchmarks: free ports, and a server started, waited for, stopped.

ServerProcess starts `python -m disque_py` on 127.0.0.1 only, in its own
directory (its nodes.conf, AOF and server.log), waits until it answers
PING, and stops it politely (SIGTERM), kills it (SIGKILL), pauses it
(SIGSTOP) or restarts it on the same port and directory. Rules kept:
servers listen on 127.0.0.1 only; signals go to the PID recorded here,
never to a name; a port is handed out once per process.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from disque_py.cluster.nodes import BUS_PORT_OFFSET, MAX_CLIENT_PORT

HOST = "127.0.0.1"
START_TIMEOUT_S = 20
STOP_TIMEOUT_S = 10
PORT_PROBES = 500

_handed_out: set[int] = set()


def free_port() -> int:
    """A port free on loopback, whose cluster bus port (+10000) is free too.

    A port handed out before by this process is never handed out again:
    the servers of a cluster are started after all their ports are chosen,
    so a probe alone could give two of them the same port (or one's client
    port as another's bus port)."""
    for _ in range(PORT_PROBES):
        with socket.socket() as probe:
            probe.bind((HOST, 0))
            port = probe.getsockname()[1]
        bus_port = port + BUS_PORT_OFFSET
        if port > MAX_CLIENT_PORT or {port, bus_port} & _handed_out:
            continue
        with socket.socket() as bus:
            try:
                bus.bind((HOST, bus_port))
            except OSError:
                continue
        _handed_out.update((port, bus_port))
        return port
    raise RuntimeError("no free pair of loopback ports (client, client + 10000)")


class ServerProcess:
    """One disque-server process."""

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

    def wait_ready(self, timeout: float = START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
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
        raise AssertionError(f"disque-server did not answer PING within {timeout}s:\n"
                             f"{self.log_text()}")

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

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM and wait (a clean shutdown); SIGKILL after `timeout`."""
        self.before_stop()
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
        self.before_stop()
        if self.alive():
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def before_stop(self) -> None:
        """What a subclass closes before its server goes (its clients)."""

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
