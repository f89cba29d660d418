"""The loads of bench_client.py (issue 36's Python client and worker) on
one disque-py node: what each runs and how it is timed.

- Node: the node under test (started as the test suite starts it, pinned
  by common.Pinning), flushed before each load, filled with pipelined
  ADDJOBs that are not timed, and a connection that polls its INFO.
- Worker runs: `disque-py worker noop_workers:<handler>_worker` in its own
  process, started "full" (at the gate of noop_workers.py, the jobs queued)
  or "released" (parked in GETJOB on the paused queue), timed until INFO's
  registered_jobs is 0; stopped by SIGTERM to its PID.
- Pipelined adds from this process: Client.pipeline() blocks, redis-py's
  pipeline, a bare socket with hiredis; redis-benchmark -P 16.
- Per call: two clients on one connection each, interleaved in slices.

Each load adds its figures to a Series (one value per round).
"""

from __future__ import annotations

import contextlib
import select
import shlex
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, ContextManager

import hiredis
import redis

from common import (BODY, HOST, CpuMeter, DisqueServer, Pinning, command, encode_command,
                    pipelined_fill, redis_benchmark_command, run_async, run_redis_benchmark,
                    scratch_dir)
from disque_py.client import Client
from disque_py.client.commands import DEFAULT_ADD_TIMEOUT_MS
from noop_workers import CONCURRENCY, GATE, QUEUE

BENCH_DIR = Path(__file__).resolve().parent
PIPELINE = 16
POLL_S = 0.005               # how often the end of a worker run is looked for
READY_TIMEOUT_S = 60.0       # a worker process's start-up, on a loaded machine
RUN_TIMEOUT_S = 600.0
STOP_TIMEOUT_S = 30.0
SETTLE_S = 0.5               # disque-py frees flushed jobs in slices, a few per tick
SLICES = 20                  # per-call loads alternate in this many slices a side


@dataclass
class Series:
    """One load's figures, one per round: its rate (or microseconds), the
    CPU of what produced the load (the worker, this script, redis-benchmark)
    and of the node, in percent of one core, and the command that ran."""

    name: str
    unit: str
    values: list[float] = field(default_factory=list)
    load_cpu: list[float] = field(default_factory=list)
    server_cpu: list[float] = field(default_factory=list)
    cpu_us: list[float] = field(default_factory=list)   # load's CPU per job or call
    command: str = ""

    def add(self, value: float, load_cpu: float, server_cpu: float,
            cpu_us: float | None = None) -> None:
        self.values.append(value)
        self.load_cpu.append(load_cpu)
        self.server_cpu.append(server_cpu)
        if cpu_us is not None:
            self.cpu_us.append(cpu_us)


class Node:
    """The node under test, and a connection that polls it."""

    def __init__(self, pinning: Pinning, protocol: int) -> None:
        self.server = DisqueServer(scratch_dir("bench-client-"), pinning)
        self.protocol = protocol

    def __enter__(self) -> "Node":
        self.server.start()
        self.port, self.pid = self.server.port, self.server.pid
        self.poller = redis.Redis(host=HOST, port=self.port, protocol=2)
        return self

    def __exit__(self, *exc) -> None:
        self.poller.close()
        self.server.stop()

    def url(self) -> str:
        return f"disque://{HOST}:{self.port}?protocol={self.protocol}"

    def fresh(self) -> None:
        self.server.flush()
        time.sleep(SETTLE_S)

    def fill(self, jobs: int) -> None:
        """`jobs` jobs in the queue, pipelined (not timed)."""
        _, errors = run_async(pipelined_fill(self.port, encode_command(
            "ADDJOB", QUEUE, BODY, "0"), jobs))
        if errors:
            raise RuntimeError(f"{errors} ADDJOBs of the fill failed")

    def field(self, section: str, name: str) -> int:
        return int(self.poller.info(section).get(name, 0))

    def expect_queued(self, jobs: int) -> None:
        queued = int(self.poller.execute_command("QLEN", QUEUE))
        if queued != jobs:
            raise RuntimeError(f"{queued} jobs queued, {jobs} expected: adds failed")


# ---------------------------------------------------------------- the worker

