"""The single-node engine: disque-py next to the original Disque 1.0-rc1, in one run.

    python benchmarks/bench_engine.py --disque PATH [--rounds N] [--quick]
        [--skip-callgrind] [--skip-memory] [--json FILE] [--no-pin]

Six loads, each measured on disque-py and on Disque C (the disque-server
binary `--disque` or DISQUE_BINARY names; without it, disque-py only):

  ADDJOB, 50 conns        redis-benchmark -c 50 ADDJOB q <100-byte body> 0 (requests/s)
  ADDJOB, 50 conns, -P 16 the same, 16 commands pipelined per connection
  ADDJOB->GETJOB->ACKJOB  benchmarks/loader/cycle.c, compiled here with `cc -O2`:
                          50 non-blocking connections on one epoll loop, each
                          looping ADDJOB q<i> <100 bytes> 0, GETJOB FROM q<i>,
                          ACKJOB <the ID it got>, each command sent when the
                          previous reply arrives (cycles/s over a fixed time,
                          after a warm-up). The loader prints its own CPU,
                          and the user-space part of it: what is left is the
                          kernel sending on loopback, which any client pays.
  instructions per ADDJOB user-space instructions (callgrind's Ir) per pipelined
                          ADDJOB, method below
  RSS per queued job      a fresh server: VmRSS, then 1,000,000 ADDJOB q <100
                          bytes> 0 (4 connections, pipelined batches of 1,000),
                          VmRSS again; (after - before) / jobs
  PING gap                a fresh server: one connection writes 100,000 ADDJOB q
                          <100 bytes> 0 in one sendall while a thread reads the
                          replies as they come; a second client, in its own
                          process, sends PING, waits for +PONG, sends again. The
                          figure is the longest time between consecutive PONGs
                          that overlaps the flood (first byte written to last
                          reply read)

Instructions per ADDJOB, exactly: the server (its usual command line) runs
under `valgrind --tool=callgrind --instr-atstart=no`, so start-up and a
warm-up of 5,000 pipelined ADDJOBs (1,000 with --quick) run uninstrumented
and are not counted. Then `callgrind_control -i on PID` switches
instrumentation on, one connection sends N = 20,000 (5,000 with --quick)
ADDJOB q <100 bytes> 0 in pipelined batches of 16 (the next batch once the
last one's replies are all in), and `callgrind_control --dump PID` writes the
counts; the dump's `summary` (every instruction the process ran in user
space between the two: reading, parsing, the command, the replies, the event
loop, timers) divided by N is the figure. (callgrind_control switches
instrumentation, not collection: under --collect-atstart=no it would count
nothing.) For disque-py the process is the Python interpreter: `python -m
disque_py`.

Rules kept: servers on the first CPU (taskset -c 0), every load generator
and this script on the others (common.Pinning); 127.0.0.1 only, free ports,
fresh temporary directories; every server stopped by its own PID, also on
Ctrl-C or an error. The three throughput loads run `--rounds` times (3 by
default) on the same two servers, flushed (DEBUG FLUSHALL) before each load,
the order of the servers alternating between rounds; each reports the
median of each server, the median of the per-round ratios disque-py / Disque
C and their range. Instructions, memory and PING gap are measured once per
server, on fresh processes: they are stable. Every command line that
produced a number is printed. Nothing is asserted: the target column says
whether each target is met.
"""

from __future__ import annotations

import argparse
import array
import contextlib
import json
import multiprocessing
import os
import re
import shlex
import socket
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import hiredis

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (BODY, BODY_SIZE, HOST, MB, REDIS_BENCHMARK, Pinning,  # noqa: E402
                    command, encode_command, median, ordered, pipelined_fill, print_commands,
                    print_header, redis_benchmark_command, require_tools, run_async,
                    run_redis_benchmark, scratch_dir, stop_all, vm_rss_bytes)
from compare import (COMPILER, Row, add_disque_option, compile_loader,  # noqa: E402
                     first_line, print_details, print_latest, print_rounds, print_summary,
                     run_loader, server_kinds, tool_versions)

