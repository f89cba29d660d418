"""The cluster path: three disque-py nodes beside three Disque 1.0-rc1 nodes, in one run.

    python benchmarks/bench_cluster.py --disque PATH [--rounds N] [--quick] [--secret]
                                       [--no-pin]

Prints the table of issue 35 ("the cluster path at engine speed"). Each
server kind gets a cluster of three nodes on loopback joined with CLUSTER
MEET: disque-py, Disque C (the disque-server `--disque` or DISQUE_BINARY
names; without it, disque-py's figures only) and, with `--secret`,
disque-py whose bus links authenticate (`cluster-secret`), shown beside the
plain one. The body is 100 bytes. The rows:

  ADDJOB REPLICATE 3, c1   redis-benchmark -c 1 ADDJOB bench <body> 0
                           REPLICATE 3 to node0, which answers once both other
                           nodes hold a copy (jobs/s); the same run's p50 and p99
                           latency (redis-benchmark --csv, ms) are their own rows
  c50, c50 -P 16           the same with 50 connections, and 16 pipelined each
  ASYNC c50                ... REPLICATE 3 ASYNC: answered at once, copied after
  appendfsync always c50   c50 on a second cluster of each kind whose nodes run
                           `appendonly yes, appendfsync always` (in $TMPDIR: its
                           filesystem is printed; fsync on tmpfs costs nothing)
  cluster cycle            loader/cycle.c (compiled with cc -O2): 50 connections
                           to node0, each looping ADDJOB q<i> <body> 0 REPLICATE 3
                           -> GETJOB FROM q<i> -> ACKJOB <id>, each command once
                           the previous reply is in; the ACKJOB makes node0
                           collect acks from every holder (cycles/s)
  federation               loader/cycle.c -f: 50 producer connections to node0
                           (ADDJOB fed <body> 0 REPLICATE 3) and 8 consumers on
                           node1 (GETJOB TIMEOUT 100 COUNT 100 FROM fed, then
                           ACKJOB of every ID), so every job travels node0 ->
                           node1 (NEEDJOBS / YOURJOBS); producers wait while
                           10,000 jobs are added and not yet delivered, and the
                           consumers connect once node0 has answered 100 ADDJOBs
                           (Disque C's first NEEDJOBS broadcast, finding no job,
                           is repeated only 4 s later). Jobs/s delivered on node1;
                           the jobs added and not yet delivered at the end are
                           a row (near 10,000: carrying jobs to node1 is the
                           limit; far under: adding them is)
  CPU per replicated job   utime and stime (/proc/PID/stat) of the three nodes,
                           summed, over the c50 run, divided by its requests (us);
                           user and kernel are rows of their own

The loaders measure for a fixed time after a warm-up; each reports its own
CPU (and user-space part). The servers' CPU is the three nodes' together,
in percent of one core: with pinning (two or more CPUs) every server runs
on the first CPU and every load generator on the others, so near 100% means
the cluster is saturated, and a loader near 100% means the figure is the
loader's.

Each load runs `--rounds` times (5 by default) on the same clusters, every
node flushed (DEBUG FLUSHALL) before each load, the kind that goes first
alternating between rounds. Reported per row: each kind's median, the median
(range) of the per-round ratios disque-py / Disque C, the issue's target on
that ratio and whether it is met (for latency and CPU lower is better), the
servers' and loaders' CPU, and every command line that made a number.
`--quick`: a tenth of the requests, shorter loader runs, one round.
Rules kept: 127.0.0.1 only, free ports, fresh temporary directories, every
server stopped by its own PID.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))

from aof_common import NO_AUTO_REWRITE, filesystem_of  # noqa: E402
from common import (BODY, HOST, REDIS_BENCHMARK, DisqueServer, Pinning,  # noqa: E402
                    measure_redis_benchmark, ordered, print_commands, print_header,
                    redis_benchmark_command, require_tools, scratch_dir, start_cluster,
                    stop_all)
from compare import (COMPILER, SHORT, Row, add_disque_option, compile_loader,  # noqa: E402
                     print_latest, print_rounds, print_summary, run_loader, server_kinds,
                     tool_versions)

NODES = 3
QUEUE = "bench"
REPLICATE = ("REPLICATE", str(NODES))
CONNECTIONS = 50
PIPELINE = 16
FED_CONSUMERS = 8
FED_BACKLOG = 10_000
SETTLE_S = 0.5          # disque-py frees flushed jobs in slices, a few per tick
US = 1e6
BENCH_SECRET = "bench-cluster-secret"
FSYNC_ALWAYS = ("--appendonly", "yes", "--appendfsync", "always", *NO_AUTO_REWRITE)


class SecretDisqueServer(DisqueServer):
    """disque-py with an authenticated cluster bus."""

    label = "disque-py (cluster-secret)"

    def __init__(self, directory: Path, pinning: Pinning, args=()) -> None:
        super().__init__(directory, pinning, ["--cluster-secret", BENCH_SECRET, *args])


SHORT[SecretDisqueServer.label] = "secret"       # its name in the CPU columns' headers


@dataclass
class Settings:
    rounds: int
    c1_requests: int
    c50_requests: int
    pipelined_requests: int
    aof_requests: int
    loader_warmup_s: float
    loader_seconds: float

    @classmethod
    def for_mode(cls, quick: bool, rounds: int) -> "Settings":
        if quick:
            return cls(1, 500, 10_000, 20_000, 2_000, 0.3, 1.5)
        return cls(rounds, 5_000, 100_000, 200_000, 20_000, 1.0, 5.0)


def make_rows() -> dict[str, Row]:
    """The issue's rows, by key, in the order the table prints them."""
    def rate(name: str, at_least: float) -> Row:
        return Row(name, f">= {at_least:.1f}x", at_least=at_least)
    return {
        "c1": rate("ADDJOB REPLICATE 3, c1 (jobs/s)", 1.0),
        "c50": rate("ADDJOB REPLICATE 3, c50 (jobs/s)", 2.0),
        "p16": rate(f"ADDJOB REPLICATE 3, c50 -P {PIPELINE} (jobs/s)", 2.5),
        "async": rate("ADDJOB REPLICATE 3 ASYNC, c50 (jobs/s)", 2.0),
        "aof": rate("ADDJOB REPLICATE 3, appendfsync always, c50 (jobs/s)", 1.5),
        "cycle": rate("cluster cycle ADDJOB R3 -> GETJOB -> ACKJOB, c50 (cycles/s)", 1.5),
        "federation": rate(f"federation node0 -> node1, {CONNECTIONS} + {FED_CONSUMERS} conns "
                           f"(jobs/s)", 1.5),
        "backlog": Row(f"  added, not yet delivered at the end (of {FED_BACKLOG:,})"),
        "cpu": Row("CPU per replicated job, 3 nodes, c50 (us)", "<= 0.6x", at_most=0.6),
        "cpu_user": Row("  of which user (us)"),
        "cpu_kernel": Row("  of which kernel (us)"),
        "p50": Row("ADDJOB REPLICATE 3, c1: p50 latency (ms)", "<= 1.0x", at_most=1.0),
        "p99": Row("ADDJOB REPLICATE 3, c1: p99 latency (ms)", "<= 1.0x", at_most=1.0),
    }


