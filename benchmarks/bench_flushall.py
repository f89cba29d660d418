"""How long DEBUG FLUSHALL of a million jobs stalls the event loop.

    python benchmarks/bench_flushall.py [--quick] [--jobs N] [--no-yardstick] [--no-pin]

Fills a fresh disque-py with N jobs (ADDJOB q<i % 100> <100 bytes> 0,
pipelined over four connections), then, while a probe connection sends PING
every millisecond, sends DEBUG FLUSHALL on a third connection. Reported:

  flush reply      time from sending DEBUG FLUSHALL to its +OK
  worst PING       the longest PING round trip among PINGs sent during the
                   flush, a PING left waiting counting too: how long any
                   client was stalled (target: under 0.5 s)
  worst PING after the longest round trip of PINGs sent over the next
                   seconds, while our server frees the flushed jobs in slices
                   from its periodic timer
  RSS              VmRSS before the fill, after it, and after the settle time

The yardstick is redis-server freeing the same number of 100-byte string
keys (SET job:<i>) with FLUSHALL SYNC, which frees everything before it
replies: a stall by design, shown for scale.
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (BODY, MB, DisqueServer, LatencyProbe, Pinning, RedisServer,  # noqa: E402
                    RespConnection, encode_command, ms, pipelined_fill, print_commands,
                    print_header, print_table, require_tools, run_async, scratch_dir,
                    vm_rss_bytes)

TARGET_STALL_S = 0.5
QUEUES = 100
IDLE_PROBE_S = 0.5


def disque_job(i: int) -> bytes:
    return encode_command("ADDJOB", f"q{i % QUEUES}", BODY, "0")


def redis_key(i: int) -> bytes:
    return encode_command("SET", f"job:{i}", BODY)


async def flush_with_probe(server, fill_command, flush_args, jobs: int, settle_s: float) -> dict:
    rss_empty = vm_rss_bytes(server.pid)
    fill_s, errors = await pipelined_fill(server.port, fill_command, jobs)
    await asyncio.sleep(0.3)
    rss_full = vm_rss_bytes(server.pid)
    probe = await LatencyProbe(server.port).start()
    await asyncio.sleep(IDLE_PROBE_S)
    idle_median = probe.median()
    flusher = await RespConnection.open(server.port)
    sent = time.perf_counter()
    reply = await flusher.call(*flush_args)
    replied = time.perf_counter()
    during = probe.worst_between(sent, replied)
    answered_during = probe.answered_between(sent, replied)
    await asyncio.sleep(settle_s)
    settled = time.perf_counter()
    after = probe.worst_sent_between(replied, settled)
    await probe.stop()
    flusher.close()
    return dict(server=server.label, jobs=jobs, fill_errors=errors, fill_s=fill_s,
                reply=reply, flush_s=replied - sent, worst_during_s=during,
                pings_during=answered_during, worst_after_s=after, idle_median_s=idle_median,
                rss_empty=rss_empty, rss_full=rss_full, rss_settled=vm_rss_bytes(server.pid))


def measure(server, fill_command, flush_args, jobs: int, settle_s: float) -> dict:
    server.start()
    try:
        return run_async(flush_with_probe(server, fill_command, flush_args, jobs, settle_s))
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="200,000 jobs instead of 1,000,000")
    parser.add_argument("--jobs", type=int, help="jobs to flush (default 1,000,000)")
    parser.add_argument("--settle", type=float, default=3.0,
                        help="seconds to keep probing after the flush replied (default 3)")
    parser.add_argument("--no-yardstick", action="store_true", help="skip redis-server")
    parser.add_argument("--no-pin", action="store_true",
                        help="do not pin servers and load generators to separate CPUs")
    args = parser.parse_args(argv)
    require_tools()
    jobs = args.jobs or (200_000 if args.quick else 1_000_000)
    pinning = Pinning(not args.no_pin)
    pinning.pin_this_process()
    print_header("bench_flushall: event-loop stall during DEBUG FLUSHALL", pinning)
    runs = [(DisqueServer(scratch_dir("bench-flush-"), pinning), disque_job,
             ("DEBUG", "FLUSHALL"))]
    if not args.no_yardstick:
        runs.insert(0, (RedisServer(scratch_dir("bench-flush-redis-"), pinning), redis_key,
                        ("FLUSHALL", "SYNC")))
    rows = []
    for server, fill_command, flush_args in runs:
        print(f"{server.label}: filling {jobs:,} and flushing ...", flush=True)
        result = measure(server, fill_command, flush_args, jobs, args.settle)
        result["command"] = shlex.join(server.command_line())
        result["flush_command"] = " ".join(flush_args)
        rows.append(result)
    print_commands([f"[{r['server']}] {r['command']}" for r in rows] +
                   ["[disque-py] fill: ADDJOB q<i % 100> <100-byte body> 0, pipelined 1000 "
                    "per batch over 4 connections; then DEBUG FLUSHALL",
                    "[redis-server] fill: SET job:<i> <100-byte body>, same batches; then "
                    "FLUSHALL SYNC",
                    "[both] probe: PING every 1 ms on its own connection"])
    print_table(["server", "jobs", "fill errors", "fill s", "flush", "flush reply ms",
                 "worst PING during ms", "PINGs answered during", "worst PING after ms",
                 "idle PING median ms", "RSS empty/full/settled MB"],
                [[r["server"], r["jobs"], r["fill_errors"], r["fill_s"], r["flush_command"],
                  ms(r["flush_s"]), ms(r["worst_during_s"]), r["pings_during"],
                  ms(r["worst_after_s"]), ms(r["idle_median_s"]),
                  f"{r['rss_empty'] / MB:.0f} / {r['rss_full'] / MB:.0f} / "
                  f"{r['rss_settled'] / MB:.0f}"] for r in rows],
                title=f"results (settle {args.settle:.1f}s after the reply)")
    ours = rows[-1]
    stall = max(ours["worst_during_s"], ours["worst_after_s"])
    verdict = "meets" if stall < TARGET_STALL_S else "MISSES"
    print(f"\ndisque-py longest stall {ms(stall):.1f} ms: {verdict} the "
          f"{ms(TARGET_STALL_S):.0f} ms target")
    return 0


if __name__ == "__main__":
    sys.exit(main())