CONNECTIONS = 50
PIPELINE = 16
QUEUE = "q"
ADDJOB = encode_command("ADDJOB", QUEUE, BODY, "0")
PING = encode_command("PING")
VALGRIND = "valgrind"
CALLGRIND_CONTROL = "callgrind_control"
CALLGRIND_BATCH = 16
DUMP_TIMEOUT_S = 60
MEMORY_CONNECTIONS = 4
MEMORY_BATCH = 1000
SETTLE_S = 0.5            # our server frees flushed jobs in slices, a few per tick
PROBE_LEAD_S = 0.3        # PINGs answered before and after the flood
RECV_SIZE = 1 << 20

# Targets: the three rates as ratios disque-py / Disque C (at least), the
# rest as disque-py's own value (at most).
TARGET_ADDJOB = 1.0
TARGET_ADDJOB_PIPELINED = 1.5
TARGET_CYCLE = 1.0
TARGET_INSTRUCTIONS = 18_600
TARGET_BYTES_PER_JOB = 300
TARGET_PING_GAP_MS = 50


@dataclass
class Settings:
    rounds: int
    addjob_requests: int
    pipelined_requests: int
    cycle_warmup_s: float
    cycle_seconds: float
    callgrind_warmup: int
    callgrind_jobs: int
    memory_jobs: int
    flood_jobs: int

    @classmethod
    def for_mode(cls, quick: bool, rounds: int) -> "Settings":
        if quick:
            return cls(1, 20_000, 100_000, 0.3, 1.5, 1_000, 5_000, 200_000, 100_000)
        return cls(rounds, 100_000, 500_000, 1.0, 5.0, 5_000, 20_000, 1_000_000, 100_000)


# ------------------------------------------------------------------ servers

@contextlib.contextmanager
def running(server):
    """Start a server; stop it by its PID however the block ends."""
    try:
        server.start()
        yield server
    finally:
        server.stop()


def flush(server) -> None:
    server.flush()
    time.sleep(SETTLE_S)


# -------------------------------------------------------------- throughput

def run_addjob(server, settings: Settings, pipeline: int) -> tuple[float, float, float,
                                                                    None, list]:
    """Requests/s, server CPU %, redis-benchmark's CPU %, (no user-space split), command."""
    requests = settings.pipelined_requests if pipeline > 1 else settings.addjob_requests
    cmd = redis_benchmark_command(server.port, requests, CONNECTIONS, pipeline,
                                  command_args=["ADDJOB", QUEUE, BODY.decode(), "0"])
    return (*run_redis_benchmark(cmd, server.pid), None, cmd)


def run_cycles(server, settings: Settings, loader: Path) -> tuple[float, float, float,
                                                                   float, list]:
    """Cycles/s, server CPU %, loader CPU % and its user-space part, all over the
    loader's measured window; command."""
    cmd = [str(loader), HOST, str(server.port), str(CONNECTIONS),
           str(settings.cycle_warmup_s), str(settings.cycle_seconds)]
    run = run_loader(cmd, [server.pid])
    return (run.fields["cycles_per_s"], run.server_cpu, run.fields["cpu_percent"],
            run.fields["user_percent"], cmd)


def measure_throughput(servers, rows: list[Row], settings: Settings, loader: Path) -> None:
    loads = [lambda s: run_addjob(s, settings, 1),
             lambda s: run_addjob(s, settings, PIPELINE),
             lambda s: run_cycles(s, settings, loader)]
    for round_index in range(settings.rounds):
        print(f"\nround {round_index + 1}/{settings.rounds} ...", flush=True)
        for row, load in zip(rows, loads):
            for server in ordered(round_index, servers):
                flush(server)
                rate, server_cpu, loader_cpu, loader_user, cmd = load(server)
                row.add(server.label, rate, server_cpu, loader_cpu, loader_user)
                if round_index == 0:
                    row.commands.append(f"[{server.label}] {shlex.join(cmd)}")
            print_latest(row)