# ---------------------------------------------------------------------- loads

@dataclass
class Sample:
    """One load on one cluster: values by row key (the first is the load's own
    row, which the CPU figures go with), CPU, and the command that ran."""

    values: dict[str, float]
    server_cpu: float
    loader_cpu: float
    loader_user: float | None
    command: list[str]


@dataclass
class Load:
    key: str
    run: Callable[[list, Settings, Path], Sample]
    server_args: tuple = ()


def addjob_load(key: str, requests: Callable[[Settings], int], clients: int = CONNECTIONS,
                pipeline: int = 1, options: tuple = (), server_args: tuple = ()) -> Load:
    """redis-benchmark's ADDJOB REPLICATE 3 [options] to node0; the c1 load adds
    its latencies, the c50 load the CPU per job of the three nodes."""
    def run(servers: list, settings: Settings, loader: Path) -> Sample:
        count = requests(settings)
        cmd = redis_benchmark_command(servers[0].port, count, clients, pipeline,
                                      command_args=["ADDJOB", QUEUE, BODY.decode(), "0",
                                                    *REPLICATE, *options])
        result = measure_redis_benchmark(cmd, [server.pid for server in servers])
        values = {key: result.rate}
        if key == "c1" and "p50_latency_ms" in result.fields:
            values.update(p50=float(result.fields["p50_latency_ms"]),
                          p99=float(result.fields["p99_latency_ms"]))
        if key == "c50":
            user, kernel = US * result.server_user_s / count, US * result.server_system_s / count
            values.update(cpu=user + kernel, cpu_user=user, cpu_kernel=kernel)
        return Sample(values, result.server_cpu, result.loader_cpu, None, cmd)
    return Load(key, run, server_args)


def cycle_command(loader: Path, servers: list, settings: Settings) -> list[str]:
    return [str(loader), HOST, str(servers[0].port), str(CONNECTIONS),
            str(settings.loader_warmup_s), str(settings.loader_seconds), *REPLICATE]


def federation_command(loader: Path, servers: list, settings: Settings) -> list[str]:
    return [str(loader), "-f", str(servers[1].port), "-c", str(FED_CONSUMERS),
            "-b", str(FED_BACKLOG), *cycle_command(loader, servers, settings)[1:]]


def loader_load(key: str, make_command: Callable[[Path, list, Settings], list[str]],
                rate_field: str) -> Load:
    """loader/cycle.c; the federation's backlog at the end is a row of its own."""
    def run(servers: list, settings: Settings, loader: Path) -> Sample:
        cmd = make_command(loader, servers, settings)
        result = run_loader(cmd, [server.pid for server in servers])
        values = {key: result.fields[rate_field]}
        if "backlog" in result.fields:
            values["backlog"] = result.fields["backlog"]
        return Sample(values, result.server_cpu, result.fields["cpu_percent"],
                      result.fields["user_percent"], cmd)
    return Load(key, run)


