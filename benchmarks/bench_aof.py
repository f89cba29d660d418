"""ADDJOB throughput with the AOF off, and on with each appendfsync policy.

    python benchmarks/bench_aof.py [--quick] [--rounds N] [--requests N]
                                   [--aof-dir DIR] [--no-pin] [--json FILE]

Each round measures four modes of disque-py one after the other, the order
rotating between rounds so a machine that gets busier or quieter during the
run favours none of them:

  off        --appendonly no
  no         --appendonly yes --appendfsync no
  everysec   --appendonly yes --appendfsync everysec
  always     --appendonly yes --appendfsync always

For each mode a fresh server starts in a fresh directory under the AOF
directory, `redis-benchmark -c 50 -n N ADDJOB q <100 bytes> 0` (not
pipelined) runs against it, INFO persistence is read, and the server stops.
The report gives each mode's median rate and the median of its per-round
ratios to `off` (paired by round), the server's and redis-benchmark's CPU,
and the AOF bytes written per job (proof that the records were written).

The AOF directory must be on the disk the server would use in production:
fsync on tmpfs costs nothing and would flatter `always`. The script prints
`df -T` of that directory. Target from the persistence issue: `always` at
least 30% of `off`. Nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (BODY, DisqueServer, Pinning, info, median, print_commands,  # noqa: E402
                    print_header, print_table, ratio, redis_benchmark_command,
                    require_tools, run_redis_benchmark, scratch_dir)

CONNECTIONS = 50
MODES = {
    "off": ["--appendonly", "no"],
    "no": ["--appendonly", "yes", "--appendfsync", "no"],
    "everysec": ["--appendonly", "yes", "--appendfsync", "everysec"],
    "always": ["--appendonly", "yes", "--appendfsync", "always"],
}
TARGET_ALWAYS_RATIO = 0.30
ADDJOB = ["ADDJOB", "q", BODY.decode(), "0"]


@dataclass
class Results:
    rates: dict[str, list[float]] = field(default_factory=lambda: {m: [] for m in MODES})
    server_cpu: dict[str, list[float]] = field(default_factory=lambda: {m: [] for m in MODES})
    loader_cpu: dict[str, list[float]] = field(default_factory=lambda: {m: [] for m in MODES})
    aof_bytes: dict[str, list[int]] = field(default_factory=lambda: {m: [] for m in MODES})
    commands: dict[str, str] = field(default_factory=dict)

    def ratios(self, mode: str) -> list[float]:
        return [ratio(r, off) for r, off in zip(self.rates[mode], self.rates["off"])]


def filesystem_of(path: Path) -> tuple[list[str], str]:
    cmd = ["df", "-T", str(path)]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as error:
        out = f"unavailable ({error})"
    return cmd, out


def rotated(round_index: int) -> list[str]:
    modes = list(MODES)
    shift = round_index % len(modes)
    return modes[shift:] + modes[:shift]


def measure(mode: str, aof_root: Path, pinning: Pinning, requests: int,
            results: Results) -> None:
    directory = Path(tempfile.mkdtemp(prefix=f"{mode}-", dir=aof_root))
    server = DisqueServer(directory, pinning, MODES[mode])
    server.start()
    try:
        cmd = redis_benchmark_command(server.port, requests, clients=CONNECTIONS,
                                      command_args=ADDJOB)
        rps, cpu, loader = run_redis_benchmark(cmd, server.pid)
        persistence = info(server.port, "persistence")
    finally:
        server.stop()
    results.rates[mode].append(rps)
    results.server_cpu[mode].append(cpu)
    results.loader_cpu[mode].append(loader)
    results.aof_bytes[mode].append(int(persistence.get("aof_current_size", 0)))
    shown = [part if len(part) < 40 else f"<{len(part)}-byte body>" for part in cmd]
    results.commands[mode] = (f"[{mode}] server: {shlex.join(server.command_line())}\n"
                              f"  [{mode}] load:   {shlex.join(shown)}")


def print_summary(results: Results, requests: int) -> None:
    rows = []
    for mode in MODES:
        ratios = results.ratios(mode)
        per_job = median(results.aof_bytes[mode]) / requests
        rows.append([mode, median(results.rates[mode]), f"{median(ratios):.2f}x",
                     f"{min(ratios):.2f}-{max(ratios):.2f}",
                     f"{median(results.server_cpu[mode]):.0f}%",
                     f"{median(results.loader_cpu[mode]):.0f}%",
                     f"{per_job:.0f}" if per_job else "-"])
    print_table(["mode", "ADDJOB/s (median)", "ratio to off", "ratio range",
                 "server CPU", "loader CPU", "AOF bytes/job"], rows, title="summary")
    always = median(results.ratios("always"))
    verdict = "met" if always >= TARGET_ALWAYS_RATIO else "NOT met"
    print(f"\ntarget: appendfsync always >= {TARGET_ALWAYS_RATIO:.0%} of AOF off: "
          f"{verdict} ({always:.0%})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 round of 20,000 requests")
    parser.add_argument("--rounds", type=int, help="rounds (default 3, 1 with --quick)")
    parser.add_argument("--requests", type=int,
                        help="ADDJOBs per measurement (default 100,000; 20,000 with --quick)")
    parser.add_argument("--aof-dir", type=Path,
                        help="where the servers' directories (and AOFs) go (default: a new "
                             "temporary directory under $TMPDIR)")
    parser.add_argument("--no-pin", action="store_true",
                        help="do not pin servers and load generators to separate CPUs")
    parser.add_argument("--json", type=Path, help="also write the raw results here")
    args = parser.parse_args(argv)
    require_tools()
    rounds = args.rounds or (1 if args.quick else 3)
    requests = args.requests or (20_000 if args.quick else 100_000)
    pinning = Pinning(not args.no_pin)
    pinning.pin_this_process()
    if args.aof_dir:
        args.aof_dir.mkdir(parents=True, exist_ok=True)
        aof_root = Path(tempfile.mkdtemp(prefix="bench-aof-", dir=args.aof_dir))
    else:
        aof_root = scratch_dir("bench-aof-")
    print_header("bench_aof: ADDJOB with the AOF off / appendfsync no / everysec / always",
                 pinning)
    df_cmd, df_out = filesystem_of(aof_root)
    print(f"\nAOF directory {aof_root}:\n$ {shlex.join(df_cmd)}\n{df_out}")
    print(f"settings: rounds={rounds} requests={requests} connections={CONNECTIONS} "
          f"body={len(BODY)} bytes, not pipelined")
    started = time.perf_counter()
    results = Results()
    for round_index in range(rounds):
        print(f"\nround {round_index + 1}/{rounds} ...", flush=True)
        for mode in rotated(round_index):
            measure(mode, aof_root, pinning, requests, results)
            print(f"  {mode:9} {results.rates[mode][-1]:>10,.0f} ADDJOB/s  server CPU "
                  f"{results.server_cpu[mode][-1]:.0f}%  loader CPU "
                  f"{results.loader_cpu[mode][-1]:.0f}%", flush=True)
    print_commands(results.commands[mode] for mode in MODES)
    print_table(["round"] + list(MODES),
                [[i + 1] + [results.rates[m][i] for m in MODES] for i in range(rounds)],
                title="per round (ADDJOB/s)")
    print_summary(results, requests)
    print(f"\ntotal time {time.perf_counter() - started:.0f}s; load average now "
          + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    if args.json:
        args.json.write_text(json.dumps(dict(
            rounds=rounds, requests=requests, aof_dir=str(aof_root), filesystem=df_out,
            rates=results.rates, server_cpu=results.server_cpu,
            loader_cpu=results.loader_cpu, aof_bytes=results.aof_bytes,
            commands=results.commands), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
