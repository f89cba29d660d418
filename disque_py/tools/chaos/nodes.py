"""The chaos run's disque-server processes: start, kill -9, pause, restart, stop.

Owns every process the checker starts, and nothing else. Each node is one
`python -m disque_py` (or, for comparison rows, Disque C's disque-server:
Launch.server; both take the same --port, --bind, --dir and --logfile) bound to its host only (127.0.0.1, or its address in
a network namespace the run made), in its own directory (nodes.conf, the
AOF, server.log, stderr.log), on a client port whose bus port (+10000) was
free too when chosen; a restart reuses the same port and directory, so the
node keeps its identity and its AOF. A Launch says how the command runs
(inside `ip netns exec`, with a preloaded library and its environment). Rules kept: signals go
to the PIDs recorded here, never to a name; nodes run in their own session,
so a Ctrl-C in the terminal reaches only the checker, which then stops them
itself; stop() works from any state (paused, killed, half started). A
node's crashes are what its logs and directory show: Python tracebacks,
sanitizer reports, segmentation faults, core dumps, and exits nobody asked for;
for Disque C, the bug report, assertion or crash-by-signal its server.log
shows (it catches SIGSEGV itself, logs its stack, then dies of the signal:
an exit nobody asked for too).
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from disque_py.tools.loopback import HOST, free_port

READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
PING_POLL_S = 0.05
SERVER_LOG = "server.log"
STDERR_LOG = "stderr.log"
TRACEBACK_MARK = "Traceback (most recent call last)"
CONTEXT_LINES = 3
# What a crash of the compiled engine leaves in stderr.log: AddressSanitizer
# and LeakSanitizer reports, UBSan's diagnostics, Python's fatal errors (a
# segmentation fault under faulthandler) and the C runtime's last words.
NATIVE_CRASH_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                      "Segmentation fault", "core dumped", "Fatal Python error")
# What Disque C writes to its log file (server.log) when it crashes: its
# segmentation fault handler's bug report, a failed assertion, a panic.
DISQUE_C_CRASH_MARKS = ("DISQUE BUG REPORT START", "crashed by signal", "ASSERTION FAILED",
                        "Guru Meditation")
NATIVE_REPORT_LINES = 20
CORE_FILES = ("core", "core.*")

UP, KILLED, PAUSED, EXITED = "up", "killed", "paused", "exited"


@dataclass
class Launch:
    """How a node's command line runs: the address it binds, a prefix
    (e.g. `ip netns exec NAME`), extra environment variables, and the
    server program (empty: ours, `python -m disque_py`)."""

    host: str = HOST
    prefix: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    server: tuple[str, ...] = ()


@dataclass
class Crash:
    """A traceback found in a node's log, or an exit nobody asked for."""

    node: str
    where: str
    summary: str
    text: str = ""