# ------------------------------------------------------------ instructions

def callgrind_control(*args) -> None:
    cmd = [CALLGRIND_CONTROL, *map(str, args)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{shlex.join(cmd)} failed: {done.stdout}{done.stderr}")


def read_dump(path: Path) -> int:
    """The `summary:` of a callgrind dump, once the file is complete (its
    last line, `totals:`, written)."""
    deadline = time.monotonic() + DUMP_TIMEOUT_S
    while time.monotonic() < deadline:
        text = path.read_text() if path.exists() else ""
        if "\ntotals:" in text:
            return int(text.split("\nsummary:", 1)[1].split()[0])
        time.sleep(0.1)
    raise RuntimeError(f"no complete callgrind dump at {path}")


def read_inclusive(path: Path, function: str) -> int | None:
    """The instructions the function whose C name matches the regular
    expression `function` ran, its callees included, in a complete callgrind
    dump (callgrind_annotate's count); None if it never ran."""
    out = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100",
                          str(path)], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        if re.search(function, line):
            return int(line.split()[0].replace(",", ""))
    return None


def count_instructions(kind, pinning: Pinning, settings: Settings, row: Row) -> None:
    directory = scratch_dir("bench-engine-callgrind-")
    server = kind(directory, pinning)
    out = directory / "callgrind.out"
    server.prefix += [VALGRIND, "--tool=callgrind", "--instr-atstart=no",
                      f"--callgrind-out-file={out}", f"--log-file={directory / 'valgrind.log'}"]
    with running(server):
        run_async(pipelined_fill(server.port, ADDJOB, settings.callgrind_warmup, 1,
                                 CALLGRIND_BATCH))
        callgrind_control("-i", "on", server.pid)
        elapsed, errors = run_async(pipelined_fill(server.port, ADDJOB, settings.callgrind_jobs,
                                                   1, CALLGRIND_BATCH))
        callgrind_control("--dump", server.pid)
        total = read_dump(Path(f"{out}.1"))
    row.add(server.label, total / settings.callgrind_jobs)
    row.details[server.label] = dict(jobs=settings.callgrind_jobs, errors=errors,
                                      instructions=total, seconds=elapsed)
    row.commands += [f"[{server.label}] {shlex.join(server.command_line())}",
                     f"[{server.label}] {CALLGRIND_CONTROL} -i on <pid>  (after "
                     f"{settings.callgrind_warmup:,} warm-up ADDJOBs)",
                     f"[{server.label}] {settings.callgrind_jobs:,} x ADDJOB {QUEUE} "
                     f"<{BODY_SIZE}-byte body> 0, 1 connection, batches of {CALLGRIND_BATCH}",
                     f"[{server.label}] {CALLGRIND_CONTROL} --dump <pid>"]
    print(f"  instructions  {server.label:16} {row.values[server.label][-1]:>10,.0f} "
          f"per ADDJOB", flush=True)


# ------------------------------------------------------------------ memory

def measure_memory(kind, pinning: Pinning, jobs: int, row: Row) -> None:
    server = kind(scratch_dir("bench-engine-memory-"), pinning)
    with running(server):
        time.sleep(SETTLE_S)
        before = vm_rss_bytes(server.pid)
        elapsed, errors = run_async(pipelined_fill(server.port, ADDJOB, jobs,
                                                   MEMORY_CONNECTIONS, MEMORY_BATCH))
        time.sleep(SETTLE_S)
        stored = command(server.port, "QLEN", QUEUE)
        after = vm_rss_bytes(server.pid)
    row.add(server.label, (after - before) / jobs)
    row.details[server.label] = dict(jobs=jobs, stored=stored, errors=errors,
                                      fill_seconds=elapsed, rss_before_mb=before / MB,
                                      rss_after_mb=after / MB)
    row.commands += [f"[{server.label}] {shlex.join(server.command_line())}",
                     f"[{server.label}] {jobs:,} x ADDJOB {QUEUE} <{BODY_SIZE}-byte body> 0, "
                     f"{MEMORY_CONNECTIONS} connections, batches of {MEMORY_BATCH:,}"]
    print(f"  memory        {server.label:16} {(after - before) / jobs:>10,.0f} bytes per job",
          flush=True)


