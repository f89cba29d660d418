"""What the dashboard costs a full node (issue 21): the time of each page and
the loop stall it causes, and the stall of the sampler alone.

    .venv/bin/python benchmarks/bench_dashboard.py [--jobs N] [--queues N]
        [--big-queue N] [--requests N] [--idle-seconds S] [--no-pin]

A node (--http-port, pinned to the server CPU) is filled with --jobs
ADDJOBs spread evenly over --queues queues, plus --big-queue jobs in one
queue "big" (its page is read at offset 0 and at the deepest offset the
dashboard pages to). A probe PINGs the node every millisecond on its own
connection throughout. Then:
  * idle: --idle-seconds with no HTTP request: the longest PING round trip
    shows the stall of the sampler (one sample a second; past 100 queues,
    a slice of the walk that chooses the queues sampled), beside the same
    window on a node filled alike with the HTTP endpoint off (no sampler);
  * pages: each page GET --requests times, one after the other, timed from
    the request to the last byte; its stall is the longest PING round trip
    that overlapped it.
Both against the probe's median round trip.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_http import fill_command, node, running  # noqa: E402
from benchmarks.common import (LatencyProbe, Pinning, command, info, ms,  # noqa: E402
                               pipelined_fill, print_header, print_table, run_async)
from disque_py.formats.resp import encode_command  # noqa: E402
from disque_py.tools.loopback import HOST  # noqa: E402

PROBE_INTERVAL_S = 0.001
FILL_BATCH, FILL_CONNECTIONS = 1000, 4
DEEPEST_OFFSET = 10_000             # readers.MAX_JOB_OFFSET


async def timed_get(http_port: int, path: str) -> float:
    """Seconds from the request to the last byte of one GET."""
    reader, writer = await asyncio.open_connection(HOST, http_port)
    began = time.perf_counter()
    writer.write(f"GET {path} HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n".encode())
    body = await reader.read()
    elapsed = time.perf_counter() - began
    writer.close()
    if not body.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(f"{path} answered {body[:80]!r}")
    return elapsed


async def idle_stall(port: int, idle_s: float) -> tuple[float, float]:
    """(probe median, longest round trip) over idle_s with no other request."""
    probe = await LatencyProbe(port, PROBE_INTERVAL_S).start()
    start = time.perf_counter()
    await asyncio.sleep(idle_s)
    worst = probe.worst_between(start, time.perf_counter())
    await probe.stop()
    return probe.median(), worst


async def measure(http_port: int, port: int, pages: dict, requests: int,
                  idle_s: float) -> tuple[float, float, dict]:
    """(probe median, idle worst round trip, {page: [(seconds, stall)]})."""
    median, idle_worst = await idle_stall(port, idle_s)
    probe = await LatencyProbe(port, PROBE_INTERVAL_S).start()
    results = {}
    for label, path in pages.items():
        results[label] = []
        for _ in range(requests):
            began = time.perf_counter()
            elapsed = await timed_get(http_port, path)
            ended = time.perf_counter()
            await asyncio.sleep(0.2)         # the PING that straddles the end returns
            results[label].append((elapsed, probe.worst_between(began, ended)))
    await probe.stop()
    return median, idle_worst, results


def fill(port: int, args) -> None:
    seconds, errors = run_async(pipelined_fill(port, fill_command(args.queues), args.jobs,
                                               FILL_CONNECTIONS, FILL_BATCH))
    big = encode_command("ADDJOB", "big", b"x" * 100, 0)
    more, more_errors = run_async(pipelined_fill(port, big, args.big_queue,
                                                 FILL_CONNECTIONS, FILL_BATCH))
    if errors or more_errors:
        raise RuntimeError(f"{errors + more_errors} ADDJOBs failed while filling")
    fields = info(port)
    print(f"  filled {fields['registered_jobs']} jobs in {fields['registered_queues']} "
          f"queues in {seconds + more:.1f} s", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--queues", type=int, default=10_000)
    parser.add_argument("--big-queue", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=10)
    parser.add_argument("--idle-seconds", type=float, default=30.0)
    parser.add_argument("--no-pin", action="store_true")
    args = parser.parse_args()
    pinning = Pinning(not args.no_pin)
    pinning.pin_this_process()
    print_header("bench_dashboard: the dashboard's pages on a full node", pinning)
    with running(node(pinning, False)) as off:
        fill(off.port, args)
        _, off_worst = run_async(idle_stall(off.port, args.idle_seconds))
    server = node(pinning, True)
    with running(server):
        fill(server.port, args)
        job_id = command(server.port, "QPEEK", "big", 1)[0][1]
        pages = {"overview (100 busiest queues)": "/dashboard/",
                 f"queue page, {args.big_queue:,} jobs, offset 0": "/dashboard/queue?name=big",
                 f"queue page, offset {DEEPEST_OFFSET:,}":
                     f"/dashboard/queue?name=big&offset={DEEPEST_OFFSET}",
                 "job page": f"/dashboard/job?id={quote(job_id, safe='')}",
                 "latency and slow log": "/dashboard/latency"}
        median, idle_worst, results = run_async(
            measure(server.http_port, server.port, pages, args.requests, args.idle_seconds))
    rows = [["PING round trip, median", ms(median), ""],
            [f"longest PING, {args.idle_seconds:.0f} s idle, HTTP off (no sampler)",
             ms(off_worst), ""],
            [f"longest PING, {args.idle_seconds:.0f} s idle, HTTP on (the sampler)",
             ms(idle_worst), ""]]
    for label, figures in results.items():
        times = [elapsed for elapsed, _ in figures]
        stalls = [stall for _, stall in figures]
        rows.append([f"{label}: request to last byte", ms(statistics.median(times)),
                     ms(max(times))])
        rows.append([f"{label}: longest PING meanwhile", ms(statistics.median(stalls)),
                     ms(max(stalls))])
    print_table(["", "median (ms)", "max (ms)"], rows,
                title=f"{args.jobs:,} jobs in {args.queues:,} queues, and {args.big_queue:,} "
                      f"in one ({args.requests} requests a page)")


if __name__ == "__main__":
    main()
