"""The Python client and worker (issue 36) against one disque-py node.

    python benchmarks/bench_client.py [--quick] [--rounds N] [--jobs N] [--calls N]
                                      [--protocol 2|3] [--no-pin] [--profile DIR]

One node, pinned to the first CPU; this script, the worker process and
redis-benchmark on the others. The body is 100 bytes, the queue `bench`.
Each round measures, the node flushed (DEBUG FLUSHALL) before each load:

  worker, async     `disque-py worker noop_workers:async_worker --concurrency
                    50` (benchmarks/noop_workers.py: a no-op async handler)
                    against --jobs jobs queued beforehand (pipelined, not
                    timed). The worker process imports everything, then waits
                    at a gate (BENCH_CLIENT_GATE: a line on its stdin); timed
                    from the gate's opening (its first GETJOB follows) until
                    INFO's registered_jobs is 0, polled every 5 ms: every job
                    fetched, run and acked. Jobs/s, the worker's CPU (near
                    100% of its core: the worker is the limit) and its CPU
                    per job
  worker, sync      the same with a plain handler (the worker's thread pool)
  worker, released  the async worker started on the paused queue (PAUSE bench
                    out before the fill), timed from the PAUSE bench none that
                    releases its first GETJOB, parked meanwhile: a parked
                    GETJOB is handed one job, as in Disque, which is how an
                    idle worker meets a burst
  Client.add pipe   --jobs `Client.add("bench", body)` from this process, in
                    `with client.pipeline() as pipe:` blocks of 16, and of 256
  redis-py pipe     the same adds as redis-py's own pipeline(transaction=False)
                    of execute_command("ADDJOB", ...), blocks of 16: how much
                    of the gap is redis-py's
  redis-benchmark   -P 16 ADDJOB bench <body> 0 (3 x --jobs requests), with
                    -c 1 (one connection, 16 in flight: the shape of a
                    pipeline block) and -c 50 (the node's ceiling)
  per call          one connection, not pipelined: Client.add("bench", body)
                    against redis.Redis().execute_command("ADDJOB", "bench",
                    body, 0), --calls of each, interleaved in slices of a tenth
                    (the order alternating between rounds); then Client.get +
                    Client.ack against execute_command GETJOB FROM / ACKJOB, on
                    jobs queued beforehand. Microseconds per call, wall clock
                    and this process's CPU (user + system)

Rates are medians over rounds; a ratio is the median of the per-round ratios
(paired by round, so what the machine did to both cancels), with its range.
The targets are the issue's: the async worker >= 25,000 jobs/s; Client.add
in blocks of 16 >= 0.7x redis-benchmark -P 16 -c 1; Client.add <= 10 % more
time per call than execute_command. Both clients use redis-py's default
protocol (RESP3 since redis-py 8) unless --protocol says otherwise, and
hiredis when installed (the header says which parser ran).

`--profile DIR`, after the rounds: py-spy (`--py-spy PATH`, else on PATH
or beside this Python) samples one more async worker run and this process
over one pipelined-add load (blocks of 16), 1,000 times a second, only
while the GIL is held (Sampler says why), into DIR/worker.txt and
DIR/add_pipeline.txt (raw stacks); printed, the functions that took most
samples, alone (with the C they call) and with the Python they call, in
microseconds per job, beside the measured CPU per job. Rules kept: 127.0.0.1 only, free ports, fresh
temporary directories, every process stopped by its own PID.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import select
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (BODY, HOST, CpuMeter, DisqueServer, Pinning, command,  # noqa: E402
                    encode_command, median, ordered, pipelined_fill,
                    print_commands, print_header, print_table, ratio,
                    redis_benchmark_command, run_async, run_redis_benchmark, scratch_dir)
from compare import source_state  # noqa: E402
from disque_py.client import Client  # noqa: E402
from noop_workers import CONCURRENCY, GATE, QUEUE  # noqa: E402

BENCH_DIR = Path(__file__).resolve().parent
PIPELINE = 16
BIG_PIPELINE = 256
POLL_S = 0.005               # how often the end of a worker run is looked for
READY_TIMEOUT_S = 60.0       # a worker process's start-up, on a loaded machine
RUN_TIMEOUT_S = 600.0
STOP_TIMEOUT_S = 30.0
SETTLE_S = 0.5               # disque-py frees flushed jobs in slices, a few per tick
SLICES = 10                  # per-call loads alternate in this many slices a side
PROFILE_LINES = 25
SAMPLE_RATE = 1000           # py-spy's samples per second
SAMPLER_ATTACH_S = 1.0       # py-spy's time to attach before the load starts
LINE_NUMBER = re.compile(r":\d+\)$")


@dataclass
class Settings:
    rounds: int
    jobs: int                # worker runs and pipelined adds
    calls: int               # per-call loads, each side
    benchmark_requests: int  # each redis-benchmark run
    protocol: int

    @classmethod
    def for_mode(cls, args: argparse.Namespace) -> "Settings":
        jobs = args.jobs or (20_000 if args.quick else 200_000)
        calls = args.calls or (2_000 if args.quick else 20_000)
        return cls(args.rounds or (1 if args.quick else 3), jobs, calls, 3 * jobs,
                   args.protocol)


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
        return gate + [sys.executable, "-m", "disque_py.tools.cli", "worker", f"noop_workers:{self.handler}_worker", "--url", node.url(),
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
               sampler: Callable[[int], Sampler] | None = None) -> None:
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


# --------------------------------------------------------------------- rounds

def make_series() -> dict[str, Series]:
    rate = "jobs/s"
    return {
        "worker-async": Series(f"worker, async no-op, concurrency {CONCURRENCY}", rate),
        "worker-sync": Series(f"worker, sync no-op (threads), concurrency {CONCURRENCY}", rate),
        "worker-released": Series("worker, async, released from a parked GETJOB", rate),
        "pipe16": Series(f"Client.add, pipeline() blocks of {PIPELINE}", rate),
        "pipe256": Series(f"Client.add, pipeline() blocks of {BIG_PIPELINE}", rate),
        "redis-pipe16": Series(f"redis-py pipeline, blocks of {PIPELINE}", rate),
        "rb-c1": Series(f"redis-benchmark -P {PIPELINE} -c 1", rate),
        "rb-c50": Series(f"redis-benchmark -P {PIPELINE} -c 50", rate),
        "add-Client": Series("Client.add", "us/call"),
        "add-redis-py": Series('execute_command("ADDJOB")', "us/call"),
        "getack-Client": Series("Client.get + Client.ack", "us/pair"),
        "getack-redis-py": Series("execute_command GETJOB + ACKJOB", "us/pair"),
    }


def run_round(node: Node, settings: Settings, round_index: int,
              series: dict[str, Series]) -> None:
    jobs, calls = settings.jobs, settings.calls
    for key in ordered(round_index, list(WORKER_LOADS)):
        worker_run(node, WORKER_LOADS[key], jobs, series[key])
    with Client(node.url()) as client, redis.Redis(host=HOST, port=node.port,
                                                   protocol=node.protocol) as conn:
        loads = {
            "pipe16": lambda s: python_adds(
                node, jobs, s, lambda n: client_pipeline_adds(client, n, PIPELINE)),
            "pipe256": lambda s: python_adds(
                node, jobs, s, lambda n: client_pipeline_adds(client, n, BIG_PIPELINE)),
            "redis-pipe16": lambda s: python_adds(
                node, jobs, s, lambda n: redis_pipeline_adds(conn, n, PIPELINE)),
            "rb-c1": lambda s: benchmark_adds(node, settings.benchmark_requests, 1, s),
            "rb-c50": lambda s: benchmark_adds(node, settings.benchmark_requests, 50, s),
        }
        for key in ordered(round_index, list(loads)):
            loads[key](series[key])
    per_call(node, calls, round_index,
             {"Client": series["add-Client"], "redis-py": series["add-redis-py"]}, add_calls)
    per_call(node, calls, round_index,
             {"Client": series["getack-Client"], "redis-py": series["getack-redis-py"]},
             get_ack_calls, queued=2 * calls)
    print(f"\nround {round_index + 1}/{settings.rounds}")
    for item in series.values():
        print(f"  {item.name:48} {item.values[-1]:>12,.1f} {item.unit}", flush=True)


# --------------------------------------------------------------------- report

def spread(values: list[float]) -> str:
    return f"{min(values):,.0f}-{max(values):,.0f}" if len(values) > 1 else ""


def ratio_text(ours: list[float], theirs: list[float]) -> tuple[float, str]:
    """The median of the per-round ratios, and it with its range as text."""
    ratios = [ratio(a, b) for a, b in zip(ours, theirs)]
    text = f"{median(ratios):.2f}x"
    if len(ratios) > 1:
        text += f" ({min(ratios):.2f}-{max(ratios):.2f})"
    return median(ratios), text


def print_throughput(series: dict[str, Series]) -> None:
    rows = []
    for key in (*WORKER_LOADS, "pipe16", "pipe256", "redis-pipe16", "rb-c1", "rb-c50"):
        item = series[key]
        rows.append([item.name, median(item.values), spread(item.values),
                     f"{median(item.load_cpu):.0f}%", f"{median(item.server_cpu):.0f}%",
                     f"{median(item.cpu_us):.2f}" if item.cpu_us else ""])
    print_table(["load", "jobs/s (median)", "rounds", "load CPU", "node CPU",
                 "load CPU us/job"], rows,
                title="throughput: load CPU is the worker process, this script (Python "
                      "adds) or redis-benchmark, % of one core")


def print_per_call(series: dict[str, Series]) -> None:
    rows = []
    for kind in ("add", "getack"):
        ours, theirs = series[f"{kind}-Client"], series[f"{kind}-redis-py"]
        _, wall = ratio_text(ours.values, theirs.values)
        _, cpu = ratio_text(ours.cpu_us, theirs.cpu_us)
        rows.append([f"{ours.name} vs {theirs.name}", median(ours.values),
                     median(theirs.values), wall, median(ours.cpu_us), median(theirs.cpu_us),
                     cpu, f"{median(ours.server_cpu):.0f}%"])
    print_table(["calls (one connection, unpipelined)", "Client us", "redis-py us",
                 "Client / redis-py", "Client CPU us", "redis-py CPU us", "CPU ratio",
                 "node CPU"], rows,
                title="per call: microseconds per call (per get + ack pair), wall clock "
                      "and this process's CPU")


def print_targets(series: dict[str, Series]) -> None:
    worker = series["worker-async"].values
    rows = [["async worker, jobs/s", f"{median(worker):,.0f}", ">= 25,000",
             "met" if median(worker) >= 25_000 else "missed"]]
    for ours, theirs, target in (("pipe16", "rb-c1", 0.7), ("pipe16", "rb-c50", None),
                                 ("pipe256", "rb-c1", None), ("pipe256", "rb-c50", None),
                                 ("redis-pipe16", "rb-c1", None)):
        value, text = ratio_text(series[ours].values, series[theirs].values)
        rows.append([f"{series[ours].name} / {series[theirs].name}", text,
                     f">= {target}x" if target else "(information)",
                     ("met" if value >= target else "missed") if target else ""])
    for kind, label in (("add", "Client.add"), ("getack", "Client.get + ack")):
        value, text = ratio_text(series[f"{kind}-Client"].values,
                                 series[f"{kind}-redis-py"].values)
        rows.append([f"{label}: time per call over execute_command's",
                     f"{100 * (value - 1):+.1f}% ({text})", "<= +10%",
                     "met" if value <= 1.10 else "missed"])
    print_table(["figure", "measured", "target", ""], rows,
                title="issue 36's targets (medians of per-round ratios, range in brackets)")


def print_rounds(series: dict[str, Series]) -> None:
    rows = [[item.name, item.unit, *item.values] for item in series.values()]
    rounds = max(len(item.values) for item in series.values())
    print_table(["load", "unit", *(f"round {i + 1}" for i in range(rounds))], rows,
                title="per round")


# -------------------------------------------------------------------- profile

class Sampler:
    """py-spy sampling a process into a raw file of stacks and their counts.

    Only samples of a thread holding the GIL count (`--gil`): Python code
    and the C it runs with the GIL (uvloop's callbacks, hiredis), not the
    waits for a reply nor most system calls, which release it; so the
    samples add up to the process's user-space CPU, about. The sampled
    process is not stopped (`--nonblocking`), and py-spy runs on the
    node's CPU (`prefix`): on the sampled process's own CPU it would only
    look while that process is off the CPU."""

    def __init__(self, binary: str, pid: int, out: Path, prefix: list[str]) -> None:
        self.cmd = prefix + [binary, "record", "--pid", str(pid), "--rate", str(SAMPLE_RATE),
                             "--gil", "--nonblocking", "--format", "raw", "-o", str(out)]

    def __enter__(self) -> "Sampler":
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        time.sleep(SAMPLER_ATTACH_S)
        return self

    def __exit__(self, *exc) -> None:
        self.proc.send_signal(signal.SIGINT)         # py-spy writes its file and exits
        self.proc.wait(STOP_TIMEOUT_S)


def py_spy_binary(given: str | None) -> str:
    for candidate in (given, shutil.which("py-spy"), Path(sys.executable).with_name("py-spy")):
        if candidate and os.access(candidate, os.X_OK):
            return str(candidate)
    sys.exit("--profile needs py-spy: pip install py-spy, or --py-spy PATH")


def read_samples(path: Path) -> tuple[Counter[str], Counter[str], int]:
    """Samples per function (file, no line): its own, and its stacks'."""
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = [LINE_NUMBER.sub(")", frame) for frame in stack.split(";")
                  if frame and not frame.startswith("thread (")] or ["(no Python frame)"]
        total += int(count)
        own[frames[-1]] += int(count)
        for frame in set(frames):
            inclusive[frame] += int(count)
    return own, inclusive, total


def print_samples(path: Path, series: Series, jobs: int, title: str) -> None:
    """The functions that took most samples, as microseconds per job."""
    own, inclusive, total = read_samples(path)
    us_per_job = 1e6 / SAMPLE_RATE / jobs
    print_table(["function (own time)", "us/job", "share"],
                [[name, count * us_per_job, f"{100 * count / total:.1f}%"]
                 for name, count in own.most_common(PROFILE_LINES)],
                title=f"{title}: {series.values[-1]:,.0f} jobs/s while sampled; "
                      f"{total * us_per_job:.2f} us per job sampled holding the GIL, of "
                      f"{series.cpu_us[-1]:.2f} us of CPU (user + system) per job ({path})")
    outermost = max(inclusive.values())             # runpy, click, the event loop's run
    print_table(["function (with what it calls)", "us/job", "share"],
                [[name, count * us_per_job, f"{100 * count / total:.1f}%"]
                 for name, count in inclusive.most_common()
                 if count < 0.95 * outermost][:PROFILE_LINES])


def profile(node: Node, settings: Settings, directory: Path, binary: str,
            pinning: Pinning) -> None:
    """py-spy on one more async worker run, and on this process over one
    pipelined-add load (blocks of 16)."""
    directory.mkdir(parents=True, exist_ok=True)
    samples, series = directory / "worker.txt", Series("sampled worker", "jobs/s")
    worker_run(node, WORKER_LOADS["worker-async"], settings.jobs, series, sampler=lambda pid:
               Sampler(binary, pid, samples, pinning.server_prefix()))
    print_samples(samples, series, settings.jobs, "async worker")
    samples, series = directory / "add_pipeline.txt", Series("sampled adds", "jobs/s")
    with Client(node.url()) as client:
        client.add(QUEUE, BODY)                       # HELLO and the pool, before sampling
        with Sampler(binary, os.getpid(), samples, pinning.server_prefix()):
            python_adds(node, settings.jobs, series,
                        lambda n: client_pipeline_adds(client, n, PIPELINE))
    jobs = settings.jobs // PIPELINE * PIPELINE
    print_samples(samples, series, jobs, f"Client.add, pipeline() blocks of {PIPELINE}")


# ----------------------------------------------------------------------- main

def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="1 round, 20,000 jobs and 2,000 calls: a smoke run")
    parser.add_argument("--rounds", type=int, help="rounds (default 3; 1 with --quick)")
    parser.add_argument("--jobs", type=int,
                        help="jobs per worker run and per pipelined-add load (200,000)")
    parser.add_argument("--calls", type=int, help="per-call loads: calls a side (20,000)")
    parser.add_argument("--protocol", type=int, choices=(2, 3), default=3,
                        help="RESP version of both Python clients (3: redis-py's default)")
    parser.add_argument("--no-pin", action="store_true",
                        help="do not pin the node and the load generators to separate CPUs")
    parser.add_argument("--profile", type=Path, metavar="DIR",
                        help="also sample a worker run and a pipelined-add load with py-spy")
    parser.add_argument("--py-spy", help="py-spy's path (default: on PATH or beside python)")
    return parser.parse_args(argv)


