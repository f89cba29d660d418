"""The delaying TCP relay behind the `netem` fault's slow links, and its handle.

The kernel here has no `sch_netem`, so delay and jitter are made in user
space. One relay runs inside each node's network namespace (`python -m
disque_py.tools.chaos.relay`, started by RelayProcess with `ip netns exec`);
an nftables rule there (nft_rules.py: redirect_table) sends the node's
outgoing connections to the other nodes' bus ports to it instead. For each
such connection it reads where the node meant to go (SO_ORIGINAL_DST),
connects there itself from the node's own address, with RELAY_MARK on its
socket so that the redirect lets it through, and copies the bytes both ways,
holding each chunk for the delay set for that peer (plus a jitter drawn per
chunk) without ever reordering a stream. Peers see the node's address, as
without the relay, and every packet of the relayed leg still crosses the
bridge, so partitions, loss and resets apply to it as to a direct link.

The checker sets a peer's delay by writing `delay ADDRESS MS JITTER_MS` lines
to the relay's stdin (`delay ADDRESS 0 0` clears it); the relay prints
`listening PORT` once it accepts, and exits when its stdin closes, so it
never outlives the checker. Only this module's standard-library imports run
in the namespace.
"""

from __future__ import annotations

import asyncio
import os
import random
import select
import signal
import socket
import struct
import subprocess
import sys
from pathlib import Path

RELAY_MARK = 0x6471          # "dq": the relay's own connections, which the redirect skips
SO_ORIGINAL_DST = 80         # linux/netfilter_ipv4.h
CHUNK = 65536
CONNECT_TIMEOUT_S = 2.0      # the bus's own connect timeout
READY_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 5.0
LISTENING = "listening"


# ------------------------------------------------------------------ the relay

class Relay:
    """Accepts redirected connections and copies them on with each peer's delay."""

    def __init__(self, mark: int, seed: int) -> None:
        self.mark = mark
        self.rng = random.Random(seed)
        self.delays: dict[str, tuple[float, float]] = {}    # peer -> (delay s, jitter s)

    def hold_for(self, peer: str) -> float:
        delay, jitter = self.delays.get(peer, (0.0, 0.0))
        return max(delay + self.rng.uniform(-jitter, jitter), 0.0)

    def command(self, line: str) -> None:
        words = line.split()
        if len(words) == 4 and words[0] == "delay":
            self.delays[words[1]] = (int(words[2]) / 1000, int(words[3]) / 1000)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            peer, port = original_destination(writer.get_extra_info("socket"))
            await asyncio.sleep(self.hold_for(peer))        # the SYN crosses the slow link too
            upstream = await self._connect(peer, port)
        except (OSError, asyncio.TimeoutError):
            writer.close()
            return
        up_reader, up_writer = upstream
        copies = [asyncio.ensure_future(self._copy(reader, up_writer, peer)),
                  asyncio.ensure_future(self._copy(up_reader, writer, peer))]
        try:
            await asyncio.wait(copies, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in copies:
                task.cancel()
            writer.close()
            up_writer.close()

    async def _connect(self, peer: str, port: int):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_MARK, self.mark)
        sock.setblocking(False)
        try:
            await asyncio.wait_for(asyncio.get_running_loop().sock_connect(sock, (peer, port)),
                                   CONNECT_TIMEOUT_S)
        except BaseException:
            sock.close()
            raise
        return await asyncio.open_connection(sock=sock)

    async def _copy(self, reader, writer, peer: str) -> None:
        """Bytes from reader to writer, each chunk released `hold_for(peer)`
        after it came, and never before the chunk ahead of it."""
        loop = asyncio.get_running_loop()
        pending: asyncio.Queue = asyncio.Queue()
        sender = asyncio.ensure_future(self._send(pending, writer))
        release = 0.0
        try:
            while not sender.done() and (data := await reader.read(CHUNK)):
                release = max(release, loop.time() + self.hold_for(peer))
                pending.put_nowait((release, data))
            pending.put_nowait((release, b""))
            await sender
        except OSError:
            pass
        finally:
            sender.cancel()

    @staticmethod
    async def _send(pending: asyncio.Queue, writer) -> None:
        """Writes what `pending` holds when due, until b"" or a broken socket."""
        loop = asyncio.get_running_loop()
        try:
            while data := await _due(pending, loop):
                writer.write(data)
                await writer.drain()
        except OSError:
            pass


async def _due(pending: asyncio.Queue, loop) -> bytes:
    release, data = await pending.get()
    if release > loop.time():
        await asyncio.sleep(release - loop.time())
    return data


def original_destination(sock: socket.socket) -> tuple[str, int]:
    """Where a redirected connection was going (struct sockaddr_in)."""
    raw = sock.getsockopt(socket.SOL_IP, SO_ORIGINAL_DST, 16)
    port, address = struct.unpack("!2xH4s8x", raw)
    return socket.inet_ntoa(address), port


async def main(mark: int, seed: int) -> None:
    relay = Relay(mark, seed)
    server = await asyncio.start_server(relay.serve, "127.0.0.1", 0)
    print(LISTENING, server.sockets[0].getsockname()[1], flush=True)
    loop = asyncio.get_running_loop()
    commands = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(commands), sys.stdin)
    while line := await commands.readline():       # EOF: the checker is gone
        relay.command(line.decode())
    server.close()


# ------------------------------------------------------------------ the handle

class RelayProcess:
    """One relay running in a namespace, as the checker sees it."""

    def __init__(self, namespace: str, log_path: Path, seed: int) -> None:
        self.namespace = namespace
        self.log_path = log_path
        self.seed = seed
        self.proc: subprocess.Popen | None = None
        self.port = 0

    def start(self) -> None:
        """Start it and wait until it listens; RuntimeError if it does not."""
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                ["ip", "netns", "exec", self.namespace, sys.executable, "-m", __name__,
                 str(RELAY_MARK), str(self.seed), self.namespace],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                start_new_session=True, text=True)
        ready, _, _ = select.select([self.proc.stdout], [], [], READY_TIMEOUT_S)
        words = self.proc.stdout.readline().split() if ready else []
        if len(words) != 2 or words[0] != LISTENING:
            raise RuntimeError(f"the delaying relay in {self.namespace} did not start "
                               f"(see {self.log_path})")
        self.port = int(words[1])

    def set_delay(self, peer: str, delay_ms: int, jitter_ms: int) -> None:
        self.proc.stdin.write(f"delay {peer} {delay_ms} {jitter_ms}\n")
        self.proc.stdin.flush()

    def stop(self) -> None:
        """Close its stdin (it exits); SIGKILL by PID if it lingers."""
        if self.proc is None:
            return
        try:
            self.proc.stdin.close()
            self.proc.wait(STOP_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired):
            if self.proc.poll() is None:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.proc.stdout.close()


if __name__ == "__main__":        # MARK SEED NAMESPACE (the last only names it in ps)
    asyncio.run(main(int(sys.argv[1]), int(sys.argv[2])))
