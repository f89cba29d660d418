"""Shared tools for the benchmark scripts: servers, load, measures, tables.

What this module owns:
- starting and stopping our server (disque_py/tools/loopback.py, the same
  start-up the test suite uses) and the yardstick, redis-server, on free
  loopback ports, each stopped by its own PID;
- CPU pinning: on a machine with two or more CPUs the servers run on the
  first CPU and every load generator (redis-benchmark, our asyncio loaders,
  this script itself) on the others, so the server under test always has a
  core of its own and the two servers are measured the same way;
- running redis-benchmark and reading its requests per second and latencies
  (-q --csv), with the CPU of the servers it loads;
- a small asyncio RESP client (hiredis.Reader for replies, uvloop) for the
  loads redis-benchmark cannot express: pipelined fills, request cycles
  that use the previous reply, latency probes;
- process measures (VmRSS, CPU seconds) from /proc, INFO parsing, machine
  description, medians and plain-text tables.

Rules kept: only 127.0.0.1 is ever bound or loaded; servers are stopped by
PID, never by name; every command line that produced a number is printed.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import csv
import io
import os
import platform
import re
import resource
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence

import hiredis

from disque_py.formats.resp import encode_command
from disque_py.tools.loopback import HOST, ServerProcess

REPO_ROOT = Path(__file__).resolve().parent.parent

BODY_SIZE = 100
BODY = b"x" * BODY_SIZE
REDIS_SERVER = "redis-server"
REDIS_BENCHMARK = "redis-benchmark"
CLK_TCK = os.sysconf("SC_CLK_TCK")
MB = 1024 * 1024
USABLE_CPUS = sorted(os.sched_getaffinity(0))   # read before any pinning narrows it


# ---------------------------------------------------------------- CPU pinning

class Pinning:
    """Which CPUs the servers use and which the load generators use."""

    def __init__(self, enabled: bool = True) -> None:
        cpus = USABLE_CPUS
        self.enabled = enabled and len(cpus) >= 2
        self.server_cpus = cpus[:1] if self.enabled else cpus
        self.client_cpus = cpus[1:] if self.enabled else cpus

    def pin_this_process(self) -> None:
        """Put this script (and so the children it starts) on the client CPUs."""
        if self.enabled:
            os.sched_setaffinity(0, set(self.client_cpus))

    def server_prefix(self) -> list[str]:
        if not self.enabled or shutil.which("taskset") is None:
            return []
        return ["taskset", "-c", ",".join(map(str, self.server_cpus))]

    def describe(self) -> str:
        if not self.enabled:
            return "off (servers and load share every CPU)"
        return (f"servers on CPU {','.join(map(str, self.server_cpus))}, "
                f"load generators on CPU {','.join(map(str, self.client_cpus))}")


# -------------------------------------------------------------------- servers

class DisqueServer(ServerProcess):
    """Our server, started as the test suite starts it, optionally pinned."""

    label = "disque-py"

    def __init__(self, directory: Path, pinning: Pinning, args: Sequence[str] = ()) -> None:
        super().__init__(directory, args=list(args))
        self.prefix = pinning.server_prefix()

    def command_line(self) -> list[str]:
        # taskset execs the server, so the PID we hold is the server's own.
        return self.prefix + super().command_line()

    def flush(self) -> None:
        command(self.port, "DEBUG", "FLUSHALL")


class RedisServer(ServerProcess):
    """The yardstick: redis-server with persistence off, on loopback only."""

    label = "redis-server"

    def __init__(self, directory: Path, pinning: Pinning, args: Sequence[str] = ()) -> None:
        super().__init__(directory, args=list(args))
        self.prefix = pinning.server_prefix()

    def command_line(self) -> list[str]:
        return self.prefix + [REDIS_SERVER, "--port", str(self.port), "--bind", HOST,
                              "--save", "", "--appendonly", "no", "--dir", str(self.dir),
                              "--logfile", str(self.dir / "redis.log")] + self.args

    def flush(self) -> None:
        command(self.port, "FLUSHALL")


class OriginalDisque(RedisServer):
    """antirez's Disque 1.0-rc1 disque-server (the binary named by `binary`),
    started like ours: directives on the command line, loopback only."""

    label = "disque 1.0-rc1"
    binary = ""

    def __init__(self, directory: Path, pinning: Pinning, args: Sequence[str] = ()) -> None:
        super().__init__(directory, pinning, args)
        self.log_path = self.dir / "disque.log"

    def command_line(self) -> list[str]:
        return self.prefix + [self.binary, "--port", str(self.port), "--bind", HOST,
                              "--dir", str(self.dir), "--logfile", str(self.log_path)
                              ] + self.args

    def flush(self) -> None:
        command(self.port, "DEBUG", "FLUSHALL")


def start_pair(pinning: Pinning, workdir: Path,
               disque_args: Sequence[str] = ()) -> tuple[RedisServer, DisqueServer]:
    redis_server = RedisServer(workdir / "redis", pinning).start()
    disque = DisqueServer(workdir / "disque", pinning, disque_args)
    try:
        disque.start()
    except BaseException:
        redis_server.stop()
        raise
    return redis_server, disque


def cluster_info(port: int) -> dict[str, str]:
    return dict(line.split(":", 1) for line in command(port, "CLUSTER", "INFO").splitlines()
                if ":" in line)


def start_cluster(pinning: Pinning, nodes: int, prefix: str, mesh_timeout: float = 30.0,
                  server_class=DisqueServer, server_args: Sequence[str] = ()) -> list:
    """`nodes` nodes (disque-py unless told) joined by CLUSTER MEET into a full mesh."""
    base = scratch_dir(prefix)
    servers = [server_class(base / f"node{i}", pinning, server_args) for i in range(nodes)]
    try:
        for server in servers:
            server.start()
        for other in servers[1:]:
            command(servers[0].port, "CLUSTER", "MEET", HOST, str(other.port))
        deadline = time.monotonic() + mesh_timeout
        while not all(cluster_info(s.port)["cluster_reachable_nodes"] == str(nodes - 1)
                      for s in servers):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the {nodes} nodes did not form a full mesh")
            time.sleep(0.1)
    except BaseException:
        for server in servers:
            server.stop()
        raise
    return servers


def stop_all(servers: Iterable) -> None:
    for server in servers:
        if server is not None:
            server.stop()


def ordered(round_index: int, servers: Sequence) -> list:
    """Alternate which server goes first each round, so drift cancels out."""
    return list(servers) if round_index % 2 == 0 else list(reversed(servers))


_SCRATCH: list[Path] = []


def scratch_dir(prefix: str, parent: Path | None = None) -> Path:
    """A fresh temporary directory (under `parent`, or $TMPDIR), removed
    when the script exits."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    if not _SCRATCH:
        atexit.register(lambda: [shutil.rmtree(p, ignore_errors=True) for p in _SCRATCH])
    _SCRATCH.append(path)
    return path


