"""ADDJOB throughput with the AOF on, disque-py beside Disque 1.0-rc1 in one run.

    python benchmarks/bench_aof.py [--disque PATH] [--quick] [--rounds N]
                                   [--requests N] [--fill-jobs N] [--rows A,B]
                                   [--aof-dir DIR] [--no-pin] [--json FILE]

Rows (each `redis-benchmark -c 50 -n N [-P 16] ADDJOB q <100 bytes> 0`):

  off           --appendonly no                             (reference)
  no            --appendonly yes --appendfsync no           (reference)
  everysec      --appendonly yes --appendfsync everysec
  always        --appendonly yes --appendfsync always
  off-P16       --appendonly no, -P 16                      (reference)
  everysec-P16  --appendonly yes --appendfsync everysec, -P 16

Each measurement starts a fresh server (pinned to the first CPU) in a fresh
directory under the AOF directory, runs redis-benchmark (pinned to the
other CPU) against it, stops it and reads the size of its AOF. Rows rotate
between rounds, and within each row the server that goes first alternates,
so a machine growing busier or quieter favours no one. Disque C is the
binary `--disque` (or DISQUE_BINARY) names; without it, disque-py only.
Automatic AOF rewrites are off on both servers (rewrites have their own
benchmark, bench_aof_load.py --rewrite).

Reported per row: each server's median rate with its range, the median of
the per-round ratios disque-py / Disque C with their range, the ratio of
each server to its own `off` row, and AOF bytes per ADDJOB (file size after
the run, INFO's aof_current_size, / requests). Then, once per server, the bytes per queued job of a
rewritten AOF: a fresh server filled with --fill-jobs queued jobs, one
BGREWRITEAOF, the file's size / jobs. The directory must be on a real
disk (fsync on tmpfs costs nothing); `df -T` of it is printed. The issue's
targets are printed beside the ratios; nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from aof_common import (ADDJOB, C, NO_AUTO_REWRITE, PY, Paired, aof_file,  # noqa: E402
                        aof_root, filesystem_of, filled_aof, new_server, shown)
from compare import add_disque_option, server_kinds  # noqa: E402
from common import (BODY, REDIS_BENCHMARK, Pinning, info, median, ordered,  # noqa: E402
                    print_commands, print_header, print_table, ratio,
                    redis_benchmark_command, require_tools, run_redis_benchmark)

CONNECTIONS = 50
SHORT = {C: "C", PY: "py"}
EVERYSEC = ["--appendonly", "yes", "--appendfsync", "everysec"]


@dataclass(frozen=True)
class Row:
    name: str
    args: tuple[str, ...]
    pipeline: int = 1
    off: str = "off"             # the row its "ratio to off" divides by
    target: float | None = None  # the target, disque-py / Disque C


ROWS = {row.name: row for row in (
    Row("off", ("--appendonly", "no")),
    Row("no", ("--appendonly", "yes", "--appendfsync", "no")),
    Row("everysec", tuple(EVERYSEC), target=1.0),
    Row("always", ("--appendonly", "yes", "--appendfsync", "always"), target=1.5),
    Row("off-P16", ("--appendonly", "no"), 16, off="off-P16"),
    Row("everysec-P16", tuple(EVERYSEC), 16, off="off-P16", target=2.5),
)}


class Run:
    """Every figure of the run: rates, CPU, AOF bytes, command lines."""

    def __init__(self) -> None:
        self.rates = Paired()
        self.server_cpu = Paired()
        self.loader_cpu = Paired()
        self.aof_bytes = Paired()
        self.commands: dict[str, str] = {}
        self.rewritten: list[dict] = []


def measure(kind, row: Row, root: Path, pinning: Pinning, requests: int, run: Run) -> None:
    server = new_server(kind, root, pinning, list(row.args) + NO_AUTO_REWRITE, f"{row.name}-")
    server.start()
    try:
        cmd = redis_benchmark_command(server.port, requests, clients=CONNECTIONS,
                                      pipeline=row.pipeline, command_args=ADDJOB)
        rps, cpu, loader = run_redis_benchmark(cmd, server.pid)
        # INFO's size, not the file's: a file may be preallocated past its end.
        size = int(info(server.port, "persistence").get("aof_current_size", 0))
    finally:
        server.stop(timeout=120)
    aof_file(server).unlink(missing_ok=True)
    run.rates.add(row.name, kind.label, rps)
    run.server_cpu.add(row.name, kind.label, cpu)
    run.loader_cpu.add(row.name, kind.label, loader)
    run.aof_bytes.add(row.name, kind.label, size)
    run.commands[f"{row.name} {kind.label}"] = (
        f"[{row.name}, {kind.label}] server: {shlex.join(server.command_line())}\n"
        f"    load: {shown(cmd)}")
    print(f"  {row.name:13} {kind.label:15} {rps:>10,.0f} ADDJOB/s  server CPU {cpu:.0f}%  "
          f"loader CPU {loader:.0f}%", flush=True)


def rotated(rows: list[Row], round_index: int) -> list[Row]:
    shift = round_index % len(rows)
    return rows[shift:] + rows[:shift]


def ratio_to_off(run: Run, row: Row, label: str) -> str:
    ratios = [ratio(a, b) for a, b in zip(run.rates.of(row.name, label),
                                          run.rates.of(row.off, label))]
    return f"{median(ratios):.2f}x" if ratios and row.name != row.off else "-"


def bytes_per_job(run: Run, row: Row, label: str, requests: int) -> str:
    sizes = run.aof_bytes.of(row.name, label)
    return f"{median(sizes) / requests:.0f}" if sizes and median(sizes) else "-"


def print_summary(run: Run, rows: list[Row], labels: list[str], requests: int) -> None:
    table = []
    for row in rows:
        target = f">= {row.target:.1f}x" if row.target else "(reference)"
        table.append([row.name] + [run.rates.cell(row.name, label) for label in labels]
                     + ([run.rates.ratio_cell(row.name), target] if C in labels else [])
                     + [ratio_to_off(run, row, label) for label in labels]
                     + [bytes_per_job(run, row, label, requests) for label in labels]
                     + [f"{median(run.server_cpu.of(row.name, PY)):.0f}%",
                        f"{median(run.loader_cpu.of(row.name, PY)):.0f}%"])
    short = [SHORT[label] for label in labels]
    headers = ([f"{name} ADDJOB/s median (range)" for name in short]
               + (["ratio py/C median (range)", "target"] if C in labels else [])
               + [f"{name}/off" for name in short]
               + [f"{name} AOF B/job" for name in short]
               + ["py server CPU", "py loader CPU"])
    print_table(["row"] + headers, table, title="summary (ratio: disque-py / Disque C, "
                "per round, median and range)")


def print_rewritten(run: Run) -> None:
    rows = [[r["server"], r["jobs"], r["registered_jobs"], r["bytes"],
             f"{r['bytes_per_job']:.1f}", f"{r['rewrite_s']:.2f}"] for r in run.rewritten]
    print_table(["server", "queued jobs", "registered_jobs", "rewritten AOF bytes",
                 "bytes/job", "rewrite s"], rows,
                title="AOF bytes per queued job after one BGREWRITEAOF")
    if len(run.rewritten) == 2:
        c, py = run.rewritten
        print(f"bytes/job ratio disque-py / Disque C: "
              f"{ratio(py['bytes_per_job'], c['bytes_per_job']):.2f}x (target <= 1.0x)")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_disque_option(parser)
    parser.add_argument("--quick", action="store_true",
                        help="1 round of 20,000 requests, 20,000 jobs for the bytes per job")
    parser.add_argument("--rounds", type=int, help="rounds (default 3, 1 with --quick)")
    parser.add_argument("--requests", type=int,
                        help="ADDJOBs per measurement (default 300,000; 20,000 with --quick)")
    parser.add_argument("--fill-jobs", type=int,
                        help="queued jobs behind the bytes-per-job figure (default 200,000; "
                             "0 skips it)")
    parser.add_argument("--rows", default=",".join(ROWS),
                        help=f"comma-separated rows to measure (default all: {','.join(ROWS)})")
    parser.add_argument("--aof-dir", type=Path,
                        help="where the servers' directories (and AOFs) go; must be a real "
                             "disk (default: a new temporary directory under $TMPDIR)")
    parser.add_argument("--no-pin", action="store_true",
                        help="do not pin servers and load generators to separate CPUs")
    parser.add_argument("--json", type=Path, help="also write the raw results here")
    args = parser.parse_args(argv)
    args.rounds = args.rounds or (1 if args.quick else 3)
    args.requests = args.requests or (20_000 if args.quick else 300_000)
    if args.fill_jobs is None:
        args.fill_jobs = 20_000 if args.quick else 200_000
    unknown = set(args.rows.split(",")) - set(ROWS)
    if unknown:
        parser.error(f"unknown rows: {', '.join(sorted(unknown))}")
    return args


def measure_all(args, kinds: list, rows: list[Row], root: Path, pinning: Pinning) -> Run:
    run = Run()
    for round_index in range(args.rounds):
        print(f"\nround {round_index + 1}/{args.rounds} ...", flush=True)
        for row in rotated(rows, round_index):
            for kind in ordered(round_index, kinds):
                measure(kind, row, root, pinning, args.requests, run)
    if args.fill_jobs:
        print(f"\nbytes per queued job: {args.fill_jobs:,} jobs, then BGREWRITEAOF ...",
              flush=True)
        for kind in kinds:
            run.rewritten.append(filled_aof(kind, root, pinning, args.fill_jobs,
                                            root / f"rewritten-{kind.__name__}.aof"))
            (root / f"rewritten-{kind.__name__}.aof").unlink()
    return run


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    require_tools([REDIS_BENCHMARK])
    kinds = server_kinds(args.disque)
    labels = [kind.label for kind in kinds]
    rows = [ROWS[name] for name in args.rows.split(",")]
    pinning = Pinning(not args.no_pin)
    pinning.pin_this_process()
    root = aof_root(args.aof_dir, "bench-aof-")
    print_header("bench_aof: ADDJOB with the AOF on, disque-py beside Disque 1.0-rc1",
                 pinning, [("Disque C", args.disque or "(not given)")])
    filesystem = filesystem_of(root)
    print(f"\nAOF directory {root}:\n{filesystem}")
    print(f"settings: rounds={args.rounds} requests={args.requests} connections={CONNECTIONS} "
          f"body={len(BODY)} bytes, rows={args.rows}")
    started = time.perf_counter()
    run = measure_all(args, kinds, rows, root, pinning)
    print_commands(run.commands.values())
    print_summary(run, rows, labels, args.requests)
    if run.rewritten:
        print_rewritten(run)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\ntotal time {time.perf_counter() - started:.0f}s; load average now {load}")
    if args.json:
        args.json.write_text(json.dumps(dict(
            rounds=args.rounds, requests=args.requests, disque=args.disque,
            aof_dir=str(root), filesystem=filesystem, load_average_end=load,
            rates=run.rates.values, server_cpu=run.server_cpu.values,
            loader_cpu=run.loader_cpu.values, aof_bytes=run.aof_bytes.values,
            rewritten=run.rewritten, commands=run.commands), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