# ---------------------------------------------------------------- PING gap

def ping_loop(port: int, stop, sender) -> None:
    """In a child process: PING, wait for +PONG, again, until `stop` is set;
    then send back the time (CLOCK_MONOTONIC) of every PONG."""
    pongs = array.array("d")
    with socket.create_connection((HOST, port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while not stop.is_set():
            sock.sendall(PING)
            reply = b""
            while not reply.endswith(b"\r\n"):
                chunk = sock.recv(64)
                if not chunk:
                    raise ConnectionError("server closed the PING connection")
                reply += chunk
            pongs.append(time.monotonic())
    sender.send_bytes(pongs.tobytes())


@contextlib.contextmanager
def ping_probe(port: int):
    """A PING loop in its own process; yields the list its PONG times land in."""
    context = multiprocessing.get_context("fork")
    stop = context.Event()
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(target=ping_loop, args=(port, stop, sender), daemon=True)
    child.start()
    sender.close()       # the child's copy stays open: its death ends recv_bytes
    pongs: list[float] = []
    try:
        yield pongs
        stop.set()
        pongs.extend(array.array("d", receiver.recv_bytes()))
    finally:
        child.terminate()
        child.join()


def flood(port: int, jobs: int) -> tuple[float, float, int]:
    """Write `jobs` ADDJOBs in one sendall while reading the replies; return
    (first byte written, last reply read) in CLOCK_MONOTONIC, and error replies."""
    reader = hiredis.Reader()
    replies = errors = 0
    with socket.create_connection((HOST, port)) as sock:
        writer = threading.Thread(target=sock.sendall, args=(ADDJOB * jobs,))
        start = time.monotonic()
        writer.start()
        while replies < jobs:
            chunk = sock.recv(RECV_SIZE)
            if not chunk:
                raise ConnectionError("server closed the flood connection")
            reader.feed(chunk)
            while (reply := reader.gets()) is not False:
                replies += 1
                errors += isinstance(reply, hiredis.ReplyError)
        end = time.monotonic()
        writer.join()
    return start, end, errors


def measure_ping_gap(kind, pinning: Pinning, jobs: int, row: Row) -> None:
    server = kind(scratch_dir("bench-engine-ping-"), pinning)
    with running(server), ping_probe(server.port) as pongs:
        time.sleep(PROBE_LEAD_S)
        start, end, errors = flood(server.port, jobs)
        time.sleep(PROBE_LEAD_S)
    gaps = list(zip(pongs, pongs[1:]))
    during = [b - a for a, b in gaps if b >= start and a <= end]
    idle = [b - a for a, b in gaps if b < start]
    row.add(server.label, 1000 * max(during))
    row.details[server.label] = dict(jobs=jobs, errors=errors, flood_seconds=end - start,
                                     pongs_during=sum(start <= t <= end for t in pongs),
                                     idle_gap_ms=1000 * median(idle),
                                     max_gap_ms=1000 * max(during))
    row.commands += [f"[{server.label}] {shlex.join(server.command_line())}",
                     f"[{server.label}] {jobs:,} x ADDJOB {QUEUE} <{BODY_SIZE}-byte body> 0 in "
                     f"one write on 1 connection; PING/+PONG loop on another, own process"]
    print(f"  PING gap      {server.label:16} {1000 * max(during):>10.1f} ms", flush=True)


# ------------------------------------------------------------------ report

def make_rows(settings: Settings) -> list[Row]:
    return [
        Row(f"ADDJOB, {CONNECTIONS} conns (req/s)", f">= {TARGET_ADDJOB:.1f}x",
            at_least=TARGET_ADDJOB),
        Row(f"ADDJOB, {CONNECTIONS} conns, -P {PIPELINE} (req/s)",
            f">= {TARGET_ADDJOB_PIPELINED:.1f}x", at_least=TARGET_ADDJOB_PIPELINED),
        Row(f"ADDJOB->GETJOB->ACKJOB, {CONNECTIONS} conns (cycles/s)",
            f">= {TARGET_CYCLE:.1f}x", at_least=TARGET_CYCLE),
        Row("instructions per pipelined ADDJOB (1 run)",
            f"<= {TARGET_INSTRUCTIONS / 1000:.1f}k", value_at_most=TARGET_INSTRUCTIONS),
        Row(f"RSS per queued {BODY_SIZE}-byte job, {settings.memory_jobs:,} jobs (bytes, 1 run)",
            f"<= {TARGET_BYTES_PER_JOB}", value_at_most=TARGET_BYTES_PER_JOB),
        Row(f"PING gap, {settings.flood_jobs:,} pipelined ADDJOBs (ms, 1 run)",
            f"<= {TARGET_PING_GAP_MS} ms", value_at_most=TARGET_PING_GAP_MS),
    ]


def print_report(rows: list[Row], settings: Settings) -> None:
    print_summary(rows, f"summary: rates are medians of {settings.rounds} round(s); ratio = "
                        f"median (range) of the per-round ratios disque-py / Disque C.\n"
                        f"Rows marked '1 run' ran once per server on a fresh process: their "
                        f"target applies to disque-py's value (Disque C's is for reference), "
                        f"and their ratio is lower-is-better.")


# -------------------------------------------------------------------- main

def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_disque_option(parser)
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds of the throughput loads (default 3)")
    parser.add_argument("--quick", action="store_true",
                        help="1 round, smaller counts: a smoke run")
    parser.add_argument("--skip-callgrind", action="store_true")
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument("--json", type=Path, help="also write the raw results here")
    parser.add_argument("--no-pin", action="store_true",
                        help="do not pin servers and load generators to separate CPUs")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    require_tools([REDIS_BENCHMARK, COMPILER]
                  + ([] if args.skip_callgrind else [VALGRIND, CALLGRIND_CONTROL]), hint="")
    settings = Settings.for_mode(args.quick, args.rounds)
    pinning = Pinning(not args.no_pin)
    pinning.pin_this_process()
    versions = tool_versions(args.disque)
    if not args.skip_callgrind:
        versions.append(("valgrind", first_line([VALGRIND, "--version"])))
    print_header("bench_engine: disque-py vs Disque 1.0-rc1 (C)", pinning, versions)
    print(f"settings: {settings}")
    started = time.perf_counter()
    kinds = server_kinds(args.disque)
    rows = make_rows(settings)
    loader, compile_cmd = compile_loader(scratch_dir("bench-engine-loader-"))
    print_commands([compile_cmd])

    servers = [kind(scratch_dir("bench-engine-"), pinning) for kind in kinds]
    try:
        for server in servers:
            server.start()
        print_commands([f"[{s.label}] {shlex.join(s.command_line())}" for s in servers])
        measure_throughput(servers, rows[:3], settings, loader)
    finally:
        stop_all(servers)

    print("\nonce per server, fresh processes ...", flush=True)
    for kind in kinds:
        if not args.skip_callgrind:
            count_instructions(kind, pinning, settings, rows[3])
        if not args.skip_memory:
            measure_memory(kind, pinning, settings.memory_jobs, rows[4])
        measure_ping_gap(kind, pinning, settings.flood_jobs, rows[5])

    print_commands(line for row in rows for line in row.commands)
    print_rounds(rows[:3], "per round (requests or cycles per second)")
    print_details(rows)
    print_report(rows, settings)
    print(f"\ntotal time {time.perf_counter() - started:.0f}s; load average now "
          + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    if args.json:
        args.json.write_text(json.dumps(dict(settings=asdict(settings),
                                             rows=[asdict(row) for row in rows]), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
