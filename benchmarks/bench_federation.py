"""Federation latency: ADDJOB on node A to GETJOB returning on node B.

    python benchmarks/bench_federation.py [--quick] [--samples N] [--rate R]
                                          [--seconds S] [--no-pin]

Three disque-py nodes on loopback, joined with CLUSTER MEET (default
configuration otherwise). Producers talk to A only, consumers to B only, so
every job must travel A -> B (NEEDJOBS/YOURJOBS, or the push to a node that
asked). ADDJOB uses the default REPLICATE (3 here: a copy on every node,
queued on A). Each body carries the producer's perf_counter() at send time;
latency is the consumer's perf_counter() when GETJOB's reply arrives minus
that (one process, one clock). Consumers ACKJOB every job.

  slow    one job every 5 s (12 samples, 4 with --quick), a consumer blocked
          on B in between: the latency of a lone job
  load    R jobs/s offered (default 5,000) for S seconds (default 10, 3 with
          --quick), paced over 4 producer connections (at most 2,000 ADDJOBs
          in flight: beyond that the producer falls behind and says so);
          8 consumer connections blocked on B with GETJOB COUNT 100

Reported per phase: jobs offered and delivered, delivered rate, latency p50 /
p99 / max, and bus messages per delivered job: the growth of CLUSTER INFO
cluster_stats_messages_sent (and _received) summed over the three nodes,
from the phase's start until every node has forgotten every job (acks
collected), minus the heartbeat baseline: the same counters over an idle
window of the same length, right after. Frames are counted, not items: a
frame may batch many jobs' items for one peer.

No yardstick: Redis has no federation. With pinning (two or more CPUs) the
three servers share the first CPU, the load the others: a loaded phase
measures three Python servers on one core.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (HOST, Pinning, RespConnection, cluster_info, command,  # noqa: E402
                    encode_command, ms, print_commands, print_header, print_table,
                    run_async, start_cluster)

NODES = 3
QUEUE = "fed"
SLOW_PERIOD_S = 5.0
PRODUCER_CONNECTIONS = 4
CONSUMER_CONNECTIONS = 8
MAX_IN_FLIGHT = 2000
PACE_TICK_S = 0.001
DRAIN_TIMEOUT_S = 60.0
MESH_TIMEOUT_S = 30.0
PAD = b"x" * 64            # body: "<timestamp> " + padding, about 85 bytes


# ------------------------------------------------------------------ cluster

def bus_counters(servers) -> tuple[int, int]:
    sent = received = 0
    for server in servers:
        fields = cluster_info(server.port)
        sent += int(fields["cluster_stats_messages_sent"])
        received += int(fields["cluster_stats_messages_received"])
    return sent, received


async def wait_no_jobs(servers, timeout: float) -> None:
    """Until every node has forgotten every job (acks garbage-collected)."""
    deadline = time.perf_counter() + timeout
    while True:
        if all(int(command(s.port, "INFO", "jobs").split("registered_jobs:")[1].split()[0]) == 0
               for s in servers):
            return
        if time.perf_counter() > deadline:
            raise RuntimeError("jobs still registered after the phase")
        await asyncio.sleep(0.05)


# ------------------------------------------------------------------ load

class Consumer:
    """GETJOB on B in a loop; note each job's latency; ACKJOB it."""

    def __init__(self, port: int, latencies: list[float], count: int) -> None:
        self.port, self.latencies, self.count = port, latencies, count

    async def run(self, stop: asyncio.Event) -> None:
        conn = await RespConnection.open(self.port)
        getjob = encode_command("GETJOB", "TIMEOUT", "200", "COUNT", str(self.count),
                                "FROM", QUEUE)
        try:
            while not stop.is_set():
                reply = await conn.send_raw(getjob, 1)[0]
                arrived = time.perf_counter()
                if not reply:
                    continue
                ids = []
                for _queue, job_id, body in reply:
                    self.latencies.append(arrived - float(body.split(b" ", 1)[0]))
                    ids.append(job_id)
                await conn.call("ACKJOB", *ids)
        finally:
            conn.close()


async def run_consumers(port: int, connections: int, count: int, latencies: list[float]):
    stop = asyncio.Event()
    tasks = [asyncio.get_running_loop().create_task(Consumer(port, latencies, count).run(stop))
             for _ in range(connections)]
    return stop, tasks


def body_now() -> bytes:
    return b"%.6f " % time.perf_counter() + PAD


async def addjob(conn: RespConnection) -> None:
    reply = await conn.call("ADDJOB", QUEUE, body_now(), "5000")
    if not isinstance(reply, bytes):
        raise RuntimeError(f"ADDJOB failed: {reply!r}")


async def phase(servers, run_producer, expected_timeout: float, consumers: int,
                count: int) -> dict:
    """Run one phase; return its latencies, counts and bus-message costs."""
    a, b = servers[0], servers[1]
    latencies: list[float] = []
    sent0, received0 = bus_counters(servers)
    began = time.perf_counter()
    stop, tasks = await run_consumers(b.port, consumers, count, latencies)
    offered, behind = await run_producer(a.port)
    deadline = time.perf_counter() + expected_timeout
    while len(latencies) < offered and time.perf_counter() < deadline:
        await asyncio.sleep(0.01)
    stop.set()
    await asyncio.gather(*tasks)
    await wait_no_jobs(servers, DRAIN_TIMEOUT_S)
    sent1, received1 = bus_counters(servers)
    duration = time.perf_counter() - began
    await asyncio.sleep(duration)                   # idle: the heartbeat baseline
    sent2, received2 = bus_counters(servers)
    delivered = len(latencies)
    return dict(offered=offered, behind=behind, delivered=delivered, duration=duration,
                latencies=sorted(latencies), sent=sent1 - sent0, received=received1 - received0,
                idle_sent=sent2 - sent1, idle_received=received2 - received1)


