"""Restart (and, with --rewrite, BGREWRITEAOF) of a node holding many queued
jobs: disque-py beside Disque 1.0-rc1 in one run.

    python benchmarks/bench_aof_load.py [--disque PATH] [--jobs N] [--rounds N]
                                        [--rewrite] [--as-written] [--aof-dir DIR]
                                        [--no-pin] [--json FILE]

Once per server: a fresh node with `--appendonly yes` is filled with N
queued jobs (default 1,000,000; pipelined `ADDJOB q <100 bytes> 0`), then
BGREWRITEAOF, then stopped: its AOF, in the server's own current format and
written by the server itself, is kept (with --as-written: no rewrite, and
the node is killed with SIGKILL after the fill, so the file is what the
write path left, as after a crash). Each round, for each server (the
one going first alternating between rounds): the file is copied into a
fresh directory, the node started on it (`--appendonly yes`, pinned to the
first CPU) under /usr/bin/time, PING polled until +PONG (a loading node
answers -LOADING, or Disque C nothing until loaded), registered_jobs
checked, and with --rewrite one BGREWRITEAOF timed from the command to
the INFO persistence showing `aof_rewrite_in_progress:0` with
`aof_last_bgrewrite_status:ok`, while a probe PINGs every millisecond (the
worst round trip during the rewrite is the node's longest pause). Then
SHUTDOWN. Reported: each server's median and range, the median of the
per-round ratios disque-py / Disque C with their range, and the issue's
targets. Automatic rewrites are off on both servers. Nothing here asserts
a speed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from aof_common import (C, NO_AUTO_REWRITE, PY, Paired, aof_file, aof_root,  # noqa: E402
                        filesystem_of, filled_aof, new_server, registered_jobs, rewrite,
                        seconds_to_pong, shutdown)
from compare import add_disque_option, server_kinds  # noqa: E402
from common import Pinning, ordered, print_commands, print_header, print_table  # noqa: E402

TIME = "/usr/bin/time"
TIME_FORMAT = "TIME %e %U %S %M"        # wall s, user s, system s, peak RSS KB
LOADED = re.compile(r"DB loaded from append only file:.*?([\d.]+) seconds")

# (key, row title, format, target on the ratio disque-py / Disque C)
FIGURES = [
    ("ready_s", "restart: spawn to first +PONG, s", "{:.2f}", "<= 0.50x"),
    ("load_s", "load, s (the node's log)", "{:.2f}", ""),
    ("cpu_s", "restart: user + system CPU, s", "{:.2f}", ""),
    ("peak_rss_mb", "peak RSS after load (+ rewrite), MB", "{:,.0f}", ""),
    ("rewrite_s", "BGREWRITEAOF to aof_rewrite_in_progress:0, s", "{:.2f}", "<= 0.50x"),
    ("worst_ping_ms", "worst PING round trip during the rewrite, ms", "{:.1f}",
     "py <= 50 ms"),
    ("rewritten_per_job", "that rewrite's AOF bytes per job", "{:.1f}", ""),
]
REWRITE_FIGURES = ("rewrite_s", "worst_ping_ms", "rewritten_per_job")


def timed_start(kind, source: Path, root: Path, pinning: Pinning):
    """A node of `kind` started on a copy of `source`, under /usr/bin/time."""
    server = new_server(kind, root, pinning, ["--appendonly", "yes"] + NO_AUTO_REWRITE, "load-")
    shutil.copyfile(source, aof_file(server))
    server.prefix = server.prefix + [TIME, "-f", TIME_FORMAT, "-o", str(server.dir / "time.txt")]
    server.start(wait=False)
    return server


def one_round(kind, source: Path, jobs: int, root: Path, pinning: Pinning,
              with_rewrite: bool) -> dict:
    spawned = time.monotonic()
    server = timed_start(kind, source, root, pinning)
    try:
        result = {"ready_s": seconds_to_pong(server.port, spawned, server.proc)}
        held = registered_jobs(server.port)
        if held != jobs:
            raise RuntimeError(f"{kind.label} loaded {held} jobs of {jobs}")
        if with_rewrite:
            result.update(rewrite(server.port))
            result["rewritten_per_job"] = result["rewritten_bytes"] / jobs
    finally:
        shutdown(server)
    wall, user, system, rss_kb = (server.dir / "time.txt").read_text().split("TIME ")[1].split()
    loaded = LOADED.search(server.log_text())
    result.update(load_s=float(loaded.group(1)) if loaded else float("nan"),
                  wall_s=float(wall), cpu_s=float(user) + float(system),
                  peak_rss_mb=int(rss_kb) / 1024, command=shlex.join(server.command_line()))
    shutil.rmtree(server.dir)
    return result


def prepare(kinds: list, jobs: int, root: Path, pinning: Pinning, as_written: bool) -> dict:
    """Each server's own AOF of `jobs` queued jobs, by label."""
    sources = {}
    for kind in kinds:
        then = "then kill -9" if as_written else "then BGREWRITEAOF"
        print(f"filling {kind.label} with {jobs:,} jobs, {then} ...", flush=True)
        made = filled_aof(kind, root, pinning, jobs, root / f"source-{kind.__name__}.aof",
                          as_written)
        print(f"  fill {made['fill_s']:.1f} s, rewrite {made['rewrite_s']:.1f} s, AOF "
              f"{made['bytes']:,} bytes (file {made['file_bytes']:,}), "
              f"{made['bytes_per_job']:.1f} bytes/job", flush=True)
        sources[kind.label] = made
    return sources


