"""Shared by the AOF benchmarks (bench_aof.py, bench_aof_load.py): the two
servers side by side, their AOFs on a real disk, fills, rewrites, restarts,
and paired per-round figures.

common.py holds what every benchmark uses; this module adds what only the
persistence benchmarks need, so that no script copies another:
- the servers compared (compare.server_kinds), each started in a fresh
  directory with the AOF named AOF_NAME;
- where the AOFs go (a directory on a real disk, `df -T` printed);
- a pipelined fill of queued jobs; BGREWRITEAOF timed until INFO says
  done, with the worst PING round trip meanwhile; a start-up timed until
  the first +PONG; a stop by SHUTDOWN;
- Paired: per-round values of each server and the median of the per-round
  ratios disque-py / Disque C.

Rules kept: 127.0.0.1 only; servers stopped by their PID (or SHUTDOWN on
their port); every directory made here is under a scratch root removed at
exit.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import hiredis

from common import (BODY, HOST, LatencyProbe, OriginalDisque, Pinning, RespConnection, info,
                    median, parse_info, pipelined_fill, ratio, run_async, scratch_dir)
from compare import C, PY
from disque_py.formats.resp import encode_command

AOF_NAME = "bench.aof"
# Automatic rewrites off on both servers: a rewrite started by the size of
# the file would land in some measurements and not others, and would change
# the file whose bytes per job are reported. Rewrites have their own figure.
NO_AUTO_REWRITE = ["--auto-aof-rewrite-percentage", "0"]
ADDJOB = ["ADDJOB", "q", BODY.decode(), "0"]
POLL_S = 0.01


# -------------------------------------------------------------------- servers

def new_server(kind, root: Path, pinning: Pinning, args: list[str], prefix: str = ""):
    """A server of `kind` (not started) in a fresh directory under `root`,
    its AOF named AOF_NAME."""
    tag = "c" if kind is OriginalDisque else "py"
    directory = Path(tempfile.mkdtemp(prefix=f"{prefix}{tag}-", dir=root))
    return kind(directory, pinning, ["--appendfilename", AOF_NAME] + list(args))


def aof_file(server) -> Path:
    return server.dir / AOF_NAME


def aof_root(parent: Path | None, prefix: str) -> Path:
    """Where the servers' directories go: under `parent` (created if need
    be) or $TMPDIR; removed when the script exits."""
    if parent is None:
        return scratch_dir(prefix)
    parent.mkdir(parents=True, exist_ok=True)
    return scratch_dir(prefix, parent)


def filesystem_of(path: Path) -> str:
    """`df -T` of the directory, with its command line, for the report."""
    cmd = ["df", "-T", str(path)]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as error:
        out = f"unavailable ({error})"
    return f"$ {shlex.join(cmd)}\n{out}"


def shown(cmd: list[str]) -> str:
    """A command line with the 100-byte body elided."""
    return shlex.join(part if len(part) < 40 else f"<{len(part)}-byte body>" for part in cmd)


# -------------------------------------------------------- fill and rewrite

def fill(server, jobs: int) -> float:
    """`jobs` pipelined ADDJOB q <body> 0 (queued jobs); returns seconds."""
    seconds, errors = run_async(pipelined_fill(server.port, encode_command(*ADDJOB), jobs))
    if errors:
        raise RuntimeError(f"{server.label}: {errors} ADDJOBs of the fill failed")
    return seconds


def registered_jobs(port: int) -> int:
    return int(info(port, "jobs")["registered_jobs"])


def rewrite_state(fields: dict[str, str]) -> tuple[bool, str]:
    """(a rewrite running or scheduled, the last rewrite's status)."""
    busy = fields.get("aof_rewrite_in_progress") == "1" or \
        fields.get("aof_rewrite_scheduled") == "1"
    return busy, fields.get("aof_last_bgrewrite_status", "?")


def rewrite(port: int, timeout: float = 1800) -> dict:
    """BGREWRITEAOF, then INFO persistence until no rewrite runs, while a
    probe PINGs every millisecond. Returns the seconds from the command to
    the INFO that shows it done, and the worst PING round trip during it.
    Raises when the rewrite did not succeed."""
    return run_async(_timed_rewrite(port, timeout))


async def _timed_rewrite(port: int, timeout: float) -> dict:
    probe = await LatencyProbe(port).start()
    conn = await RespConnection.open(port)
    try:
        await asyncio.sleep(0.1)                      # the probe's quiet round trips
        started = time.perf_counter()
        reply = await conn.call("BGREWRITEAOF")
        if isinstance(reply, hiredis.ReplyError):
            raise RuntimeError(f"BGREWRITEAOF on port {port}: {reply}")
        while True:
            fields = parse_info((await conn.call("INFO", "persistence")).decode())
            busy, status = rewrite_state(fields)
            if not busy:
                break
            if time.perf_counter() - started > timeout:
                raise RuntimeError(f"the rewrite on port {port} still runs after {timeout}s")
            await asyncio.sleep(POLL_S)
        ended = time.perf_counter()
    finally:
        await probe.stop()
        conn.close()
    if status != "ok":
        raise RuntimeError(f"the rewrite on port {port} ended with status {status}")
    return {"rewrite_s": ended - started,
            "worst_ping_ms": 1000 * probe.worst_between(started, ended),
            "median_ping_ms": 1000 * probe.median(),
            "rewritten_bytes": int(fields.get("aof_current_size", 0))}


def filled_aof(kind, root: Path, pinning: Pinning, jobs: int, keep: Path,
               as_written: bool = False) -> dict:
    """Start a fresh server with the AOF on, fill it with `jobs` queued jobs,
    BGREWRITEAOF, stop it and keep its AOF at `keep`: a file of the server's
    own current format, written by the server itself. `as_written`: no
    rewrite, and kill -9 instead of a stop, so the file is what the write
    path left behind when the node crashed."""
    server = new_server(kind, root, pinning, ["--appendonly", "yes"] + NO_AUTO_REWRITE, "fill-")
    server.start()
    try:
        fill_s = fill(server, jobs)
        held = registered_jobs(server.port)
        rewrite_s = float("nan") if as_written else rewrite(server.port)["rewrite_s"]
        # INFO's size, not the file's: a file may be preallocated past its end.
        size = int(info(server.port, "persistence")["aof_current_size"])
    finally:
        if as_written:
            server.kill()
        else:
            server.stop(timeout=300)
    os.replace(aof_file(server), keep)
    return {"server": kind.label, "jobs": jobs, "registered_jobs": held, "fill_s": fill_s,
            "rewrite_s": rewrite_s, "bytes": size, "file_bytes": keep.stat().st_size,
            "bytes_per_job": size / jobs,
            "as_written": as_written, "command": shlex.join(server.command_line())}


# ------------------------------------------------------------ start and stop

def seconds_to_pong(port: int, since: float, proc: subprocess.Popen,
                    timeout: float = 1800) -> float:
    """Seconds from `since` to the first +PONG on `port`. A node loading its
    AOF answers -LOADING (ask again) or, like Disque C, not at all until
    loaded (wait on the same connection: the PING is answered when it is)."""
    deadline = since + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode} while loading")
        try:
            with socket.create_connection((HOST, port), timeout=1) as sock:
                while time.monotonic() < deadline:
                    sock.sendall(b"PING\r\n")
                    reply = _reply_line(sock, deadline, proc)
                    if reply.startswith(b"+PONG"):
                        return time.monotonic() - since
                    time.sleep(POLL_S)            # -LOADING
        except OSError:
            time.sleep(POLL_S)                    # not listening yet
    raise RuntimeError(f"no +PONG on port {port} within {timeout}s")