@dataclass
class WorkerLoad:
    """A worker run: its handler (async or sync), and how it meets the jobs:
    "full" (started on the filled queue, its first GETJOB takes a whole
    batch) or "released" (blocked in GETJOB on the paused queue until
    PAUSE bench none: a parked GETJOB is handed one job, as in Disque)."""

    handler: str
    start: str

    def command(self, node: Node) -> list[str]:
        gate = ["env", f"{GATE}=1"] if self.start == "full" else []
        return gate + [sys.executable, "-m", "disque_py.tools.cli", "worker",
                       f"noop_workers:{self.handler}_worker", "--url", node.url(),
                       "--concurrency", str(CONCURRENCY), "--no-progress"]


WORKER_LOADS = {                         # series key -> load
    "worker-async": WorkerLoad("async", "full"),
    "worker-sync": WorkerLoad("sync", "full"),
    "worker-released": WorkerLoad("async", "released"),
}


def start_worker(load: WorkerLoad, cmd: list[str], node: Node,
                 log: Path) -> subprocess.Popen:
    """The worker process, ready: imported and waiting at the gate ("full"),
    or blocked in its first GETJOB on the paused queue ("released")."""
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, cwd=BENCH_DIR, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=out)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not worker_ready(load, proc, node):
        if proc.poll() is not None or time.monotonic() > deadline:
            stop_worker(proc)
            raise RuntimeError(f"the worker did not start: {log.read_text()[-2000:]}")
        time.sleep(0.01)
    return proc


def worker_ready(load: WorkerLoad, proc: subprocess.Popen, node: Node) -> bool:
    if load.start == "full":
        ready, _, _ = select.select([proc.stdout], [], [], 0)
        return bool(ready) and proc.stdout.readline().strip() == b"ready"
    return node.field("clients", "blocked_clients") >= 1


def release(load: WorkerLoad, proc: subprocess.Popen, node: Node) -> None:
    if load.start == "full":
        proc.stdin.write(b"go\n")
        proc.stdin.close()
    else:
        command(node.port, "PAUSE", QUEUE, "none")


