"""What job options cost (issues 19 and 20): plain ADDJOB against an
earlier release, and jobs with BACKOFF and MAXDELIVERIES, PRIORITY, and a
DEDUP key against a plain one, in the same run.

    .venv/bin/python benchmarks/bench_job_options.py [--rounds N] [--quick]
        [--baseline REV] [--skip-callgrind] [--callgrind-runs N] [--no-pin]

The baseline is a commit of this repository (default: c3fe348, the last
one without job options), unpacked with `git archive` into a scratch
directory and built there (`setup.py build_ext --inplace`); its server runs
with PYTHONPATH set to that directory, so it imports its own disque_py.

Rows, each server alone on the server CPU, the load on the other:
  instructions per ADDJOB  callgrind's user-space instruction count over N
                           pipelined ADDJOBs after a warm-up (as
                           bench_engine.py counts them): the figure that
                           noise does not move;
  ... command path         of those, the ones run under the connection's
                           data_received (reading, parsing, running and
                           answering the commands): the whole count also
                           holds the node's timers, which run by the clock,
                           and a slower kind gives them more turns under
                           valgrind;
  ADDJOB c50 -P16          redis-benchmark's rate, servers alternating per
                           round, the median kept;
  server CPU per ADDJOB    the server's CPU time (user and kernel, from
                           /proc) over the same run, per ADDJOB.
Ratios: each kind against current plain (issue 19 allows options 10 %,
issue 20 allows PRIORITY and DEDUP 15 %), and against the row it is compared with:
current plain against the baseline, and each option against a plain ADDJOB
of the same length (Disque's RETRY/TTL/MAXLEN in its place), which
separates what the option costs from what more words on the wire cost.
Every DEDUP ADDJOB has its own key (k:<12 digits>: the callgrind rows
number them, redis-benchmark draws them from 10^11 with __rand_int__), so
each one makes a job and a key, as a producer's first try does.
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_engine import (CALLGRIND_BATCH, VALGRIND, callgrind_control,  # noqa: E402
                                     read_dump, read_inclusive, running)
from benchmarks.common import (DisqueServer, Pinning, ordered, pipelined_fill,  # noqa: E402
                               redis_benchmark_command, run_async, run_redis_benchmark,
                               scratch_dir)
from disque_py.formats.resp import encode_command  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
DEFAULT_BASELINE = "c3fe348"
BODY = "x" * 100
PLAIN = ("ADDJOB", "q", BODY, "0")
WITH_OPTIONS = PLAIN + ("BACKOFF", "100", "10000", "MAXDELIVERIES", "5")
# A plain ADDJOB as long as WITH_OPTIONS, with Disque's own options: what
# six more words cost on the wire and in parsing, options or not.
SAME_LENGTH = PLAIN + ("RETRY", "100", "TTL", "10000", "MAXLEN", "500000")
WITH_PRIORITY = PLAIN + ("PRIORITY", "8")
SAME_LENGTH_AS_PRIORITY = PLAIN + ("RETRY", "100")
RANDOM = "__rand_int__"          # redis-benchmark's placeholder: 12 digits
WITH_DEDUP = PLAIN + ("DEDUP", "k:" + RANDOM)
KEYSPACE = 10 ** 11
# Each kind: label, whether it runs the baseline, the command, and the
# label of the row it is compared with ("plain/base" for the baseline).
KINDS = [("baseline plain", True, PLAIN, None),
         ("current plain", False, PLAIN, "baseline plain"),
         ("same-length 6 words", False, SAME_LENGTH, "current plain"),
         ("BACKOFF+MAXDELIVERIES", False, WITH_OPTIONS, "same-length 6 words"),
         ("same-length 2 words", False, SAME_LENGTH_AS_PRIORITY, "current plain"),
         ("PRIORITY 8", False, WITH_PRIORITY, "same-length 2 words"),
         ("DEDUP new key", False, WITH_DEDUP, "same-length 2 words")]


class Server(DisqueServer):
    """Our server from the working tree, or from `source` (a built tree)."""

    def __init__(self, directory: Path, pinning: Pinning, label: str,
                 source: Path | None = None) -> None:
        super().__init__(directory, pinning)
        self.label = label
        if source is not None:
            self.prefix = ["env", f"PYTHONPATH={source}"] + self.prefix


def build_baseline(rev: str) -> Path:
    """The baseline's sources, unpacked and compiled in a scratch directory."""
    tree = scratch_dir("bench-options-baseline-")
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev],
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=tree,
                   capture_output=True, check=True)
    return tree


def payload(command: tuple, first: int):
    """The command's bytes, or, with RANDOM in it, a function giving the
    i-th command its own number (first + i) there."""
    if RANDOM not in "".join(command):
        return encode_command(*command)
    return lambda i: encode_command(*(word.replace(RANDOM, "%012d" % (first + i))
                                      for word in command))


