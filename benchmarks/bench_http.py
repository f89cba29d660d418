"""What the HTTP endpoint costs (issue 21): ADDJOB throughput while /metrics
is scraped every second against the endpoint off, and the time and loop
stall of one scrape of a node holding 10,000 queues and 1,000,000 jobs.

    .venv/bin/python benchmarks/bench_http.py [--rounds N] [--quick] [--no-pin]
        [--jobs N] [--queues N] [--scrapes N] [--skip-throughput] [--skip-scrape]

a) throughput: `redis-benchmark -c 50 -P 16 ADDJOB q <100 bytes> 0`
   against a fresh node with http-port 0 ("off") and one with an HTTP port
   that a scraper GETs /metrics from once a second for the whole run
   ("on, scraped 1/s"); the two alternate within each round (the order
   flips every round), servers on the server CPU, the load on the other.
   The median of each, and their ratio; and the server's CPU time per
   ADDJOB (its user + system seconds over the run, from /proc, divided by
   the requests), which other processes on a shared machine move much less
   than the rate: they take the CPU from the server, not its cost per job.
b) scrape: a node filled with --jobs ADDJOBs (pipelined, 1000 per batch,
   4 connections) spread evenly over --queues queues; then --scrapes GETs of
   /metrics one after the other, each timed from the request to the last
   byte, while a probe PINGs the node every millisecond on its own
   connection. The stall of a scrape is the longest PING round trip that
   overlapped it, against the probe's median round trip with no scrape.
   Then CPU_SCRAPES more scrapes without the probe: the server's CPU time
   per scrape (from /proc), i.e. what scraping once a second costs it.
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import statistics
import sys
import threading
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import (BODY, DisqueServer, LatencyProbe, Pinning,  # noqa: E402
                               cpu_seconds, info, median, ms, ordered, pipelined_fill, print_commands,
                               print_header, print_table, redis_benchmark_command,
                               run_async, run_redis_benchmark, scratch_dir)
from disque_py.formats.resp import encode_command  # noqa: E402
from disque_py.tools.loopback import HOST, free_port  # noqa: E402

SCRAPE_INTERVAL_S = 1.0
CPU_SCRAPES = 100               # enough for /proc's 10 ms ticks to average out
PROBE_INTERVAL_S = 0.001
FILL_BATCH = 1000
FILL_CONNECTIONS = 4
ADDJOB = ("ADDJOB", "q", BODY.decode(), "0")
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def node(pinning: Pinning, http: bool, *extra: str) -> DisqueServer:
    args = ["--maxmemory", "0", *extra]
    server = DisqueServer(scratch_dir("bench-http-"), pinning, args)
    server.http_port = free_port() if http else 0
    server.args += ["--http-port", str(server.http_port)]
    return server


@contextmanager
def running(server: DisqueServer):
    try:
        server.start()
        yield server
    finally:
        server.stop(timeout=120)


# ---------------------------------------------------------------- a) throughput

class Scraper(threading.Thread):
    """GET /metrics every SCRAPE_INTERVAL_S until stopped (Prometheus's part)."""

    def __init__(self, http_port: int) -> None:
        super().__init__(daemon=True)
        self.url = f"http://{HOST}:{http_port}/metrics"
        self.done = threading.Event()
        self.scrapes = 0

    def run(self) -> None:
        while not self.done.is_set():
            began = time.monotonic()
            with _NO_PROXY.open(self.url, timeout=30) as response:
                response.read()
            self.scrapes += 1
            self.done.wait(max(SCRAPE_INTERVAL_S - (time.monotonic() - began), 0))


def addjob_rate(server: DisqueServer, requests: int) -> tuple[float, float, int]:
    """(ADDJOBs per second, server CPU microseconds per ADDJOB, scrapes made meanwhile)."""
    cmd = redis_benchmark_command(server.port, requests, clients=50, pipeline=16,
                                  command_args=ADDJOB)
    with running(server):
        scraper = Scraper(server.http_port) if server.http_port else None
        if scraper is not None:
            scraper.start()
        try:
            rate, cpu_percent, _ = run_redis_benchmark(cmd, server.pid)
        finally:
            if scraper is not None:
                scraper.done.set()
                scraper.join()
    cpu_us = cpu_percent / 100 / rate * 1e6
    return rate, cpu_us, scraper.scrapes if scraper is not None else 0


def throughput(pinning: Pinning, rounds: int, requests: int) -> None:
    kinds = [("off", False), ("on, scraped 1/s", True)]
    rates: dict[str, list[float]] = {label: [] for label, _ in kinds}
    costs: dict[str, list[float]] = {label: [] for label, _ in kinds}
    for round_index in range(rounds):
        for label, http in ordered(round_index, kinds):
            rate, cpu_us, scrapes = addjob_rate(node(pinning, http), requests)
            rates[label].append(rate)
            costs[label].append(cpu_us)
            print(f"  round {round_index + 1}  {label:16} {rate:>10,.0f} ops/s  "
                  f"{cpu_us:5.2f} us CPU/ADDJOB{f'  ({scrapes} scrapes)' if http else ''}",
                  flush=True)
    rows = [[label, median(rates[label]), median(costs[label]),
             ", ".join(f"{r:,.0f}" for r in rates[label])] for label, _ in kinds]
    print_table(["HTTP endpoint", "ADDJOB c50 -P16 (ops/s)", "server CPU/ADDJOB (us)",
                 "rounds (ops/s)"], rows, title="a) throughput (medians)")
    print(f"on / off: rate {rows[1][1] / rows[0][1]:.3f}, CPU per ADDJOB "
          f"{rows[1][2] / rows[0][2]:.3f} (median of {rounds} rounds)")
    print_commands([redis_benchmark_command(0, requests, 50, 16, command_args=ADDJOB)])


# ------------------------------------------------------------------ b) scrape

async def timed_scrape(http_port: int) -> tuple[float, int]:
    """(seconds from the request to the last byte, bytes) of one GET /metrics."""
    reader, writer = await asyncio.open_connection(HOST, http_port)
    began = time.perf_counter()
    writer.write(f"GET /metrics HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n"
                 .encode())
    body = await reader.read()
    elapsed = time.perf_counter() - began
    writer.close()
    if not body.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(f"/metrics answered {body[:80]!r}")
    return elapsed, len(body)


async def scrape_under_probe(server: DisqueServer, scrapes: int) -> tuple[list, float]:
    """[(scrape seconds, stall seconds, bytes)], and the probe's idle median."""
    probe = await LatencyProbe(server.port, PROBE_INTERVAL_S).start()
    await asyncio.sleep(1.0)                     # the idle round trip, before any scrape
    idle = probe.median()
    results = []
    for _ in range(scrapes):
        start = time.perf_counter()
        elapsed, size = await timed_scrape(server.http_port)
        end = time.perf_counter()
        await asyncio.sleep(0.2)                 # let the PING that straddles the end return
        results.append((elapsed, probe.worst_between(start, end), size))
    await probe.stop()
    return results, idle


def cpu_per_scrape_ms(server: DisqueServer) -> float:
    before = cpu_seconds(server.pid)
    for _ in range(CPU_SCRAPES):
        with _NO_PROXY.open(f"http://{HOST}:{server.http_port}/metrics", timeout=30) as response:
            response.read()
    return ms((cpu_seconds(server.pid) - before) / CPU_SCRAPES)


def fill_command(queues: int):
    return lambda i: encode_command("ADDJOB", f"queue-{i % queues}", BODY, 0)


def scrape_figures(pinning: Pinning, jobs: int, queues: int, scrapes: int) -> None:
    server = node(pinning, True)
    with running(server):
        seconds, errors = run_async(pipelined_fill(server.port, fill_command(queues), jobs,
                                                   FILL_CONNECTIONS, FILL_BATCH))
        if errors:
            raise RuntimeError(f"{errors} ADDJOBs failed while filling")
        fields = info(server.port)
        print(f"  filled {fields['registered_jobs']} jobs in {fields['registered_queues']} "
              f"queues in {seconds:.1f} s", flush=True)
        results, idle = run_async(scrape_under_probe(server, scrapes))
        cpu_ms = cpu_per_scrape_ms(server)
    times = [elapsed for elapsed, _, _ in results]
    stalls = [stall for _, stall, _ in results]
    print_table(["", "median (ms)", "max (ms)"],
                [["scrape, request to last byte", ms(statistics.median(times)), ms(max(times))],
                 ["longest PING round trip during a scrape", ms(statistics.median(stalls)),
                  ms(max(stalls))],
                 ["PING round trip, no scrape", ms(idle), ""],
                 ["server CPU per scrape", cpu_ms, ""]],
                title=f"b) scrape of {jobs:,} jobs in {queues:,} queues "
                      f"({scrapes} scrapes, {results[0][2]:,} bytes each)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true",
                        help="1 round, fewer requests, 100,000 jobs")
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--queues", type=int, default=10_000)
    parser.add_argument("--scrapes", type=int, default=20)
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--skip-scrape", action="store_true")
    parser.add_argument("--no-pin", action="store_true")
    args = parser.parse_args()
    rounds = 1 if args.quick else args.rounds
    requests = 200_000 if args.quick else 1_000_000
    jobs = 100_000 if args.quick else args.jobs
    pinning = Pinning(not args.no_pin)
    pinning.pin_this_process()
    print_header("bench_http: the HTTP endpoint's cost", pinning)
    print("server: " + shlex.join(node(pinning, True).command_line()))
    if not args.skip_throughput:
        throughput(pinning, rounds, requests)
    if not args.skip_scrape:
        scrape_figures(pinning, jobs, args.queues, args.scrapes)


if __name__ == "__main__":
    main()