# ------------------------------------------------------- blocking one-shot RESP

def command(port: int, *args, timeout: float = 30.0):
    """Send one command on a fresh connection; return its decoded reply."""
    reader = hiredis.Reader(encoding="utf-8", errors="replace")
    with socket.create_connection((HOST, port), timeout=timeout) as sock:
        sock.sendall(encode_command(*args))
        while True:
            reply = reader.gets()
            if reply is not False:
                if isinstance(reply, hiredis.ReplyError):
                    raise RuntimeError(f"{args[0]} failed: {reply}")
                return reply
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError("server closed the connection")
            reader.feed(chunk)


def info(port: int, section: str = "") -> dict[str, str]:
    return parse_info(command(port, "INFO", *([section] if section else [])))


def parse_info(text: str) -> dict[str, str]:
    """The fields of an INFO reply."""
    fields = {}
    for line in text.splitlines():
        if line and not line.startswith("#") and ":" in line:
            key, _, value = line.partition(":")
            fields[key] = value
    return fields


# ------------------------------------------------------------ process measures

def vm_rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def cpu_times(pid: int) -> tuple[float, float]:
    """User and system CPU seconds of a process so far."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rpartition(")")[2].split()
    return int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    return sum(cpu_times(pid))


class CpuMeter:
    """CPU used by one or more processes (summed) over a wall-clock window."""

    def __init__(self, *pids: int) -> None:
        self.pids = pids
        self.times0 = self._times()
        self.wall0 = time.perf_counter()

    def _times(self) -> tuple[float, float]:
        per_pid = [cpu_times(pid) for pid in self.pids]
        return sum(user for user, _ in per_pid), sum(system for _, system in per_pid)

    def user_system(self) -> tuple[float, float]:
        """User and system CPU seconds since the window opened."""
        user, system = self._times()
        return user - self.times0[0], system - self.times0[1]

    def percent(self) -> float:
        """CPU since the window opened, as a percentage of one core."""
        wall = time.perf_counter() - self.wall0
        return 100.0 * sum(self.user_system()) / wall if wall > 0 else 0.0


# -------------------------------------------------------------- redis-benchmark

def redis_benchmark_command(port: int, requests: int, clients: int = 50, pipeline: int = 1,
                            tests: str | None = None, command_args: Sequence[str] = (),
                            keyspace: int = 0) -> list[str]:
    """`keyspace`: __rand_int__ in the command becomes a number below it."""
    cmd = [REDIS_BENCHMARK, "-h", HOST, "-p", str(port), "-c", str(clients),
           "-n", str(requests), "-q", "--csv"]
    if pipeline > 1:
        cmd += ["-P", str(pipeline)]
    if keyspace:
        cmd += ["-r", str(keyspace)]
    if tests:
        cmd += ["-t", tests]
    return cmd + list(command_args)


@dataclass
class BenchmarkRun:
    """One redis-benchmark run: its rate, the servers' CPU over it (summed),
    redis-benchmark's own CPU, and its CSV row (latencies, with Redis 6+)."""

    rate: float
    server_cpu: float            # % of one core
    loader_cpu: float            # % of one core
    server_user_s: float
    server_system_s: float
    fields: dict[str, str]