def _reply_line(sock: socket.socket, deadline: float, proc: subprocess.Popen) -> bytes:
    data = b""
    sock.settimeout(0.2)
    while not data.endswith(b"\r\n"):
        try:
            chunk = sock.recv(256)
        except socket.timeout:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise OSError("no reply")
            continue
        if not chunk:
            raise OSError("connection closed")
        data += chunk
    return data


def shutdown(server, timeout: float = 300) -> None:
    """SHUTDOWN on its port (the PID held may be /usr/bin/time's, which a
    signal would kill instead of the server), then wait for the process;
    kill the server's own PID if it does not go."""
    try:
        with socket.create_connection((HOST, server.port), timeout=30) as sock:
            sock.sendall(b"SHUTDOWN\r\n")
            sock.recv(64)
    except OSError:
        pass
    try:
        server.proc.wait(timeout)
    except subprocess.TimeoutExpired:
        for pid in _children(server.pid) + [server.pid]:
            os.kill(pid, 9)
        server.proc.wait()


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as children:
            return [int(child) for child in children.read().split()]
    except OSError:
        return []


# ------------------------------------------------------------- paired figures

@dataclass
class Paired:
    """One figure per server per round, for each row of a report."""

    values: dict[str, dict[str, list[float]]] = field(default_factory=dict)

    def add(self, row: str, label: str, value: float) -> None:
        self.values.setdefault(row, {}).setdefault(label, []).append(value)

    def of(self, row: str, label: str) -> list[float]:
        return self.values.get(row, {}).get(label, [])

    def ratios(self, row: str, ours: str = PY, theirs: str = C) -> list[float]:
        """Per round, ours / theirs (rounds paired by their index)."""
        return [ratio(a, b) for a, b in zip(self.of(row, ours), self.of(row, theirs))]

    def cell(self, row: str, label: str, fmt: str = "{:,.0f}") -> str:
        """'median (min-max)' of one server's values, '-' without any."""
        values = self.of(row, label)
        if not values:
            return "-"
        return (f"{fmt.format(median(values))} ({fmt.format(min(values))}-"
                f"{fmt.format(max(values))})")

    def ratio_cell(self, row: str, ours: str = PY, theirs: str = C) -> str:
        ratios = self.ratios(row, ours, theirs)
        if not ratios:
            return "-"
        return f"{median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"