COMMAND_PATH = r"ConnectionBase_\d+data_received"   # its C name, as callgrind shows it


def instructions_per_addjob(server: Server, command: tuple, warmup: int,
                            jobs: int) -> tuple[float, float]:
    """(all instructions, the command path's) per ADDJOB (the second NaN
    for a build whose connections have no compiled data_received)."""
    out = server.dir / "callgrind.out"
    server.prefix += [VALGRIND, "--tool=callgrind", "--instr-atstart=no",
                      f"--callgrind-out-file={out}", f"--log-file={server.dir / 'valgrind.log'}"]
    with running(server):
        run_async(pipelined_fill(server.port, payload(command, 0), warmup, 1, CALLGRIND_BATCH))
        callgrind_control("-i", "on", server.pid)
        _, errors = run_async(pipelined_fill(server.port, payload(command, warmup), jobs, 1,
                                             CALLGRIND_BATCH))
        callgrind_control("--dump", server.pid)
        total = read_dump(Path(f"{out}.1"))
    if errors:
        raise RuntimeError(f"{errors} error replies from {server.label}")
    path = read_inclusive(Path(f"{out}.1"), COMMAND_PATH)
    return total / jobs, float("nan") if path is None else path / jobs


def addjob_rate(server: Server, command: tuple, requests: int) -> tuple[float, float]:
    """(ADDJOBs per second, the server's CPU time per ADDJOB in us)."""
    cmd = redis_benchmark_command(server.port, requests, clients=50, pipeline=16,
                                  command_args=command,
                                  keyspace=KEYSPACE if RANDOM in "".join(command) else 0)
    with running(server):
        rate, cpu_percent, _ = run_redis_benchmark(cmd, server.pid)
    return rate, cpu_percent / 100 / rate * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="1 round, fewer requests")
    parser.add_argument("--baseline", default=DEFAULT_BASELINE)
    parser.add_argument("--skip-callgrind", action="store_true")
    parser.add_argument("--callgrind-runs", type=int, default=1,
                        help="callgrind runs of each kind (the median is kept)")
    parser.add_argument("--no-pin", action="store_true")
    args = parser.parse_args()
    rounds = 1 if args.quick else args.rounds
    requests = 100_000 if args.quick else 400_000
    pinning = Pinning(not args.no_pin)
    pinning.pin_this_process()
    print(f"baseline {args.baseline}: building...", flush=True)
    baseline = build_baseline(args.baseline)
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    print(f"current: working tree at {head}; pinning: {pinning.describe()}", flush=True)
    kinds = [(label, baseline if is_baseline else None, command)
             for label, is_baseline, command, _ in KINDS]

    def server(label, source):
        return Server(scratch_dir("bench-options-"), pinning, label, source)

    table: dict[str, dict[str, list[float]]] = {}
    if not args.skip_callgrind:
        for label, source, command in kinds:
            for _ in range(args.callgrind_runs):
                count, path = instructions_per_addjob(server(label, source), command, 2_000,
                                                      20_000)
                table.setdefault("instructions per ADDJOB", {}).setdefault(label, []).append(count)
                table.setdefault("... on the command path", {}).setdefault(label, []).append(path)
                print(f"  instructions  {label:22} {count:>10,.0f} (command path {path:,.0f})",
                      flush=True)
    for round_index in range(rounds):
        for label, source, command in ordered(round_index, kinds):
            rate, cpu_us = addjob_rate(server(label, source), command, requests)
            table.setdefault("ADDJOB c50 -P16 (ops/s)", {}).setdefault(label, []).append(rate)
            table.setdefault("server CPU per ADDJOB (ns)", {}).setdefault(label, []).append(
                cpu_us * 1000)
            print(f"  round {round_index + 1}  {label:22} {rate:>10,.0f} ops/s "
                  f"{cpu_us:.3f} us CPU each", flush=True)
    for row, values in table.items():
        medians = {label: statistics.median(found) for label, found in values.items()}
        print(f"\n{row}:\n{'kind':24} {'median':>12} {'/ plain':>9} {'/ compared':>11}  compared with")
        for label, _, _, compared in KINDS:
            value, plain = medians[label], medians["current plain"]
            against = f"{value / medians[compared]:>10.3f}x  {compared}" if compared else ""
            print(f"{label:24} {value:>12,.0f} {value / plain:>8.3f}x {against}")
    print("\nredis-benchmark: " + shlex.join(redis_benchmark_command(0, requests, 50, 16,
                                                                       command_args=PLAIN)))
    print(f"median of {rounds} round(s); machine: {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