def measure_redis_benchmark(cmd: list[str], server_pids: Sequence[int],
                            timeout: float = 600) -> BenchmarkRun:
    """Run one redis-benchmark, measuring the CPU of the servers `server_pids`
    (summed) and its own. A loader near 100% means the number is the
    loader's limit, not the server's."""
    meter = CpuMeter(*server_pids)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - meter.wall0
    cpu = meter.percent()
    user, system = meter.user_system()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    loader = 100.0 * (after.ru_utime + after.ru_stime - children.ru_utime
                      - children.ru_stime) / wall
    if done.returncode != 0:
        raise RuntimeError(f"{shlex.join(cmd)} failed ({done.returncode}): {done.stderr.strip()}")
    fields = parse_csv_row(done.stdout)
    return BenchmarkRun(float(fields["rps"]), cpu, loader, user, system, fields)


def run_redis_benchmark(cmd: list[str], server_pid: int,
                        timeout: float = 600) -> tuple[float, float, float]:
    """Run one redis-benchmark; return (requests per second, server CPU %,
    redis-benchmark's own CPU %)."""
    run = measure_redis_benchmark(cmd, [server_pid], timeout)
    return run.rate, run.server_cpu, run.loader_cpu


def parse_csv_row(output: str) -> dict[str, str]:
    """The first test's row of `redis-benchmark -q --csv` output, by column.

    Redis 6+ prints a header row ("test","rps","avg_latency_ms",...) then one
    row per test; older versions print "TEST","RPS" rows without a header,
    read as {"test": ..., "rps": ...}.
    """
    rows = [row for row in csv.reader(io.StringIO(output)) if len(row) >= 2]
    header = ["test", "rps"]
    if rows and rows[0][0] == "test":
        header, rows = rows[0], rows[1:]
    if not rows:
        raise RuntimeError(f"no requests-per-second in redis-benchmark output: {output!r}")
    return dict(zip(header, rows[0]))


# ------------------------------------------------------------ asyncio RESP client