def summary(paired: Paired, labels: list[str], with_rewrite: bool, sources: dict) -> list:
    compare = C in labels
    rows = []
    for key, title, fmt, target in FIGURES:
        if key in REWRITE_FIGURES and not with_rewrite:
            continue
        rows.append([title] + [paired.cell(key, label, fmt) for label in labels]
                    + ([paired.ratio_cell(key), target] if compare else []))
    per_job = [f"{sources[label]['bytes_per_job']:.1f}" for label in labels]
    if compare:
        ratio_ = sources[PY]["bytes_per_job"] / sources[C]["bytes_per_job"]
        per_job += [f"{ratio_:.2f}x", "<= 1.00x"]
    which = "as written" if sources[labels[0]]["as_written"] else "rewritten"
    rows.append([f"AOF bytes per queued job ({which} file)"] + per_job)
    return rows


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_disque_option(parser)
    parser.add_argument("--jobs", type=int, default=1_000_000, help="queued jobs (1,000,000)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rewrite", action="store_true",
                        help="after each load, also time a BGREWRITEAOF and its worst PING gap")
    parser.add_argument("--as-written", action="store_true",
                        help="restart from the AOF the write path left (fill, kill -9), "
                             "not from a rewritten one")
    parser.add_argument("--aof-dir", type=Path,
                        help="where the AOFs go; must be a real disk (default: $TMPDIR)")
    parser.add_argument("--no-pin", action="store_true",
                        help="do not pin the servers to a CPU of their own")
    parser.add_argument("--json", type=Path, help="also write the results to this file")
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    kinds = server_kinds(args.disque)
    labels = [kind.label for kind in kinds]
    pinning = Pinning(not args.no_pin)
    pinning.pin_this_process()
    root = aof_root(args.aof_dir, "bench-aof-load-")
    print_header("bench_aof_load: restart" + (" and BGREWRITEAOF" if args.rewrite else "")
                 + " of a node holding many jobs", pinning,
                 [("Disque C", args.disque or "(not given)")])
    filesystem = filesystem_of(root)
    print(f"\nAOF directory {root}:\n{filesystem}\n", flush=True)
    started = time.perf_counter()
    sources = prepare(kinds, args.jobs, root, pinning, args.as_written)
    paired, rounds, commands = Paired(), [], {}
    for index in range(args.rounds):
        for kind in ordered(index, kinds):
            result = one_round(kind, root / f"source-{kind.__name__}.aof", args.jobs, root,
                               pinning, args.rewrite)
            rounds.append(dict(result, round=index + 1, server=kind.label))
            commands[kind.label] = result["command"]
            for key, *_ in FIGURES:
                if key in result:
                    paired.add(key, kind.label, result[key])
            print(f"round {index + 1} {kind.label:15} ready {result['ready_s']:.2f} s"
                  + (f", rewrite {result['rewrite_s']:.2f} s, worst PING "
                     f"{result['worst_ping_ms']:.1f} ms" if args.rewrite else ""), flush=True)
    print_commands([s["command"] + ("   # fill, kill -9" if args.as_written else
                                    "   # fill + BGREWRITEAOF") for s in sources.values()]
                   + list(commands.values()))
    print_table(["figure"] + labels + (["ratio py/C median (range)", "target"]
                                       if C in labels else []),
                summary(paired, labels, args.rewrite, sources),
                title=f"{args.jobs:,} queued jobs, {args.rounds} rounds: median (range)")
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\ntotal time {time.perf_counter() - started:.0f}s; load average now {load}")
    if args.json:
        args.json.write_text(json.dumps(dict(
            jobs=args.jobs, disque=args.disque, aof_dir=str(root), filesystem=filesystem,
            load_average_end=load, sources=sources, rounds=rounds), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