def slow_producer(samples: int):
    async def produce(port: int) -> tuple[int, int]:
        conn = await RespConnection.open(port)
        await asyncio.sleep(0.5)                       # consumers parked first
        start = time.perf_counter()
        for k in range(samples):
            await asyncio.sleep(max(start + k * SLOW_PERIOD_S - time.perf_counter(), 0))
            await addjob(conn)
        conn.close()
        return samples, 0
    return produce


def paced_producer(rate: float, seconds: float):
    async def produce(port: int) -> tuple[int, int]:
        conns = [await RespConnection.open(port) for _ in range(PRODUCER_CONNECTIONS)]
        in_flight: set[asyncio.Future] = set()
        offered = behind = 0
        start = time.perf_counter()
        while (now := time.perf_counter()) - start < seconds:
            due = int((now - start) * rate) - offered
            for _ in range(due):
                if len(in_flight) >= MAX_IN_FLIGHT:
                    behind += 1                        # not offered: we fell behind
                    offered += 1
                    continue
                conn = conns[offered % PRODUCER_CONNECTIONS]
                future = conn.send_raw(encode_command("ADDJOB", QUEUE, body_now(), "5000"), 1)[0]
                in_flight.add(future)
                future.add_done_callback(in_flight.discard)
                offered += 1
            await asyncio.sleep(PACE_TICK_S)
        if in_flight:
            await asyncio.gather(*in_flight)
        for conn in conns:
            conn.close()
        return offered - behind, behind
    return produce


def percentile(sorted_values: list[float], p: float) -> float:
    if not sorted_values:
        return float("nan")
    index = min(int(round(p / 100 * (len(sorted_values) - 1))), len(sorted_values) - 1)
    return sorted_values[index]


def report_row(name: str, r: dict) -> list:
    lat = r["latencies"]
    per_job = lambda total, idle: (total - idle) / r["delivered"] if r["delivered"] else 0.0
    return [name, r["offered"], r["behind"], r["delivered"], r["delivered"] / r["duration"],
            ms(percentile(lat, 50)), ms(percentile(lat, 99)), ms(lat[-1]) if lat else 0.0,
            r["sent"], r["idle_sent"], per_job(r["sent"], r["idle_sent"]),
            per_job(r["received"], r["idle_received"])]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="4 slow samples, 3 s of load")
    parser.add_argument("--samples", type=int, help="slow phase samples (default 12)")
    parser.add_argument("--rate", type=float, default=5000.0, help="offered jobs/s (5,000)")
    parser.add_argument("--seconds", type=float, help="load phase length (default 10 s)")
    parser.add_argument("--no-pin", action="store_true",
                        help="do not pin the servers and the load to separate CPUs")
    args = parser.parse_args(argv)
    samples = args.samples or (4 if args.quick else 12)
    seconds = args.seconds or (3.0 if args.quick else 10.0)
    pinning = Pinning(not args.no_pin)
    pinning.pin_this_process()
    print_header("bench_federation: ADDJOB on A -> GETJOB on B", pinning)
    servers = start_cluster(pinning, NODES, "bench-federation-", MESH_TIMEOUT_S)
    try:
        async def both() -> tuple[dict, dict]:
            slow = await phase(servers, slow_producer(samples), 30.0, 1, 1)
            load = await phase(servers, paced_producer(args.rate, seconds), DRAIN_TIMEOUT_S,
                               CONSUMER_CONNECTIONS, 100)
            return slow, load
        slow, load = run_async(both())
    finally:
        for server in servers:
            server.stop()
    print_commands([s.command_line() for s in servers] + [
        f"CLUSTER MEET {HOST} <port of node1/node2>  (on node0)",
        f"slow: ADDJOB {QUEUE} '<ts> <64 x>' 5000 on node0 every {SLOW_PERIOD_S:g} s x {samples}"
        f"; 1 connection on node1: GETJOB TIMEOUT 200 COUNT 1 FROM {QUEUE}, ACKJOB",
        f"load: ADDJOB {QUEUE} '<ts> <64 x>' 5000 on node0 at {args.rate:,.0f}/s for "
        f"{seconds:g} s over {PRODUCER_CONNECTIONS} connections (<= {MAX_IN_FLIGHT} in flight)"
        f"; {CONSUMER_CONNECTIONS} connections on node1: GETJOB TIMEOUT 200 COUNT 100 FROM "
        f"{QUEUE}, ACKJOB <ids>"])
    print_table(["phase", "sent", "skipped", "delivered", "jobs/s", "p50 ms", "p99 ms",
                 "max ms", "bus sent", "idle sent", "msgs/job sent", "msgs/job recv"],
                [report_row(f"1 job / {SLOW_PERIOD_S:g} s", slow),
                 report_row(f"{args.rate:,.0f} jobs/s", load)], title="results")
    print("sent: ADDJOBs sent; skipped: ADDJOBs due while 2,000 were in flight (the offered "
          "load the cluster did not absorb); jobs/s: delivered / phase length")
    for name, r in (("slow", slow), ("load", load)):
        if r["delivered"] < r["offered"]:
            print(f"WARNING: {name}: {r['offered'] - r['delivered']} jobs never delivered")
    print(f"\nlatency samples (slow, ms): "
          f"{', '.join(f'{ms(x):.1f}' for x in slow['latencies'])}")
    print(f"phase length incl. drain and GC (s): slow {slow['duration']:.1f}, "
          f"load {load['duration']:.1f}; median slow latency "
          f"{ms(statistics.median(slow['latencies'])) if slow['latencies'] else 0:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