class Node:
    """One disque-server process, restartable on the same port and directory."""

    def __init__(self, index: int, directory: Path, server_args: list[str],
                 launch: Launch | None = None) -> None:
        self.index = index
        self.launch = launch or Launch()
        self.host = self.launch.host
        self.name = f"node{index}"
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.server_args = list(server_args)
        self.proc: subprocess.Popen | None = None
        self.state = EXITED
        self.member = True        # in the cluster (a spare slot of the run is not, until met)
        self.starts = 0
        self.unexpected_exits: list[int] = []

    def command_line(self) -> list[str]:
        server = self.launch.server or (sys.executable, "-m", "disque_py")
        return [*self.launch.prefix, *server, "--port", str(self.port),
                "--bind", self.host, "--dir", str(self.dir),
                "--logfile", str(self.dir / SERVER_LOG), *self.server_args]

    def start(self) -> None:
        with open(self.dir / STDERR_LOG, "ab") as stderr:
            self.proc = subprocess.Popen(self.command_line(), stdin=subprocess.DEVNULL,
                                         stdout=stderr, stderr=stderr, cwd=self.dir,
                                         env={**os.environ, **self.launch.env},
                                         start_new_session=True)
        self.state = UP
        self.starts += 1

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> None:
        """Block until the node answers PING; RuntimeError if it exits or stays silent."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode} at start-up "
                                   f"(see {self.dir / SERVER_LOG} and {STDERR_LOG})")
            if self.answers_ping():
                return
            time.sleep(PING_POLL_S)
        raise RuntimeError(f"{self.name} did not answer PING within {timeout:g}s")

    def answers_ping(self, timeout: float = 0.5) -> bool:
        try:
            with socket.create_connection((self.host, self.port), timeout=timeout) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(64).startswith(b"+PONG")
        except OSError:
            return False

    def kill(self) -> None:
        """kill -9: the node gets no chance to flush or say goodbye."""
        self._signal(signal.SIGKILL)
        self.proc.wait()
        self.state = KILLED

    def pause(self) -> None:
        self._signal(signal.SIGSTOP)
        self.state = PAUSED

    def resume(self) -> None:
        self._signal(signal.SIGCONT)
        self.state = UP

    def _signal(self, signum: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signum)

    def check_exit(self) -> int | None:
        """The exit status if the node ended on its own since the last look, else None."""
        if self.proc is None or self.state not in (UP, PAUSED):
            return None
        code = self.proc.poll()
        if code is None:
            return None
        self.state = EXITED
        self.unexpected_exits.append(code)
        return code

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int | None:
        """SIGCONT then SIGTERM; SIGKILL if it does not exit in time. Its exit
        status; None for a node that was not running (never started, killed
        and left down, or exited already: its own exit is judged elsewhere)."""
        if self.proc is None or self.state not in (UP, PAUSED):
            return None
        if self.proc.poll() is None:
            self._signal(signal.SIGCONT)
            self._signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                self.proc.wait()
        if self.state in (UP, PAUSED):
            self.state = EXITED
        return self.proc.returncode

    def force_kill(self) -> None:
        """Last resort on the way out (Ctrl-C, errors): SIGKILL by PID, reaped."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def crashes(self) -> list[Crash]:
        found = [Crash(self.name, "exit", f"exited on its own with status {code}")
                 for code in self.unexpected_exits]
        for log_name in (SERVER_LOG, STDERR_LOG):
            found += tracebacks_in(self.name, self.dir / log_name)
        found += native_crashes_in(self.name, self.dir / STDERR_LOG, NATIVE_CRASH_MARKS)
        found += native_crashes_in(self.name, self.dir / SERVER_LOG, DISQUE_C_CRASH_MARKS)
        found += [Crash(self.name, core.name, "a core dump") for pattern in CORE_FILES
                  for core in sorted(self.dir.glob(pattern)) if core.is_file()]
        return found


def tracebacks_in(node: str, path: Path) -> list[Crash]:
    """Every Python traceback in a log file, each with the line that names the error."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return []
    crashes = []
    for number, line in enumerate(lines):
        if TRACEBACK_MARK not in line:
            continue
        end = number + 1
        while end < len(lines) and lines[end].startswith((" ", "\t")):
            end += 1
        error_line = lines[end] if end < len(lines) else "(log ends inside the traceback)"
        start = max(number - CONTEXT_LINES, 0)
        crashes.append(Crash(node, f"{path.name}:{number + 1}", _shorten(error_line),
                             "\n".join(lines[start:end + 1])))
    return crashes


def native_crashes_in(node: str, path: Path, marks: tuple[str, ...]) -> list[Crash]:
    """Every line of a log with one of `marks` (a sanitizer report, a
    segmentation fault, a fatal error), each with the lines that follow it
    (the report's stack)."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return []
    return [Crash(node, f"{path.name}:{number + 1}", _shorten(line),
                  "\n".join(lines[number:number + NATIVE_REPORT_LINES]))
            for number, line in enumerate(lines)
            if any(mark in line for mark in marks)]


def _shorten(line: str, limit: int = 200) -> str:
    line = re.sub(r"\s+", " ", line).strip()
    return line if len(line) <= limit else line[:limit] + "..."
