"""How long a node takes to load a large AOF at start-up.

    python benchmarks/bench_aof_load.py [--jobs N] [--rounds N] [--no-pin] [--json FILE]

An AOF of N queued jobs (default 1,000,000, 100-byte bodies; about 230 MB)
is written once (disque_py/tools/large_aof.py). Each round copies it into
a fresh directory and starts a node on it with `--appendonly yes` under
`/usr/bin/time`, polls PING until it answers +PONG (during the load it
answers -LOADING), then SHUTDOWNs it. Reported per round: seconds from the
spawn to the first +PONG, the load's own duration as the node logs it,
and /usr/bin/time's wall, user and system seconds and peak RSS of the
whole run. Nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import socket
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (DisqueServer, HOST, Pinning, median, print_header,  # noqa: E402
                    print_table, scratch_dir)
from disque_py.tools.large_aof import write_large_aof  # noqa: E402

TIME = "/usr/bin/time"
TIME_FORMAT = "TIME %e %U %S %M"        # wall s, user s, system s, peak RSS KB
READY_TIMEOUT_S = 600
LOG_TIME = re.compile(r"^\d+:\w (\d+ \w+ \d+:\d+:\d+\.\d+) ")
LOADED = "DB loaded from append only file"


def ping(port: int) -> bytes:
    try:
        with socket.create_connection((HOST, port), timeout=5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(128)
    except OSError:
        return b""


def log_seconds(line: str) -> float:
    stamp = LOG_TIME.match(line).group(1)
    parsed = time.strptime(stamp.split(".")[0], "%d %b %H:%M:%S")
    return parsed.tm_hour * 3600 + parsed.tm_min * 60 + parsed.tm_sec + \
        float("0." + stamp.split(".")[1])


def load_seconds_from_log(text: str) -> float:
    """From the node's first log line to its 'DB loaded' line."""
    lines = [line for line in text.splitlines() if LOG_TIME.match(line)]
    loaded = next(line for line in lines if LOADED in line)
    return log_seconds(loaded) - log_seconds(lines[0])


def one_round(aof: Path, workdir: Path, pinning: Pinning) -> dict:
    node_dir = workdir / f"node-{time.monotonic_ns()}"
    node_dir.mkdir()
    shutil.copyfile(aof, node_dir / "disque.aof")
    server = DisqueServer(node_dir, pinning, ["--appendonly", "yes"])
    times = node_dir / "time.txt"
    server.prefix = server.prefix + [TIME, "-f", TIME_FORMAT, "-o", str(times)]
    spawned = time.monotonic()
    server.start(wait=False)
    deadline = spawned + READY_TIMEOUT_S
    while not ping(server.port).startswith(b"+PONG"):
        if server.proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the node did not start:\n{server.log_text()[-2000:]}")
        time.sleep(0.02)
    ready = time.monotonic() - spawned
    with socket.create_connection((HOST, server.port), timeout=30) as sock:
        sock.sendall(b"SHUTDOWN\r\n")
    server.proc.wait(60)
    wall, user, system, rss_kb = times.read_text().split("TIME ")[1].split()
    result = {"ready_s": ready, "load_s": load_seconds_from_log(server.log_text()),
              "wall_s": float(wall), "user_s": float(user), "sys_s": float(system),
              "peak_rss_mb": int(rss_kb) / 1024,
              "command": " ".join(server.command_line())}
    shutil.rmtree(node_dir)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-pin", action="store_true",
                        help="do not pin the server to a CPU of its own")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    pinning = Pinning(not args.no_pin)
    pinning.pin_this_process()
    print_header("AOF load at start-up", pinning)
    workdir = scratch_dir("aof-load")
    aof = workdir / "source.aof"
    size = write_large_aof(aof, args.jobs)
    print(f"AOF: {args.jobs} jobs, {size} bytes", flush=True)
    rounds = []
    for index in range(args.rounds):
        result = one_round(aof, workdir, pinning)
        rounds.append(result)
        print(f"round {index + 1}: ready {result['ready_s']:.2f} s, load "
              f"{result['load_s']:.2f} s ({result['command']})", flush=True)
    keys = ("ready_s", "load_s", "wall_s", "user_s", "sys_s", "peak_rss_mb")
    rows = [[index + 1] + [f"{r[key]:.2f}" for key in keys] for index, r in enumerate(rounds)]
    rows.append(["median"] + [f"{median([r[key] for r in rounds]):.2f}" for key in keys])
    print_table(["round", "to +PONG s", "load s (log)", "wall s", "user s", "sys s",
                 "peak RSS MB"], rows, title=f"{args.jobs} jobs, {size} bytes")
    if args.json:
        Path(args.json).write_text(json.dumps({"jobs": args.jobs, "bytes": size,
                                               "rounds": rounds}, indent=2))


if __name__ == "__main__":
    main()