LOADS = (
    addjob_load("c1", lambda s: s.c1_requests, clients=1),
    addjob_load("c50", lambda s: s.c50_requests),
    addjob_load("p16", lambda s: s.pipelined_requests, pipeline=PIPELINE),
    addjob_load("async", lambda s: s.c50_requests, options=("ASYNC",)),
    loader_load("cycle", cycle_command, "cycles_per_s"),
    loader_load("federation", federation_command, "jobs_per_s"),
    addjob_load("aof", lambda s: s.aof_requests, server_args=FSYNC_ALWAYS),
)


# ---------------------------------------------------------------- measuring

def flush_cluster(servers: list) -> None:
    for server in servers:
        server.flush()
    time.sleep(SETTLE_S)


def record(rows: dict[str, Row], label: str, sample: Sample, first_round: bool) -> None:
    main_key, *others = sample.values
    rows[main_key].add(label, sample.values[main_key], sample.server_cpu, sample.loader_cpu,
                       sample.loader_user)
    for key in others:
        rows[key].add(label, sample.values[key])
    if first_round:
        rows[main_key].commands.append(f"[{label}] {shlex.join(sample.command)}")


def start_clusters(kinds: list, pinning: Pinning, server_args: tuple) -> dict:
    """One cluster of NODES nodes per kind, meshed, started with `server_args`."""
    clusters = {}
    try:
        for kind in kinds:
            clusters[kind] = start_cluster(pinning, NODES, f"bench-cluster-{kind.__name__}-",
                                           server_class=kind, server_args=server_args)
    except BaseException:
        for servers in clusters.values():
            stop_all(servers)
        raise
    return clusters


def measure_group(kinds: list, pinning: Pinning, settings: Settings, loader: Path,
                  loads: list[Load], rows: dict[str, Row]) -> list[str]:
    """The loads that share a server configuration, every round, on one
    cluster per kind; returns the clusters' command lines."""
    clusters = start_clusters(kinds, pinning, loads[0].server_args)
    try:
        shown = [f"[{kind.label}] {shlex.join(server.command_line())}"
                 for kind, servers in clusters.items() for server in servers]
        if loads[0].server_args:
            shown.append(filesystem_of(next(iter(clusters.values()))[0].dir))
        for round_index in range(settings.rounds):
            print(f"\nround {round_index + 1}/{settings.rounds}"
                  + (f", servers with {' '.join(loads[0].server_args)}"
                     if loads[0].server_args else ""), flush=True)
            for load in loads:
                for kind in ordered(round_index, kinds):
                    flush_cluster(clusters[kind])
                    record(rows, kind.label, load.run(clusters[kind], settings, loader),
                           round_index == 0)
                print_latest(rows[load.key])
    finally:
        for servers in clusters.values():
            stop_all(servers)
    return shown


def measure(kinds: list, pinning: Pinning, settings: Settings, loader: Path,
            rows: dict[str, Row]) -> list[str]:
    """Every load, grouped by server configuration; returns the servers' command lines."""
    shown = []
    for server_args in dict.fromkeys(load.server_args for load in LOADS):
        group = [load for load in LOADS if load.server_args == server_args]
        shown += measure_group(kinds, pinning, settings, loader, group, rows)
    return shown


# --------------------------------------------------------------------- main

def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_disque_option(parser)
    parser.add_argument("--rounds", type=int, default=5, help="rounds of every load (5)")
    parser.add_argument("--quick", action="store_true",
                        help="a tenth of the requests, 1.5 s loader runs, 1 round")
    parser.add_argument("--secret", action="store_true",
                        help="also measure a disque-py cluster whose bus links authenticate")
    parser.add_argument("--no-pin", action="store_true",
                        help="do not pin servers and load generators to separate CPUs")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    require_tools([REDIS_BENCHMARK, COMPILER], hint="")
    settings = Settings.for_mode(args.quick, args.rounds)
    pinning = Pinning(not args.no_pin)
    pinning.pin_this_process()
    print_header("bench_cluster: three disque-py nodes vs three Disque 1.0-rc1 nodes", pinning,
                 tool_versions(args.disque))
    print(f"settings: {settings}")
    started = time.perf_counter()
    kinds = server_kinds(args.disque) + ([SecretDisqueServer] if args.secret else [])
    rows = make_rows()
    loader, compile_cmd = compile_loader(scratch_dir("bench-cluster-loader-"))
    shown = measure(kinds, pinning, settings, loader, rows)
    print_commands([shlex.join(compile_cmd), *shown,
                    f"CLUSTER MEET {HOST} <port of node1>, then <port of node2>  (on node0)",
                    *(line for row in rows.values() for line in row.commands)])
    print_rounds(list(rows.values()), "per round")
    print_summary(list(rows.values()),
                  f"summary: medians of {settings.rounds} round(s); ratio = median (range) of "
                  f"the per-round ratios disque-py / Disque C, lower is better for latency and "
                  f"CPU.\nserver CPU: the {NODES} nodes together, % of one core; loader CPU: "
                  f"redis-benchmark or loader/cycle.c (user: its user-space part)")
    print(f"\ntotal time {time.perf_counter() - started:.0f}s; load average now "
          + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