def run_async(coroutine):
    """Run a coroutine on uvloop (the loop the server itself uses)."""
    import uvloop
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coroutine)


class RespConnection(asyncio.Protocol):
    """One pipelining RESP connection: send many commands, await their replies in order."""

    def __init__(self) -> None:
        self.reader = hiredis.Reader()
        self.waiters: collections.deque[asyncio.Future] = collections.deque()
        self.transport: asyncio.Transport | None = None
        self.closed: Exception | None = None

    @classmethod
    async def open(cls, port: int) -> "RespConnection":
        loop = asyncio.get_running_loop()
        _, protocol = await loop.create_connection(cls, HOST, port)
        return protocol

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        while (reply := self.reader.gets()) is not False:
            waiter = self.waiters.popleft()
            if not waiter.done():      # its awaiter may have been cancelled
                waiter.set_result(reply)

    def connection_lost(self, exc) -> None:
        self.closed = exc or ConnectionError("connection closed")
        while self.waiters:
            waiter = self.waiters.popleft()
            if not waiter.done():
                waiter.set_exception(self.closed)

    def send_raw(self, payload: bytes, replies: int) -> list[asyncio.Future]:
        if self.closed is not None:
            raise self.closed
        loop = asyncio.get_running_loop()
        futures = [loop.create_future() for _ in range(replies)]
        self.waiters.extend(futures)
        self.transport.write(payload)
        return futures

    async def call(self, *args):
        return await self.send_raw(encode_command(*args), 1)[0]

    async def pipeline(self, payload: bytes, replies: int) -> list:
        return await asyncio.gather(*self.send_raw(payload, replies))

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


async def pipelined_fill(port: int, one_command: bytes | Callable[[int], bytes], total: int,
                         connections: int = 4, batch: int = 1000) -> tuple[float, int]:
    """Send `total` commands over a few connections in pipelined batches of
    `batch`; return (seconds taken, error replies). `one_command` is either
    the same command every time, or a function of the command's number."""
    conns = [await RespConnection.open(port) for _ in range(connections)]
    errors = 0

    def payload(first: int, n: int) -> bytes:
        if isinstance(one_command, bytes):
            return one_command * n
        return b"".join(one_command(i) for i in range(first, first + n))

    async def worker(conn: RespConnection, first: int, count: int) -> None:
        nonlocal errors
        while count > 0:
            n = min(batch, count)
            for reply in await conn.pipeline(payload(first, n), n):
                if isinstance(reply, hiredis.ReplyError):
                    errors += 1
            first += n
            count -= n

    shares = [total // connections + (1 if i < total % connections else 0)
              for i in range(connections)]
    firsts = [sum(shares[:i]) for i in range(connections)]
    started = time.perf_counter()
    await asyncio.gather(*(worker(c, f, s) for c, f, s in zip(conns, firsts, shares)))
    elapsed = time.perf_counter() - started
    for conn in conns:
        conn.close()
    return elapsed, errors


class LatencyProbe:
    """PING every `interval` seconds on its own connection; keep each round trip.

    A PING counts for a window when it was waiting during any part of it:
    the PING sent just before a stall and answered just after it is the one
    that shows the stall. A PING still unanswered counts as waiting until now.
    """

    def __init__(self, port: int, interval: float = 0.001) -> None:
        self.port = port
        self.interval = interval
        self.samples: list[tuple[float, float]] = []   # (sent at, round trip)
        self._task: asyncio.Task | None = None
        self._conn: RespConnection | None = None
        self._outstanding_since: float | None = None

    async def start(self) -> "LatencyProbe":
        self._conn = await RespConnection.open(self.port)
        await self._conn.call("PING")
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    async def _run(self) -> None:
        ping = encode_command("PING")
        while True:
            sent = time.perf_counter()
            self._outstanding_since = sent
            await self._conn.send_raw(ping, 1)[0]
            self._outstanding_since = None
            self.samples.append((sent, time.perf_counter() - sent))
            delay = self.interval - (time.perf_counter() - sent)
            await asyncio.sleep(max(delay, 0))

    async def stop(self) -> None:
        self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            pass
        self._conn.close()

    def worst_between(self, start: float, end: float) -> float:
        """Longest round trip of the PINGs waiting at some point in [start, end], in seconds."""
        worst = max((rtt for sent, rtt in self.samples if sent <= end and sent + rtt >= start),
                    default=0.0)
        if self._outstanding_since is not None and self._outstanding_since <= end:
            worst = max(worst, time.perf_counter() - self._outstanding_since)
        return worst

    def worst_sent_between(self, start: float, end: float) -> float:
        """Longest round trip of the PINGs sent in (start, end], in seconds."""
        return max((rtt for sent, rtt in self.samples if start < sent <= end), default=0.0)

    def answered_between(self, start: float, end: float) -> int:
        return sum(1 for sent, rtt in self.samples if start <= sent + rtt <= end)

    def median(self) -> float:
        return statistics.median(rtt for _, rtt in self.samples) if self.samples else 0.0


