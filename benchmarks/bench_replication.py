"""Synchronous replication: ADDJOB REPLICATE 3 on a three-node cluster.

    python benchmarks/bench_replication.py [--disque PATH] [--secret] [--rounds N] [--quick]
                                           [--no-pin]

Three nodes on loopback joined with CLUSTER MEET; redis-benchmark sends
`ADDJOB bench <100 bytes> 0 REPLICATE 3` to node0, which answers each one
only once both other nodes hold a copy:

  c1      1 connection, no pipelining: one replication round trip per job
  c50     50 connections, no pipelining
  c50 P16 50 connections, 16 ADDJOBs pipelined per connection (disque-py
          lets pipelined ADDJOBs wait for their copies together; Disque
          blocks the connection on each one)

The yardstick is the original Disque 1.0-rc1 binary, when `--disque PATH`
(or DISQUE_BINARY) names one, measured in the same run with the same load;
Debian does not package it, so without it the table has our rows only.
`--secret` adds a second disque-py cluster whose bus links authenticate
(`cluster-secret`), to compare with the plain one in the same run.
The three servers of a cluster share the first CPU when the machine has two
or more (redis-benchmark runs on the others): the figures are three nodes
on one core. Every node is flushed (DEBUG FLUSHALL) between loads.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (BODY, DisqueServer, OriginalDisque, Pinning, median,  # noqa: E402
                    print_commands, print_header, print_table, redis_benchmark_command,
                    run_redis_benchmark, start_cluster, stop_all)

NODES = 3
QUEUE = "bench"
BENCH_SECRET = "bench-cluster-secret"


class SecretDisqueServer(DisqueServer):
    """disque-py with an authenticated cluster bus."""

    label = "disque-py (cluster-secret)"

    def __init__(self, directory: Path, pinning: Pinning) -> None:
        super().__init__(directory, pinning, ["--cluster-secret", BENCH_SECRET])
LOADS = (("c1", 1, 1, 5_000), ("c50", 50, 1, 50_000), ("c50 P16", 50, 16, 200_000))


def measure(kind, pinning: Pinning, loads, rounds: int) -> list[list]:
    servers = start_cluster(pinning, NODES, f"bench-replication-{kind.__name__}-",
                            server_class=kind)
    rows = []
    commands_run = []
    try:
        for name, clients, pipeline, requests in loads:
            rates, cpus = [], []
            for _ in range(rounds):
                cmd = redis_benchmark_command(
                    servers[0].port, requests, clients, pipeline,
                    command_args=["ADDJOB", QUEUE, BODY.decode(), "0", "REPLICATE", "3"])
                rate, cpu, _ = run_redis_benchmark(cmd, servers[0].pid)
                rates.append(rate)
                cpus.append(cpu)
                for server in servers:
                    server.flush()
            rows.append([kind.label, name, median(rates), f"{median(cpus):.0f}%"])
            commands_run.append(cmd)
    finally:
        stop_all(servers)
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
    loads = [(n, c, p, r // 10 if args.quick else r) for n, c, p, r in LOADS]
    rounds = 1 if args.quick else args.rounds
    print_header("ADDJOB REPLICATE 3 on a three-node cluster", pinning)
    kinds = [DisqueServer]
    if args.secret:
        kinds.append(SecretDisqueServer)
    if args.disque:
        OriginalDisque.binary = args.disque
        kinds.append(OriginalDisque)
    rows, commands_run = [], []
    for kind in kinds:
        kind_rows, kind_commands = measure(kind, pinning, loads, rounds)
        rows += kind_rows
        commands_run += kind_commands
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
