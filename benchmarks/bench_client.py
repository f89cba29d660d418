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
                    of execute_command("ADDJOB", ...), blocks of 16
  socket floor      the same adds, blocks of 16, packed by hiredis.pack_command
                    and written on a plain socket, replies counted off a
                    hiredis.Reader: what Python costs with no client at all
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
import os
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))

from client_loads import (BENCH_DIR, PIPELINE, WORKER_LOADS, Node, Series,  # noqa: E402
                          add_calls, benchmark_adds, client_pipeline_adds, get_ack_calls,
                          per_call, python_adds, redis_pipeline_adds, socket_pipeline_adds,
                          worker_run)
from common import BODY, HOST, Pinning, median, ordered, print_commands  # noqa: E402
from common import print_header, print_table, ratio  # noqa: E402
from compare import source_state  # noqa: E402
from disque_py.client import Client  # noqa: E402
from noop_workers import CONCURRENCY, QUEUE  # noqa: E402
from sampling import Sampler, print_samples, py_spy_binary  # noqa: E402

BIG_PIPELINE = 256
PROFILE_SCALE = 3            # the sampled loads are this many times --jobs (more samples)


@dataclass
class Settings:
    rounds: int
    jobs: int                # worker runs and pipelined adds
    calls: int               # per-call loads, each side
    benchmark_requests: int  # redis-benchmark -c 50 (-c 1 sends `jobs`)
    protocol: int

    @classmethod
    def for_mode(cls, args: argparse.Namespace) -> "Settings":
        jobs = args.jobs or (20_000 if args.quick else 200_000)
        calls = args.calls or (2_000 if args.quick else 20_000)
        return cls(args.rounds or (1 if args.quick else 3), jobs, calls, 3 * jobs,
                   args.protocol)


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
        "socket-pipe16": Series(f"socket + hiredis (Python's floor), blocks of {PIPELINE}", rate),
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
        def python(run: Callable[[int], int]) -> Callable[[Series], None]:
            return lambda into: python_adds(node, jobs, into, run)
        loads: dict[str, Callable[[Series], None]] = {   # the target's pair side by side
            "pipe16": python(lambda n: client_pipeline_adds(client, n, PIPELINE)),
            "rb-c1": lambda into: benchmark_adds(node, jobs, 1, into),
            "socket-pipe16": python(lambda n: socket_pipeline_adds(node.port, n, PIPELINE)),
            "redis-pipe16": python(lambda n: redis_pipeline_adds(conn, n, PIPELINE)),
            "pipe256": python(lambda n: client_pipeline_adds(client, n, BIG_PIPELINE)),
            "rb-c50": lambda into: benchmark_adds(node, settings.benchmark_requests, 50, into),
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


def overhead(ours: list[float], theirs: list[float]) -> float:
    """The median of the per-round overheads, in percent (ours / theirs - 1)."""
    return 100 * (median([ratio(a, b) for a, b in zip(ours, theirs)]) - 1)


def overhead_text(ours: list[float], theirs: list[float]) -> str:
    each = [100 * (ratio(a, b) - 1) for a, b in zip(ours, theirs)]
    text = f"{overhead(ours, theirs):+.1f}%"
    return text + (f" ({min(each):+.1f} to {max(each):+.1f})" if len(each) > 1 else "")


def print_throughput(series: dict[str, Series]) -> None:
    rows = []
    for key in (*WORKER_LOADS, "pipe16", "pipe256", "redis-pipe16", "socket-pipe16", "rb-c1",
                "rb-c50"):
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
        wall = overhead_text(ours.values, theirs.values)
        cpu = overhead_text(ours.cpu_us, theirs.cpu_us)
        rows.append([f"{ours.name} vs {theirs.name}", median(ours.values),
                     median(theirs.values), wall, median(ours.cpu_us), median(theirs.cpu_us),
                     cpu, f"{median(ours.server_cpu):.0f}%"])
    print_table(["calls (one connection, unpipelined)", "Client us", "redis-py us",
                 "Client's overhead", "Client CPU us", "redis-py CPU us", "in CPU",
                 "node CPU"], rows,
                title="per call: microseconds per call (per get + ack pair), wall clock "
                      "and this process's CPU")


def print_targets(series: dict[str, Series]) -> None:
    worker = series["worker-async"].values
    rows = [["async worker, jobs/s", f"{median(worker):,.0f}", ">= 25,000",
             "met" if median(worker) >= 25_000 else "missed"]]
    for ours, theirs, target in (("pipe16", "rb-c1", 0.7), ("pipe16", "rb-c50", None),
                                 ("pipe256", "rb-c1", None), ("pipe256", "rb-c50", None),
                                 ("redis-pipe16", "rb-c1", None),
                                 ("socket-pipe16", "rb-c1", None)):
        value, text = ratio_text(series[ours].values, series[theirs].values)
        rows.append([f"{series[ours].name} / {series[theirs].name}", text,
                     f">= {target}x" if target else "(information)",
                     ("met" if value >= target else "missed") if target else ""])
    for kind, label in (("add", "Client.add"), ("getack", "Client.get + ack")):
        rows.append([f"{label}: time per call over execute_command's",
                     overhead_text(series[f"{kind}-Client"].values,
                                   series[f"{kind}-redis-py"].values), "<= +10%",
                     "met" if overhead(series[f"{kind}-Client"].values,
                                       series[f"{kind}-redis-py"].values) <= 10 else "missed"])
    print_table(["figure", "measured", "target", ""], rows,
                title="issue 36's targets (medians of per-round ratios, range in brackets)")


def print_rounds(series: dict[str, Series]) -> None:
    rows = [[item.name, item.unit, *item.values] for item in series.values()]
    rounds = max(len(item.values) for item in series.values())
    print_table(["load", "unit", *(f"round {i + 1}" for i in range(rounds))], rows,
                title="per round")


# -------------------------------------------------------------------- profile

def profile(node: Node, settings: Settings, directory: Path, binary: str,
            pinning: Pinning) -> None:
    """py-spy on one more async worker run, and on this process over one
    pipelined-add load (blocks of 16)."""
    directory.mkdir(parents=True, exist_ok=True)
    jobs = PROFILE_SCALE * settings.jobs // PIPELINE * PIPELINE
    samples, series = directory / "worker.txt", Series("sampled worker", "jobs/s")
    worker_run(node, WORKER_LOADS["worker-async"], jobs, series, sampler=lambda pid:
               Sampler(binary, pid, samples, pinning.server_prefix()))
    print_samples(samples, jobs, sampled_title("async worker", series))
    samples, series = directory / "add_pipeline.txt", Series("sampled adds", "jobs/s")
    with Client(node.url()) as client:
        client.add(QUEUE, BODY)                       # HELLO and the pool, before sampling
        with Sampler(binary, os.getpid(), samples, pinning.server_prefix()):
            python_adds(node, jobs, series, lambda n: client_pipeline_adds(client, n, PIPELINE))
    print_samples(samples, jobs, sampled_title(f"Client.add, pipeline() blocks of {PIPELINE}",
                                               series))


def sampled_title(name: str, series: Series) -> str:
    return (f"{name}: {series.values[-1]:,.0f} jobs/s while sampled, "
            f"{series.cpu_us[-1]:.2f} us of CPU (user + system) per job")


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
