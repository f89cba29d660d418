"""How late 100,000 jobs with the same DELAY are queued, and what it costs clients.

    python benchmarks/bench_timers.py [--quick] [--jobs N] [--delay S] [--no-pin]

Adds N jobs with `ADDJOB delayed <100 bytes> 0 DELAY S` to a fresh
disque-py: the first alone, the middle N-2 pipelined in batches of 1000
over four connections, the last alone. Meanwhile one connection polls
QLEN delayed every millisecond and another sends PING every millisecond.

  first late   when QLEN first showed a job, minus when the first job was
               due (its ADDJOB's reply + S; the job was created between the
               send and the reply, so this is the smallest the lateness can
               be; the ADDJOB round trip is printed as its uncertainty)
  last late    when QLEN first showed all N, minus the last job's due time
  worst PING   the longest PING round trip while the jobs were being queued
               (from the first due time until all N were queued), and over
               the whole run (the pipelined adds included)

There is no yardstick: Redis has no delayed jobs. The idle PING median of
the same server, before the adds, is shown for scale.
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (BODY, DisqueServer, LatencyProbe, Pinning, RespConnection,  # noqa: E402
                    encode_command, ms, pipelined_fill, print_commands, print_header,
                    print_table, require_tools, run_async, scratch_dir)

QUEUE = "delayed"
POLL_INTERVAL_S = 0.001
IDLE_PROBE_S = 0.5
DEADLINE_MARGIN_S = 60


class QueueWatcher:
    """Poll QLEN every millisecond; note when it first reached 1 and when N."""

    def __init__(self, port: int, expected: int) -> None:
        self.port, self.expected = port, expected
        self.first_seen: float | None = None
        self.all_seen: float | None = None
        self.last_length = 0
        self._done = asyncio.Event()

    async def run(self, deadline: float) -> None:
        conn = await RespConnection.open(self.port)
        qlen = encode_command("QLEN", QUEUE)
        try:
            while time.perf_counter() < deadline:
                length = await conn.send_raw(qlen, 1)[0]
                now = time.perf_counter()
                self.last_length = length
                if length >= 1 and self.first_seen is None:
                    self.first_seen = now
                if length >= self.expected:
                    self.all_seen = now
                    return
                await asyncio.sleep(POLL_INTERVAL_S)
        finally:
            conn.close()


async def add_one(port: int, payload: bytes) -> tuple[float, float]:
    conn = await RespConnection.open(port)
    sent = time.perf_counter()
    reply = await conn.send_raw(payload, 1)[0]
    replied = time.perf_counter()
    conn.close()
    if not isinstance(reply, bytes):
        raise RuntimeError(f"ADDJOB failed: {reply!r}")
    return sent, replied


async def run_timers(port: int, jobs: int, delay: int) -> dict:
    payload = encode_command("ADDJOB", QUEUE, BODY, "0", "DELAY", str(delay))
    probe = await LatencyProbe(port).start()
    await asyncio.sleep(IDLE_PROBE_S)
    idle_median = probe.median()
    watcher = QueueWatcher(port, jobs)
    began = time.perf_counter()
    watching = asyncio.get_running_loop().create_task(
        watcher.run(began + delay + DEADLINE_MARGIN_S))
    first_sent, first_replied = await add_one(port, payload)
    fill_s, errors = await pipelined_fill(port, payload, max(jobs - 2, 0))
    last_sent, last_replied = await add_one(port, payload)
    added = time.perf_counter()
    await watching
    ended = time.perf_counter()
    await probe.stop()
    first_due, last_due = first_replied + delay, last_replied + delay
    if watcher.all_seen is None:
        raise RuntimeError(f"only {watcher.last_length:,} of {jobs:,} jobs queued "
                           f"{DEADLINE_MARGIN_S}s after their due time")
    return dict(
        jobs=jobs, delay=delay, fill_errors=errors, add_s=added - began, fill_s=fill_s,
        first_late_s=watcher.first_seen - first_due, first_rtt_s=first_replied - first_sent,
        last_late_s=watcher.all_seen - last_due, last_rtt_s=last_replied - last_sent,
        queueing_s=watcher.all_seen - watcher.first_seen,
        added_before_due=added < first_due,
        worst_ping_queueing_s=probe.worst_between(min(first_due, watcher.first_seen),
                                                  watcher.all_seen),
        worst_ping_all_s=probe.worst_between(began, ended), idle_median_s=idle_median)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="20,000 jobs instead of 100,000")
    parser.add_argument("--jobs", type=int, help="jobs to add (default 100,000)")
    parser.add_argument("--delay", type=int, default=2, help="DELAY in seconds (default 2)")
    parser.add_argument("--no-pin", action="store_true",
                        help="do not pin the server and the load to separate CPUs")
    args = parser.parse_args(argv)
    require_tools()
    jobs = args.jobs or (20_000 if args.quick else 100_000)
    pinning = Pinning(not args.no_pin)
    pinning.pin_this_process()
    print_header("bench_timers: many jobs with the same DELAY", pinning)
    server = DisqueServer(scratch_dir("bench-timers-"), pinning).start()
    try:
        result = run_async(run_timers(server.port, jobs, args.delay))
    finally:
        server.stop()
    print_commands([server.command_line(),
                    f"ADDJOB {QUEUE} <100-byte body> 0 DELAY {args.delay}  x {jobs:,} "
                    f"(first alone, then pipelined 1000 per batch over 4 connections, "
                    f"last alone)",
                    f"QLEN {QUEUE} every 1 ms; PING every 1 ms (separate connections)"])
    r = result
    print_table(["measure", "value"], [
        ["jobs / delay", f"{r['jobs']:,} / {r['delay']} s"],
        ["ADDJOB errors", r["fill_errors"]],
        ["time to add all (s)", r["add_s"]],
        ["all added before the first was due", "yes" if r["added_before_due"] else "no"],
        ["first job queued late by (ms)", f"{ms(r['first_late_s']):.1f} "
                                          f"(+{ms(r['first_rtt_s']):.2f} uncertainty)"],
        ["last job queued late by (ms)", f"{ms(r['last_late_s']):.1f} "
                                         f"(+{ms(r['last_rtt_s']):.2f} uncertainty)"],
        ["first to last queued (ms)", ms(r["queueing_s"])],
        ["worst PING while queueing (ms)", ms(r["worst_ping_queueing_s"])],
        ["worst PING whole run (ms)", ms(r["worst_ping_all_s"])],
        ["idle PING median (ms)", ms(r["idle_median_s"])],
    ], title="results")
    print(f"\nserver: {shlex.join(server.command_line())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
