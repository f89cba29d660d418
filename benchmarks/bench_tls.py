"""ADDJOB over TLS beside the plain port, and the plain port with and without TLS.

    python benchmarks/bench_tls.py [--quick] [--rounds N] [--requests N] [--no-pin]

Two nodes run side by side (pinned together to the first CPU; only one is
loaded at a time): one with `tls-port` set (a CA, server and client
certificates made by disque_py/tools/pki.py with openssl, client certificates
required) and one without TLS. Each round measures, in an order that
rotates between rounds, `redis-benchmark -c 50 -n N ADDJOB q <100 bytes> 0`
(not pipelined) against

  plain-no-tls  the node without TLS, its plain port
  plain         the node with TLS, its plain port
  tls           the node with TLS, its TLS port (redis-benchmark --tls
                --cacert --cert --key)

after a DEBUG FLUSHALL of the node and a second for it to free the jobs.
The summary gives each median rate, tls / plain (the price of TLS) and
plain / plain-no-tls (what configuring TLS costs the plain port: nothing is
expected), both paired by round, and the server's and redis-benchmark's
CPU: a loader near 100% means the figure is redis-benchmark's limit.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (BODY, REDIS_BENCHMARK, DisqueServer, Pinning,  # noqa: E402
                    median, print_commands, print_header, print_table, ratio,
                    redis_benchmark_command, run_redis_benchmark, scratch_dir)
from disque_py.tools.pki import Pki  # noqa: E402
from disque_py.tools.loopback import free_port  # noqa: E402

CONNECTIONS = 50
MODES = ("plain-no-tls", "plain", "tls")
ADDJOB = ["ADDJOB", "q", BODY.decode(), "0"]
SETTLE_S = 1.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 round of 50,000 requests")
    parser.add_argument("--rounds", type=int, help="rounds (default 3, 1 with --quick)")
    parser.add_argument("--requests", type=int,
                        help="ADDJOBs per measurement (default 300,000; 50,000 with --quick)")
    parser.add_argument("--no-pin", action="store_true",
                        help="do not pin servers and load generators to separate CPUs")
    args = parser.parse_args(argv)
    missing = [tool for tool in (REDIS_BENCHMARK, "openssl") if shutil.which(tool) is None]
    if missing:
        sys.exit(f"missing on PATH: {', '.join(missing)} (Debian: apt-get install "
                 "redis-tools openssl)")
    rounds = args.rounds or (1 if args.quick else 3)
    requests = args.requests or (50_000 if args.quick else 300_000)
    pinning = Pinning(not args.no_pin)
    pinning.pin_this_process()
    workdir = scratch_dir("bench-tls-")
    pki = Pki(workdir / "pki")
    server_leaf, client_leaf = pki.issue("server"), pki.issue("client")
    tls_port = free_port()
    with_tls = DisqueServer(workdir / "with-tls", pinning, [
        "--tls-port", str(tls_port), "--tls-cert-file", str(server_leaf.cert),
        "--tls-key-file", str(server_leaf.key), "--tls-ca-cert-file", str(pki.ca)])
    without = DisqueServer(workdir / "without-tls", pinning)
    tls_flags = ["--tls", "--cacert", str(pki.ca), "--cert", str(client_leaf.cert),
                 "--key", str(client_leaf.key)]
    targets = {
        "plain-no-tls": (without, without.port, []),
        "plain": (with_tls, with_tls.port, []),
        "tls": (with_tls, tls_port, tls_flags),
    }
    print_header("bench_tls: ADDJOB over TLS and plain", pinning)
    print(f"settings: rounds={rounds} requests={requests} connections={CONNECTIONS} "
          f"body={len(BODY)} bytes, not pipelined; certificates: EC P-256 ({pki.dir})")
    rates = {mode: [] for mode in MODES}
    server_cpu = {mode: [] for mode in MODES}
    loader_cpu = {mode: [] for mode in MODES}
    commands = {}
    started = time.perf_counter()
    with_tls.start()
    without.start()
    try:
        for round_index in range(rounds):
            print(f"\nround {round_index + 1}/{rounds} ...", flush=True)
            shift = round_index % len(MODES)
            for mode in MODES[shift:] + MODES[:shift]:
                server, port, flags = targets[mode]
                server.flush()
                time.sleep(SETTLE_S)
                cmd = redis_benchmark_command(port, requests, clients=CONNECTIONS,
                                              command_args=ADDJOB)
                cmd[1:1] = flags
                rps, cpu, loader = run_redis_benchmark(cmd, server.pid)
                rates[mode].append(rps)
                server_cpu[mode].append(cpu)
                loader_cpu[mode].append(loader)
                shown = [f"<{len(BODY)}-byte body>" if part == ADDJOB[2] else part
                         for part in cmd]
                commands[mode] = (f"[{mode}] server: {shlex.join(server.command_line())}\n"
                                  f"  [{mode}] load:   {shlex.join(shown)}")
                print(f"  {mode:13} {rps:>10,.0f} ADDJOB/s  server CPU {cpu:.0f}%  "
                      f"loader CPU {loader:.0f}%", flush=True)
    finally:
        with_tls.stop()
        without.stop()
    print_commands(commands[mode] for mode in MODES)
    print_table(["round", *MODES], [[i + 1] + [rates[m][i] for m in MODES]
                                    for i in range(rounds)], title="per round (ADDJOB/s)")
    rows = [[mode, median(rates[mode]), f"{median(server_cpu[mode]):.0f}%",
             f"{median(loader_cpu[mode]):.0f}%"] for mode in MODES]
    print_table(["mode", "ADDJOB/s (median)", "server CPU", "loader CPU"], rows,
                title="summary")
    for name, ours, base in (("tls / plain", "tls", "plain"),
                             ("plain / plain-no-tls", "plain", "plain-no-tls")):
        ratios = [ratio(a, b) for a, b in zip(rates[ours], rates[base])]
        print(f"{name:22} {median(ratios):.2f}x (rounds {min(ratios):.2f}-{max(ratios):.2f})")
    print(f"\ntotal time {time.perf_counter() - started:.0f}s; load average now "
          + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