# ------------------------------------------------------------ machine and output

def machine_info() -> list[tuple[str, str]]:
    cpu_model = "unknown"
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    cpu_model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    import uvloop
    from disque_py import __version__
    return [
        ("cpu", cpu_model),
        ("cores", f"{os.cpu_count()} online, {len(USABLE_CPUS)} usable"),
        ("kernel", platform.release()),
        ("python", f"{platform.python_implementation()} {platform.python_version()} "
                   f"({sys.executable})"),
        ("disque-py", __version__),
        ("uvloop / hiredis", f"{uvloop.__version__} / {hiredis.__version__}"),
        ("redis-server", _first_line([REDIS_SERVER, "--version"])),
        ("redis-benchmark", _first_line([REDIS_BENCHMARK, "--version"])),
        ("load average", " ".join(f"{x:.2f}" for x in os.getloadavg())),
    ]


def _first_line(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"unavailable ({error})"


REDIS_HINT = " (Debian: apt-get install redis-tools redis-server)"


def require_tools(tools: Sequence[str] = (REDIS_SERVER, REDIS_BENCHMARK),
                  hint: str = REDIS_HINT) -> None:
    """Exit, naming them, if any of `tools` is not on PATH."""
    missing = [tool for tool in tools if shutil.which(tool) is None]
    if missing:
        sys.exit(f"missing on PATH: {', '.join(missing)}{hint}")


def print_header(title: str, pinning: Pinning | None = None,
                 extra: Sequence[tuple[str, str]] = ()) -> None:
    """The machine table; `extra` rows (tool versions...) go at its end."""
    print(f"== {title}")
    rows = machine_info()
    if pinning is not None:
        rows.append(("pinning", pinning.describe()))
    rows += extra
    print_table(["machine", ""], rows)


def print_table(headers: Sequence[str], rows: Iterable[Sequence], title: str = "") -> None:
    rows = [[_cell(value) for value in row] for row in rows]
    widths = [max(len(str(h)), *(len(r[i]) for r in rows)) if rows else len(str(h))
              for i, h in enumerate(headers)]
    if title:
        print(f"\n{title}")
    print("  ".join(str(h).ljust(w) for h, w in zip(headers, widths)).rstrip())
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print("  ".join(cell.rjust(w) if _numeric(cell) else cell.ljust(w)
                        for cell, w in zip(row, widths)).rstrip())
    sys.stdout.flush()


def _cell(value) -> str:
    if isinstance(value, float):
        if value >= 100:
            return f"{value:,.0f}"
        return f"{value:.3g}" if value < 10 else f"{value:.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


_NUMBER = re.compile(r"-?[\d,]+(\.\d+)?[x%s]?")


def _numeric(cell: str) -> bool:
    return _NUMBER.fullmatch(cell) is not None


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def ratio(ours: float, theirs: float) -> float:
    return ours / theirs if theirs else float("nan")


def print_commands(commands: Iterable[str | list[str]]) -> None:
    print("\ncommands:")
    for cmd in commands:
        print("  " + (cmd if isinstance(cmd, str) else shlex.join(cmd)))
    sys.stdout.flush()


def ms(seconds: float) -> float:
    return seconds * 1000.0