def stop_worker(proc: subprocess.Popen) -> int:
    """SIGTERM to the worker's PID (it stops cleanly), SIGKILL if it hangs."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


def worker_run(node: Node, load: WorkerLoad, jobs: int, series: Series,
               sampler: Callable[[int], ContextManager[object]] | None = None) -> None:
    """Queue `jobs`, start the worker, let it go; time until every one is acked."""
    node.fresh()
    if load.start == "released":
        command(node.port, "PAUSE", QUEUE, "out")
    node.fill(jobs)
    cmd = load.command(node)
    log = scratch_dir("bench-client-worker-") / "worker.log"
    proc = start_worker(load, cmd, node, log)
    try:
        with sampler(proc.pid) if sampler else contextlib.nullcontext():
            elapsed, worker_cpu, server_cpu, worker_s = timed_run(node, load, proc, log)
    finally:
        status = stop_worker(proc)
    failures = [line for line in log.read_text().splitlines() if "ERROR" in line]
    if status != 0 or failures:
        raise RuntimeError(f"worker exit status {status}: {failures[:3]}")
    series.add(jobs / elapsed, worker_cpu, server_cpu, 1e6 * worker_s / jobs)
    series.command = shlex.join(cmd)


def timed_run(node: Node, load: WorkerLoad, proc: subprocess.Popen,
              log: Path) -> tuple[float, float, float, float]:
    """Release the worker; wall seconds until no job is left, the worker's
    and the node's CPU (% of a core), the worker's CPU seconds."""
    worker, server = CpuMeter(proc.pid), CpuMeter(node.pid)
    started = time.perf_counter()
    release(load, proc, node)
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while node.field("jobs", "registered_jobs") > 0:
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the worker stopped short: {log.read_text()[-2000:]}")
        time.sleep(POLL_S)
    elapsed = time.perf_counter() - started
    return elapsed, worker.percent(), server.percent(), sum(worker.user_system())


# ------------------------------------------------------------ pipelined adds

def client_pipeline_adds(client: Client, jobs: int, block: int) -> int:
    """Whole blocks only: returns the jobs added."""
    for _ in range(jobs // block):
        with client.pipeline() as pipe:
            for _ in range(block):
                pipe.add(QUEUE, BODY)
    return jobs // block * block


def redis_pipeline_adds(conn: redis.Redis, jobs: int, block: int) -> int:
    for _ in range(jobs // block):
        with conn.pipeline(transaction=False) as pipe:
            for _ in range(block):
                pipe.execute_command("ADDJOB", QUEUE, BODY, 0)
            pipe.execute()
    return jobs // block * block


def socket_pipeline_adds(port: int, jobs: int, block: int) -> int:
    """The floor of Python: blocks of ADDJOBs packed by hiredis, written on
    a plain socket, their replies read with a hiredis.Reader; no pool, no
    parsing into answers."""
    words = (b"ADDJOB", QUEUE.encode(), BODY, DEFAULT_ADD_TIMEOUT_MS)
    with socket.create_connection((HOST, port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(jobs // block):
            sock.sendall(b"".join([hiredis.pack_command(words) for _ in range(block)]))
            reader, replies = hiredis.Reader(), 0
            while replies < block:
                reader.feed(sock.recv(65536))
                while reader.gets() is not False:
                    replies += 1
    return jobs // block * block


def python_adds(node: Node, jobs: int, series: Series, run: Callable[[int], int]) -> None:
    """`run(jobs)` from this process: adds/s, this process's CPU and the node's."""
    node.fresh()
    server, cpu0 = CpuMeter(node.pid), time.process_time()
    started = time.perf_counter()
    added = run(jobs)
    elapsed = time.perf_counter() - started
    own = time.process_time() - cpu0
    series.add(added / elapsed, 100 * own / elapsed, server.percent(), 1e6 * own / added)
    node.expect_queued(added)


def benchmark_adds(node: Node, requests: int, clients: int, series: Series) -> None:
    node.fresh()
    cmd = redis_benchmark_command(node.port, requests, clients, PIPELINE,
                                  command_args=["ADDJOB", QUEUE, BODY.decode(), "0"])
    rate, server_cpu, loader_cpu = run_redis_benchmark(cmd, node.pid)
    series.add(rate, loader_cpu, server_cpu)
    series.command = shlex.join(f"<{len(BODY)}-byte body>" if part == BODY.decode() else part
                                for part in cmd)


# ------------------------------------------------------------------ per call

def interleaved(sides: dict[str, Callable[[int], None]], calls: int,
                first_round: bool) -> dict[str, tuple[float, float]]:
    """Each side's (wall, CPU) microseconds per call, the sides alternating
    in SLICES slices each, starting with the first or the last side."""
    spent = {name: [0.0, 0.0] for name in sides}
    order = list(sides) if first_round else list(reversed(sides))
    per_slice = max(calls // SLICES, 1)
    for _ in range(SLICES):
        for name in order:
            cpu0, wall0 = time.process_time(), time.perf_counter()
            sides[name](per_slice)
            spent[name][0] += time.perf_counter() - wall0
            spent[name][1] += time.process_time() - cpu0
        order.reverse()
    total = per_slice * SLICES
    return {name: (1e6 * wall / total, 1e6 * cpu / total) for name, (wall, cpu) in spent.items()}


def add_calls(client: Client, conn: redis.Redis) -> dict[str, Callable[[int], None]]:
    def with_client(n: int) -> None:
        for _ in range(n):
            client.add(QUEUE, BODY)

    def with_redis(n: int) -> None:
        for _ in range(n):
            conn.execute_command("ADDJOB", QUEUE, BODY, 0)
    return {"Client": with_client, "redis-py": with_redis}


def get_ack_calls(client: Client, conn: redis.Redis) -> dict[str, Callable[[int], None]]:
    def with_client(n: int) -> None:
        for _ in range(n):
            [job] = client.get(QUEUE)
            client.ack(job.id)

    def with_redis(n: int) -> None:
        for _ in range(n):
            [[_, job_id, _]] = conn.execute_command("GETJOB", "FROM", QUEUE)
            conn.execute_command("ACKJOB", job_id)
    return {"Client": with_client, "redis-py": with_redis}


def per_call(node: Node, calls: int, round_index: int, pair: dict[str, Series],
             make: Callable[[Client, redis.Redis], dict[str, Callable[[int], None]]],
             queued: int = 0) -> None:
    """One connection each, warmed up (HELLO, the pool), then interleaved."""
    node.fresh()
    if queued:
        node.fill(queued + 2)
    with Client(node.url()) as client, redis.Redis(host=HOST, port=node.port,
                                                   protocol=node.protocol) as conn:
        sides = make(client, conn)
        for side in sides.values():
            side(1)
        server = CpuMeter(node.pid)
        figures = interleaved(sides, calls, round_index % 2 == 0)
        server_cpu = server.percent()
    for name, (wall_us, cpu_us) in figures.items():
        pair[name].add(wall_us, 0.0, server_cpu, cpu_us)
