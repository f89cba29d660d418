"""Throughput and memory of disque-py, next to redis-server as a yardstick.

    python benchmarks/bench_server.py [--quick] [--rounds N] [--no-pin] [--json FILE]

Each round runs every throughput test against redis-server and disque-py
one after the other (the order alternates between rounds, so a machine that
gets busier or quieter during the run does not favour either):

  a) PING            redis-benchmark -t ping_mbulk, 50 connections
  b) ADDJOB          redis-benchmark ADDJOB q <100 bytes> 0, 50 connections,
                     against LPUSH q <100 bytes> on redis-server
  c) ADDJOB -P 16    the same, 16 commands pipelined per connection
  d) cycles          our loader: each connection loops ADDJOB q_i, GETJOB
                     FROM q_i, ACKJOB <the id it got>, with 1, 10 and 50
                     connections; against redis-server the same loop shape
                     is LPUSH q_i, RPOP q_i, DEL <the value it got>: three
                     dependent round trips, an approximation only (Redis
                     keeps no job state, no ack, no ID)

Then, once, on fresh processes:

  e) memory          1,000,000 ADDJOBs of 100-byte bodies in one queue
                     (pipelined), then VmRSS and INFO memory; against
                     redis-server holding the same values in one list

The report is the median over rounds of each rate, and the median of the
per-round ratios disque-py / redis-server (paired, so noise common to both
cancels). Nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import hiredis

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (BODY, BODY_SIZE, MB, CpuMeter, DisqueServer, Pinning, RedisServer,  # noqa: E402
                    encode_command, info, median, ordered, pipelined_fill,
                    print_commands, print_header, print_table, ratio, redis_benchmark_command,
                    require_tools, run_async, run_redis_benchmark, scratch_dir, start_pair,
                    stop_all, vm_rss_bytes, command)

CONNECTIONS = 50
PIPELINE = 16
CYCLE_CONCURRENCY = (1, 10, 50)
SETTLE_AFTER_FLUSH_S = 0.5   # our server frees flushed jobs in slices, a few per tick
BODY_TEXT = BODY.decode()


@dataclass
class Settings:
    rounds: int
    ping_requests: int
    addjob_requests: int
    pipelined_requests: int
    cycle_warmup_s: float
    cycle_seconds: float
    memory_jobs: int

    @classmethod
    def for_mode(cls, quick: bool, rounds: int | None) -> "Settings":
        if quick:
            return cls(rounds or 1, 50_000, 20_000, 100_000, 0.3, 1.5, 200_000)
        return cls(rounds or 3, 200_000, 100_000, 500_000, 1.0, 5.0, 1_000_000)


@dataclass
class Results:
    """rates[test][server label] -> one value per round; cpu likewise."""

    rates: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    cpu: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    client_cpu: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    commands: dict[str, dict[str, str]] = field(default_factory=dict)
    memory: list[dict] = field(default_factory=list)

    def add(self, test: str, label: str, rate: float, cpu: float,
            client_cpu: float | None = None) -> None:
        self.rates.setdefault(test, {}).setdefault(label, []).append(rate)
        self.cpu.setdefault(test, {}).setdefault(label, []).append(cpu)
        if client_cpu is not None:
            self.client_cpu.setdefault(test, {}).setdefault(label, []).append(client_cpu)


# ------------------------------------------------------------- a), b), c)

def benchmark_tests(settings: Settings) -> list[tuple[str, dict[str, dict]]]:
    """(test name, {server label: redis-benchmark arguments})."""
    addjob = ["ADDJOB", "q", BODY_TEXT, "0"]
    lpush = ["LPUSH", "q", BODY_TEXT]
    return [
        ("a) PING (ping_mbulk)", {
            "redis-server": dict(requests=settings.ping_requests, tests="ping_mbulk"),
            "disque-py": dict(requests=settings.ping_requests, tests="ping_mbulk")}),
        ("b) ADDJOB vs LPUSH", {
            "redis-server": dict(requests=settings.addjob_requests, command_args=lpush),
            "disque-py": dict(requests=settings.addjob_requests, command_args=addjob)}),
        (f"c) ADDJOB vs LPUSH -P {PIPELINE}", {
            "redis-server": dict(requests=settings.pipelined_requests, command_args=lpush,
                                 pipeline=PIPELINE),
            "disque-py": dict(requests=settings.pipelined_requests, command_args=addjob,
                              pipeline=PIPELINE)}),
    ]


def run_benchmark_test(name: str, per_server: dict, server, results: Results) -> None:
    cmd = redis_benchmark_command(server.port, clients=CONNECTIONS, **per_server[server.label])
    rps, cpu, loader = run_redis_benchmark(cmd, server.pid)
    results.add(name, server.label, rps, cpu, loader)
    shown = [part if len(part) < 40 else f"<{len(part)}-byte body>" for part in cmd]
    results.commands.setdefault(name, {})[server.label] = shlex.join(shown)


# ------------------------------------------------------------------------ d)

class CycleShape:
    """One cycle: push a job, pop it back, acknowledge what was popped."""

    def __init__(self, push: bytes, pop: bytes, ack_of) -> None:
        self.push, self.pop, self.ack_of = push, pop, ack_of


def disque_shape(queue: str) -> CycleShape:
    def ack_of(reply):
        # GETJOB replies [[queue, id, body]]; a nil (no job yet) means ask again.
        return encode_command(b"ACKJOB", reply[0][1]) if reply else None
    return CycleShape(encode_command("ADDJOB", queue, BODY, "0"),
                      encode_command("GETJOB", "FROM", queue), ack_of)


def redis_shape(queue: str) -> CycleShape:
    def ack_of(reply):
        return encode_command(b"DEL", reply) if reply is not None else None
    return CycleShape(encode_command("LPUSH", queue, BODY), encode_command("RPOP", queue), ack_of)


class CycleClient(asyncio.Protocol):
    """A connection looping push -> pop -> ack, each step sent on the previous reply."""

    PUSH, POP, ACK = range(3)

    def __init__(self, shape: CycleShape) -> None:
        self.shape = shape
        self.reader = hiredis.Reader()
        self.step = self.PUSH
        self.cycles = 0
        self.running = False
        self.error: str | None = None
        self.transport = None

    def connection_made(self, transport) -> None:
        self.transport = transport

    def begin(self) -> None:
        self.running = True
        self.transport.write(self.shape.push)

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        while (reply := self.reader.gets()) is not False:
            if isinstance(reply, hiredis.ReplyError):
                self.error = str(reply)
                self.running = False
                return
            if not self.running:
                return
            if self.step == self.PUSH:
                self.step = self.POP
                self.transport.write(self.shape.pop)
            elif self.step == self.POP:
                ack = self.shape.ack_of(reply)
                if ack is None:
                    self.transport.write(self.shape.pop)
                else:
                    self.step = self.ACK
                    self.transport.write(ack)
            else:
                self.cycles += 1
                self.step = self.PUSH
                self.transport.write(self.shape.push)

    def connection_lost(self, exc) -> None:
        if self.running:
            self.error = f"connection lost: {exc}"
        self.running = False


async def measure_cycles(port: int, server_pid: int, shape_for, connections: int,
                         warmup_s: float, seconds: float) -> tuple[float, float, float]:
    """Cycles per second over `seconds` after `warmup_s`; plus server and loader CPU %."""
    loop = asyncio.get_running_loop()
    clients = []
    for i in range(connections):
        _, client = await loop.create_connection(
            lambda i=i: CycleClient(shape_for(f"bench-cycle-{i}")), "127.0.0.1", port)
        clients.append(client)
    for client in clients:
        client.begin()
    await asyncio.sleep(warmup_s)
    before = sum(c.cycles for c in clients)
    server_cpu = CpuMeter(server_pid)
    loader_cpu0, wall0 = time.process_time(), time.perf_counter()
    await asyncio.sleep(seconds)
    after = sum(c.cycles for c in clients)
    wall = time.perf_counter() - wall0
    loader_cpu = 100.0 * (time.process_time() - loader_cpu0) / wall
    server_percent = server_cpu.percent()
    for client in clients:
        client.running = False
        client.transport.close()
    errors = [c.error for c in clients if c.error]
    if errors:
        raise RuntimeError(f"cycle load failed on {len(errors)} connection(s): {errors[0]}")
    return (after - before) / wall, server_percent, loader_cpu


def run_cycle_test(connections: int, server, settings: Settings, results: Results) -> None:
    shape_for = disque_shape if server.label == "disque-py" else redis_shape
    rate, cpu, loader = run_async(measure_cycles(server.port, server.pid, shape_for, connections,
                                                 settings.cycle_warmup_s, settings.cycle_seconds))
    results.add(f"d) cycle x{connections} conn", server.label, rate, cpu, loader)


# ------------------------------------------------------------------------ e)

def measure_memory(pinning: Pinning, jobs: int) -> list[dict]:
    """Fill a fresh server of each kind with `jobs` 100-byte values; read its memory."""
    rows = []
    for make, payload in ((lambda d: RedisServer(d, pinning),
                           encode_command("LPUSH", "q", BODY)),
                          (lambda d: DisqueServer(d, pinning),
                           encode_command("ADDJOB", "q", BODY, "0"))):
        server = make(scratch_dir("bench-memory-"))
        server.start()
        try:
            time.sleep(0.2)
            rss_before = vm_rss_bytes(server.pid)
            elapsed, errors = run_async(pipelined_fill(server.port, payload, jobs))
            time.sleep(0.5)
            length = command(server.port, "LLEN" if server.label == "redis-server" else "QLEN",
                             "q")
            rss_after = vm_rss_bytes(server.pid)
            memory_info = info(server.port, "memory")
            rows.append(dict(server=server.label, jobs=jobs, stored=length, errors=errors,
                             fill_seconds=elapsed, rss_before=rss_before, rss_after=rss_after,
                             used_memory=int(memory_info.get("used_memory", 0)),
                             used_memory_dataset=memory_info.get("used_memory_dataset"),
                             command=shlex.join(server.command_line())))
        finally:
            server.stop()
    return rows


def print_memory(rows: list[dict]) -> None:
    table = []
    by_label = {row["server"]: row for row in rows}
    for row in rows:
        grown = row["rss_after"] - row["rss_before"]
        table.append([row["server"], row["stored"], row["errors"], f"{row['fill_seconds']:.1f}s",
                      row["rss_before"] / MB, row["rss_after"] / MB, row["used_memory"] / MB,
                      grown / max(row["stored"], 1)])
    print_table(["server", "stored", "errors", "fill", "RSS before MB", "RSS after MB",
                 "INFO used_memory MB", "bytes/job (RSS growth)"], table,
                title=f"e) memory: {rows[0]['jobs']:,} x {BODY_SIZE}-byte bodies in one queue/list")
    if "redis-server" in by_label and "disque-py" in by_label:
        ours, theirs = by_label["disque-py"], by_label["redis-server"]
        ratio_growth = ratio(ours["rss_after"] - ours["rss_before"],
                             theirs["rss_after"] - theirs["rss_before"])
        print(f"RSS growth ratio disque-py / redis-server: {ratio_growth:.2f}x")
        if ours.get("used_memory_dataset") is not None:
            print(f"disque-py INFO used_memory_dataset (the maxmemory policy's estimate): "
                  f"{int(ours['used_memory_dataset']) / MB:.1f} MB")


# ----------------------------------------------------------------------- report

def print_summary(results: Results) -> None:
    rows = []
    for test, per_label in results.rates.items():
        theirs, ours = per_label.get("redis-server", []), per_label.get("disque-py", [])
        per_round = [ratio(o, t) for o, t in zip(ours, theirs)]
        cpu = results.cpu[test]
        loader = results.client_cpu.get(test, {})
        rows.append([test, median(theirs), median(ours), f"{median(per_round):.2f}x",
                     f"{min(per_round):.2f}-{max(per_round):.2f}",
                     f"{median(cpu['redis-server']):.0f}% / {median(cpu['disque-py']):.0f}%",
                     (f"{median(loader['redis-server']):.0f}% / {median(loader['disque-py']):.0f}%"
                      if loader else "")])
    print_table(["test", "redis-server /s", "disque-py /s", "ratio", "ratio range",
                 "server CPU r/d", "loader CPU r/d"], rows,
                title="summary: medians over rounds; ratio = median of per-round "
                      "disque-py / redis-server")


def print_rounds(results: Results) -> None:
    rows = []
    for test, per_label in results.rates.items():
        for label, values in per_label.items():
            rows.append([test, label, *values])
    rounds = max(len(v) for p in results.rates.values() for v in p.values())
    print_table(["test", "server", *(f"round {i + 1}" for i in range(rounds))], rows,
                title="per round (requests or cycles per second)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small counts: under a minute")
    parser.add_argument("--rounds", type=int, help="rounds (default 3, 1 with --quick)")
    parser.add_argument("--no-pin", action="store_true",
                        help="do not pin servers and load generators to separate CPUs")
    parser.add_argument("--skip-memory", action="store_true", help="skip test e)")
    parser.add_argument("--memory-jobs", type=int,
                        help="jobs for test e) (default 1,000,000; 200,000 with --quick)")
    parser.add_argument("--json", type=Path, help="also write the raw results here")
    args = parser.parse_args(argv)
    require_tools()
    settings = Settings.for_mode(args.quick, args.rounds)
    if args.memory_jobs:
        settings.memory_jobs = args.memory_jobs
    pinning = Pinning(not args.no_pin)
    pinning.pin_this_process()
    print_header("bench_server: disque-py vs redis-server (yardstick)", pinning)
    print(f"settings: {settings}")
    started = time.perf_counter()
    results = Results()
    servers = start_pair(pinning, scratch_dir("bench-server-"))
    try:
        print_commands([s.command_line() for s in servers])
        for round_index in range(settings.rounds):
            run_round(round_index, servers, settings, results)
    finally:
        stop_all(servers)
    print_commands(f"[{label}] {cmd}" for per in results.commands.values()
                   for label, cmd in per.items())
    print("  [both] benchmarks/bench_server.py loader: per connection ADDJOB q_i <body> 0 / "
          "GETJOB FROM q_i / ACKJOB <id>;  yardstick LPUSH q_i <body> / RPOP q_i / DEL <value>")
    print_rounds(results)
    print_summary(results)
    if not args.skip_memory:
        results.memory = measure_memory(pinning, settings.memory_jobs)
        print_commands(f"[{row['server']}] {row['command']}" for row in results.memory)
        print_memory(results.memory)
    print(f"\ntotal time {time.perf_counter() - started:.0f}s; load average now "
          + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    if args.json:
        args.json.write_text(json.dumps(dict(settings=settings.__dict__, rates=results.rates,
                                             server_cpu=results.cpu,
                                             loader_cpu=results.client_cpu,
                                             commands=results.commands,
                                             memory=results.memory), indent=2))
    return 0


def run_round(round_index: int, servers, settings: Settings, results: Results) -> None:
    print(f"\nround {round_index + 1}/{settings.rounds} ...", flush=True)
    for name, per_server in benchmark_tests(settings):
        for server in ordered(round_index, servers):
            flush(server)
            run_benchmark_test(name, per_server, server, results)
    for connections in CYCLE_CONCURRENCY:
        for server in ordered(round_index, servers):
            flush(server)
            run_cycle_test(connections, server, settings, results)
    for test, per_label in results.rates.items():
        last = {label: values[-1] for label, values in per_label.items()}
        print(f"  {test:28} redis-server {last['redis-server']:>10,.0f}/s   "
              f"disque-py {last['disque-py']:>10,.0f}/s   "
              f"ratio {ratio(last['disque-py'], last['redis-server']):.2f}x", flush=True)


def flush(server) -> None:
    server.flush()
    time.sleep(SETTLE_AFTER_FLUSH_S)


if __name__ == "__main__":
    sys.exit(main())