def parser_name(node: Node) -> str:
    with redis.Redis(host=HOST, port=node.port, protocol=node.protocol) as conn:
        conn.ping()
        connection = conn.connection_pool.get_connection()
        try:
            return type(connection._parser).__name__
        finally:
            conn.connection_pool.release(connection)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    spy = py_spy_binary(args.py_spy) if args.profile else ""
    settings = Settings.for_mode(args)
    pinning = Pinning(not args.no_pin)
    pinning.pin_this_process()
    series = make_series()
    started = time.perf_counter()
    with Node(pinning, settings.protocol) as node:
        print_header("bench_client: disque_py.client's Client and Worker, one node", pinning,
                     [("disque-py source", source_state()),
                      ("redis-py", f"{redis.__version__}, RESP{settings.protocol}, "
                                   f"parser {parser_name(node)}")])
        print(f"settings: {settings}")
        for round_index in range(settings.rounds):
            run_round(node, settings, round_index, series)
        print_commands([f"node: {shlex.join(node.server.command_line())}",
                        f"fill before a worker run: pipelined ADDJOB {QUEUE} "
                        f"<{len(BODY)}-byte body> 0 (after PAUSE {QUEUE} out for "
                        f"worker-released)",
                        *(f"{key}: cd {BENCH_DIR} && {series[key].command}"
                          for key in WORKER_LOADS),
                        *(series[key].command for key in ("rb-c1", "rb-c50"))])
        print_rounds(series)
        print_throughput(series)
        print_per_call(series)
        print_targets(series)
        if args.profile:
            profile(node, settings, args.profile, spy, pinning)
    print(f"\ntotal time {time.perf_counter() - started:.0f}s; load average now "
          + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
