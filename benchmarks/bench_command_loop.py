"""What the per-connection command loop costs per command, in process.

    python benchmarks/bench_command_loop.py [--rounds N] [--commands N] [--logging]

No sockets and no event loop: a ClientConnection is given a fake transport
and fed whole RESP requests through data_received, as asyncio would feed
it. It reports nanoseconds per command (the median of the rounds; rounds
alternate between the cases so that a busy machine slows all alike) for

  PING x1      one PING per read (a client waiting for each reply)
  PING x100    100 pipelined PINGs per read
  ADDJOB x1    one ADDJOB per read (a job kept in memory each time)
  ADDJOB x100  100 pipelined ADDJOBs per read

each with the slow log and latency monitor idle (slowlog-log-slower-than
10000, the default, and latency-monitor-threshold 0) and, with --logging,
also with slowlog-log-slower-than 0 (every command logged).

Run it on two checkouts (PYTHONPATH=<checkout>) to compare the loop's cost
before and after a change; it only uses what every version has.
"""

from __future__ import annotations

import argparse
import statistics
import time

from disque_py.config import Config
from disque_py.node.node import Node
from disque_py.server.protocol import ClientConnection
from disque_py.server.state import ServerState

NODE_ID = b"9bfa56e329abf3577408e45419d642cac8154459"


def encode(*args: bytes) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for arg in args:
        out.append(b"$%d\r\n%b\r\n" % (len(arg), arg))
    return b"".join(out)


class FakeTransport:
    def __init__(self) -> None:
        self.written = 0

    def write(self, data: bytes) -> None:
        self.written += len(data)

    def close(self) -> None:
        pass


class FakeRuntime:
    class persistence:
        writer = None

    def __init__(self, server) -> None:
        self.server = server

    def after_commands(self) -> None:
        node = self.server.node
        if node.effects:
            node.take_effects()


def connection(slower_than: bytes) -> ClientConnection:
    config = Config()
    config.set(b"slowlog-log-slower-than", slower_than)
    server = ServerState(Node(NODE_ID), config)
    conn = ClientConnection(FakeRuntime(server))
    conn.transport = FakeTransport()
    conn.session = server.new_session("127.0.0.1:1", "127.0.0.1:7711", -1, conn)
    return conn


CASES = {
    "PING x1": (encode(b"PING"), 1),
    "PING x100": (encode(b"PING") * 100, 100),
    "ADDJOB x1": (encode(b"ADDJOB", b"q", b"x" * 100, b"0"), 1),
    "ADDJOB x100": (encode(b"ADDJOB", b"q", b"x" * 100, b"0") * 100, 100),
}


def one_round(conn: ClientConnection, payload: bytes, per_read: int, commands: int) -> float:
    """ns per command over `commands` commands; the jobs are dropped after."""
    feed = conn.data_received
    reads = max(commands // per_read, 1)
    started = time.perf_counter_ns()
    for _ in range(reads):
        feed(payload)
    elapsed = time.perf_counter_ns() - started
    conn.server.node.flush_all()
    return elapsed / (reads * per_read)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--commands", type=int, default=20000, help="per case and round")
    parser.add_argument("--logging", action="store_true",
                        help="also measure with slowlog-log-slower-than 0")
    args = parser.parse_args()
    settings = [b"10000"] + ([b"0"] if args.logging else [])
    results: dict[tuple[str, bytes], list[float]] = {}
    conns = {(name, s): connection(s) for name in CASES for s in settings}
    for _ in range(args.rounds):
        for (name, setting), conn in conns.items():
            payload, per_read = CASES[name]
            results.setdefault((name, setting), []).append(
                one_round(conn, payload, per_read, args.commands))
    print(f"{'case':<14}{'slowlog-log-slower-than':>25}{'ns/command (median)':>22}"
          f"{'min':>8}")
    for (name, setting), samples in results.items():
        print(f"{name:<14}{setting.decode():>25}{statistics.median(samples):>22.0f}"
              f"{min(samples):>8.0f}")


if __name__ == "__main__":
    main()
