"""Replication: ADDJOB REPLICATE 3 on a three-node cluster.

    python benchmarks/bench_replication.py [--disque PATH] [--secret] [--rounds N] [--quick]
                                           [--no-pin]

Three nodes on loopback joined with CLUSTER MEET; redis-benchmark sends
`ADDJOB bench <100 bytes> 0 REPLICATE 3` to node0, which answers each one
only once both other nodes hold a copy:

  c1        1 connection, no pipelining: one replication round trip per job
  c50       50 connections, no pipelining
  c50 P16   50 connections, 16 ADDJOBs pipelined per connection (disque-py
            lets pipelined ADDJOBs wait for their copies together; Disque
            blocks the connection on each one)
  ASYNC c50 the same with ASYNC: answered at once, copied in the background
  AOF c50   c50 on nodes started with `appendonly yes, appendfsync always`:
            a copy is confirmed once it is on disk on its holder

The yardstick is the original Disque 1.0-rc1 binary, when `--disque PATH`
(or DISQUE_BINARY) names one, measured in the same run with the same load;
Debian does not package it, so without it the table has our rows only.
`--secret` adds a disque-py cluster whose bus links authenticate
(`cluster-secret`), to compare with the plain one in the same run.
Every server kind's cluster runs side by side and the rounds alternate
which kind goes first, so drift on a loaded machine falls on both.
The three servers of a cluster share the first CPU when the machine has two
or more (redis-benchmark runs on the others): the figures are three nodes
on one core. Every node is flushed (DEBUG FLUSHALL) between loads.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (BODY, DisqueServer, OriginalDisque, Pinning, median,  # noqa: E402
                    ordered, print_commands, print_header, print_table, redis_benchmark_command,
                    run_redis_benchmark, start_cluster, stop_all)

NODES = 3
QUEUE = "bench"
BENCH_SECRET = "bench-cluster-secret"


class SecretDisqueServer(DisqueServer):
    """disque-py with an authenticated cluster bus."""

    label = "disque-py (cluster-secret)"

    def __init__(self, directory: Path, pinning: Pinning, args=()) -> None:
        super().__init__(directory, pinning, ["--cluster-secret", BENCH_SECRET, *args])


class Load(NamedTuple):
    name: str
    clients: int
    pipeline: int
    requests: int
    addjob_options: tuple = ()
    server_args: tuple = ()


FSYNC_ALWAYS = ("--appendonly", "yes", "--appendfsync", "always")
LOADS = (Load("c1", 1, 1, 5_000), Load("c50", 50, 1, 50_000),
         Load("c50 P16", 50, 16, 200_000), Load("ASYNC c50", 50, 1, 50_000, ("ASYNC",)),
         Load("AOF always c50", 50, 1, 20_000, server_args=FSYNC_ALWAYS))


def measure(kinds, pinning: Pinning, loads, rounds: int):
    """Rows (kind, load, median rate, node0 CPU) for every kind and load;
    loads that start their nodes alike share one cluster per kind."""
    rates = {(kind.label, load.name): [] for kind in kinds for load in loads}
    cpus = {key: [] for key in rates}
    commands_run = []
    for server_args in dict.fromkeys(load.server_args for load in loads):
        clusters = {}
        try:
            for kind in kinds:
                clusters[kind] = start_cluster(pinning, NODES, f"bench-replication-{kind.__name__}-",
                                               server_class=kind, server_args=server_args)
            for load in (load for load in loads if load.server_args == server_args):
                for round_index in range(rounds):
                    for kind in ordered(round_index, kinds):
                        servers = clusters[kind]
                        cmd = redis_benchmark_command(
                            servers[0].port, load.requests, load.clients, load.pipeline,
                            command_args=["ADDJOB", QUEUE, BODY.decode(), "0", "REPLICATE", "3",
                                          *load.addjob_options])
                        rate, cpu, _ = run_redis_benchmark(cmd, servers[0].pid)
                        rates[kind.label, load.name].append(rate)
                        cpus[kind.label, load.name].append(cpu)
                        for server in servers:
                            server.flush()
                commands_run.append(cmd)
        finally:
            for servers in clusters.values():
                stop_all(servers)
    rows = [[kind.label, load.name, median(rates[kind.label, load.name]),
             f"{median(cpus[kind.label, load.name]):.0f}%"] for kind in kinds for load in loads]
    return rows, commands_run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--disque", default=os.environ.get("DISQUE_BINARY", ""),
                        help="path of the original disque-server, the yardstick")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="a tenth of the requests, 1 round")
    parser.add_argument("--no-pin", action="store_true")
    parser.add_argument("--secret", action="store_true",
                        help="also measure a cluster whose bus links authenticate")
    args = parser.parse_args(argv)
    pinning = Pinning(enabled=not args.no_pin)
    pinning.pin_this_process()
    loads = [load._replace(requests=load.requests // 10) if args.quick else load
             for load in LOADS]
    rounds = 1 if args.quick else args.rounds
    print_header("ADDJOB REPLICATE 3 on a three-node cluster", pinning)
    kinds = [DisqueServer]
    if args.secret:
        kinds.append(SecretDisqueServer)
    if args.disque:
        OriginalDisque.binary = args.disque
        kinds.append(OriginalDisque)
    rows, commands_run = measure(kinds, pinning, loads, rounds)
    if len(kinds) > 1:
        ours = {load: rate for label, load, rate, _ in rows if label == DisqueServer.label}
        for row in rows:
            row.append(f"{ours[row[1]] / row[2]:.2f}x" if row[0] != DisqueServer.label else "")
    headers = ["server", "load", "ADDJOB/s", "node0 CPU"]
    if len(kinds) > 1:
        headers.append("disque-py / this")
    print_table(headers, rows, title=f"median of {rounds} round(s)")
    print_commands(commands_run)
    return 0


if __name__ == "__main__":
    sys.exit(main())
