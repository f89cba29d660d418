"""The cluster bus transport: the only cluster code that touches sockets.

Listens on the client port + 10000 and opens one outgoing link per known
node when membership asks for it (Connect effects). Each link cuts its byte
stream into length-prefixed frames and decodes them with messages.py; a
frame that does not decode closes that link, is logged, and is never
applied. Decoded messages go to the runtime, which hands them to
membership or to the job core and carries out what they answer.

Writes are coalesced: frames sent to one link within one event-loop turn
go out in a single write. The cluster service, which already batches the
job messages of a turn, hands its frames over with send_now: they are
written at once (behind any frames still queued, keeping the order), not
one more loop turn later.
"""

from __future__ import annotations

import asyncio
import time

from disque_py import log
from disque_py.cluster import messages as msg

CONNECT_TIMEOUT_S = 2.0
LINK_HIGH_WATER = 64 * 1024 * 1024


class BusLink(asyncio.Protocol):
    """One bus connection. `node` is set for links we opened, None for inbound."""

    def __init__(self, bus: "ClusterBus", node=None) -> None:
        self.bus = bus
        self.node = node
        self.transport = None
        self.peer_ip = ""
        self.local_ip = ""
        self._buffer = bytearray()
        self._needed = 0             # payload length of the frame being read
        self._pending: list[bytes] = []
        self.closed = False
        self.generation = 0
        self.last_data = time.monotonic()

    def connection_made(self, transport) -> None:
        self.transport = transport
        transport.set_write_buffer_limits(LINK_HIGH_WATER)
        peer = transport.get_extra_info("peername")
        local = transport.get_extra_info("sockname")
        self.peer_ip = peer[0] if isinstance(peer, tuple) else ""
        self.local_ip = local[0] if isinstance(local, tuple) else ""
        if self.node is None:
            self.bus.inbound.add(self)

    def data_received(self, data: bytes) -> None:
        self.last_data = time.monotonic()
        buffer = self._buffer
        buffer += data
        try:
            while not self.closed:
                if not self._needed:
                    if len(buffer) < msg.LENGTH.size:
                        return
                    self._needed = msg.frame_length(bytes(buffer[:msg.LENGTH.size]))
                end = msg.LENGTH.size + self._needed
                if len(buffer) < end:
                    return
                header, body = msg.decode(memoryview(buffer)[msg.LENGTH.size:end])
                del buffer[:end]
                self._needed = 0
                self.bus.deliver(self, header, body)
        except msg.BadFrame as error:
            log.warning("Closing cluster bus link with %s: bad frame: %s", self.peer_ip, error)
            self.close()

    def send(self, frame: bytes) -> None:
        if self.closed:
            return
        if not self._pending:
            self.bus.loop.call_soon(self._flush)
        self._pending.append(frame)

    def send_now(self, frames: list[bytes]) -> None:
        if self.closed:
            return
        pending = self._pending
        if pending:
            frames = pending + frames
            pending.clear()          # the _flush already scheduled finds nothing
        self.transport.write(b"".join(frames))

    def _flush(self) -> None:
        if not self.closed and self._pending:
            self.transport.write(b"".join(self._pending))
        self._pending.clear()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            if self.transport is not None:
                self.transport.close()

    def connection_lost(self, exc) -> None:
        self.closed = True
        self.bus.lost(self)


class ClusterBus:
    def __init__(self, runtime) -> None:
        self.runtime = runtime
        self.loop = None
        self.servers: list = []
        self.links: dict = {}          # ClusterNode -> our BusLink to it
        self.inbound: set[BusLink] = set()

    async def listen(self, hosts: list[str | None], port: int) -> None:
        self.loop = asyncio.get_running_loop()
        for host in hosts:
            server = await self.loop.create_server(lambda: BusLink(self), host=host, port=port,
                                                   reuse_address=True)
            self.servers.append(server)

    def connect(self, node, ip: str, port: int, generation: int) -> None:
        self.loop.create_task(self._connect(node, ip, port, generation))

    async def _connect(self, node, ip: str, port: int, generation: int) -> None:
        try:
            _, link = await asyncio.wait_for(
                self.loop.create_connection(lambda: BusLink(self, node), ip, port),
                CONNECT_TIMEOUT_S)
        except (OSError, asyncio.TimeoutError):
            self.runtime.on_link_failed(node, generation)
            return
        if not self.runtime.wants_link(node, generation):
            link.node = None          # stale: for a forgotten node or an old address
            link.close()
            return
        old = self.links.get(node)
        if old is not None:
            old.close()
        link.generation = generation
        self.links[node] = link
        self.runtime.on_link_up(node)

    def send(self, node, frame: bytes) -> bool:
        link = self.links.get(node)
        if link is None or link.closed:
            return False
        link.send(frame)
        return True

    def send_now(self, node, frames: list[bytes]) -> bool:
        link = self.links.get(node)
        if link is None or link.closed:
            return False
        link.send_now(frames)
        return True

    def drop(self, node) -> None:
        link = self.links.pop(node, None)
        if link is not None:
            link.close()

    def deliver(self, link: BusLink, header, body) -> None:
        self.runtime.on_bus_message(link, header, body)

    def lost(self, link: BusLink) -> None:
        self.inbound.discard(link)
        node = link.node
        if node is not None and self.links.get(node) is link:
            del self.links[node]
            self.runtime.on_link_failed(node, link.generation)

    def close_idle_inbound(self, idle_s: float) -> None:
        """Inbound links carry the peer's PINGs; one silent this long is dead."""
        limit = time.monotonic() - idle_s
        for link in list(self.inbound):
            if link.last_data < limit:
                log.verbose("Closing idle cluster bus link from %s", link.peer_ip)
                link.close()

    def close(self) -> None:
        for server in self.servers:
            server.close()
        for link in list(self.links.values()) + list(self.inbound):
            link.close()
