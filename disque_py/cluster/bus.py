"""The cluster bus transport: the only cluster code that touches sockets.

Listens on the client port + 10000 and opens one outgoing link per known
node when membership asks for it (Connect effects); with `tls-cluster yes`
both run over mutual TLS (server/tls.py makes the contexts). Each link
cuts its byte stream into length-prefixed frames and decodes them with
formats/bus.py; a frame that does not decode closes that link, is logged, and
is never applied. Decoded messages go to the cluster service, which hands them to
membership or to the node and carries out what they answer.

What a link may do before anyone vouches for it is bounded:
  * with `cluster-secret` set, a link first runs auth.py's handshake: a
    link we opened is reported up only once the peer proved the secret, and
    on a link a peer opened no frame is acted on until it proved it; that
    link is then bound to the peer's node ID: a frame claiming another
    sender is dropped and counted. In `accept` mode (a rolling upgrade's
    window) links that do not authenticate are served too;
  * a frame claiming this node's own ID is dropped and counted, always;
  * until a link has authenticated (or, with no secret, delivered its first
    heartbeat), its frames may not exceed a small size, and such links are
    capped in number and in age: a stranger cannot make a node buffer a
    600 MB half frame, nor hold many links open.

Traffic is counted per peer (frames and bytes of bus messages, each way;
handshake frames not counted): a link we opened counts for its node, one
a peer opened for the sender of its messages. /metrics reads the counters
of the nodes still known (traffic_of); those of forgotten nodes go then.

Input: the compiled LinkBase (engine/net/link.pxi) cuts the byte stream
into frames and applies the data plane's REPLJOB and GOTJOB frames in C
once the link is trusted; every other frame comes to on_frame here.

Writes are coalesced: frames sent to one link within one event-loop turn
go out in a single write. The job messages of a turn come already
encoded, one buffer per peer (the node's BusOutbox), through
write_frames: written at once (behind any frames still queued, keeping
the order), not one more loop turn later.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol

from disque_py.base import log
from disque_py.cluster import auth
from disque_py.engine import LinkBase
from disque_py.formats import bus as msg

CONNECT_TIMEOUT_S = 2.0
LINK_HIGH_WATER = 64 * 1024 * 1024
UNTRUSTED_MAX_FRAME = 1024 * 1024     # a heartbeat with the most gossip is ~100 KB
MAX_UNTRUSTED_INBOUND = 32            # inbound links not yet vouched for, at once
UNTRUSTED_MAX_AGE_S = 5.0             # ... and how long one may stay so
HEARTBEATS = (msg.PING, msg.PONG, msg.MEET)
STAT_NAMES = ("auth_failures", "frames_refused", "links_refused", "frames_too_large")
# A peer's traffic counters: [frames received, bytes received, frames sent, bytes sent].
RECEIVED, SENT = 0, 2


class BusLink(LinkBase, asyncio.Protocol):
    """One bus connection. `node` is set for links we opened, None for
    inbound. LinkBase (engine/net/link.pxi) splits the frames and takes
    the data plane's in C; every other frame comes to on_frame."""

    def __init__(self, bus: "ClusterBus", node=None) -> None:
        self.bus = bus
        self.node = node
        self.core = bus.owner.node
        self.transport = None
        self.peer_ip = ""
        self.local_ip = ""
        self._pending: list[bytes] = []
        self.generation = 0
        self.opened = self.last_data = time.monotonic()
        self.sender: bytes | None = None     # the node whose messages came last (traffic)
        self.trusted = False         # authenticated, or (no secret) past its first heartbeat
        self.ready: asyncio.Future | None = None   # our link: set once usable
        self._connector: auth.Connector | None = None
        self._acceptor: auth.Acceptor | None = None
        self._open_when_trusted()

    def connection_made(self, transport) -> None:
        self.transport = transport
        transport.set_write_buffer_limits(LINK_HIGH_WATER)
        peer = transport.get_extra_info("peername")
        local = transport.get_extra_info("sockname")
        self.peer_ip = peer[0] if isinstance(peer, tuple) else ""
        self.local_ip = local[0] if isinstance(local, tuple) else ""
        bus = self.bus
        if self.node is None:
            if bus.untrusted_inbound() >= MAX_UNTRUSTED_INBOUND:
                bus.count("links_refused")
                self.close()
                return
            bus.inbound.add(self)
            self._open_when_trusted()
            return
        self.ready = bus.loop.create_future()
        secret, mode = bus.auth_settings()
        if secret is None:
            self.trusted = True       # a node we chose to connect to
            self._open_when_trusted()
            self._set_ready()
            return
        self._connector = auth.Connector(secret, bus.my_id(), mode)
        self._open_when_trusted()
        transport.write(self._connector.hello())

    def _open_when_trusted(self) -> None:
        """What the link may send now: the largest frame (a small one until
        it is trusted, a handshake's while one runs), and whether the fast
        path takes its data-plane frames (only once it is trusted)."""
        self.fast = False
        if self._connector is not None or self._acceptor is not None:
            self.frame_limit = auth.MAX_FRAME           # mid-handshake
        elif not self.trusted:
            secret, mode = self.bus.auth_settings()
            required = secret is not None and mode == auth.MODE_REQUIRE
            self.frame_limit = auth.MAX_FRAME if required else UNTRUSTED_MAX_FRAME
        else:
            self.frame_limit = msg.MAX_FRAME
            self.fast = True

    # -------------------------------------------- LinkBase's hooks (link.pxd)

    def on_frame(self, payload: bytes) -> None:
        try:
            if auth.is_handshake(payload):
                self._on_handshake(payload)
            else:
                header, body = msg.decode(payload)
                self._on_message(header, body, len(payload) + msg.LENGTH.size)
        except msg.BadFrame as error:
            log.warning("Closing cluster bus link with %s: bad frame: %s", self.peer_ip, error)
            self.close()
        except auth.AuthFailed as error:
            self.bus.count("auth_failures")
            log.warning("Closing cluster bus link with %s: authentication failed: %s",
                        self.peer_ip, error)
            self.close()
        if not self.fast and not self.closed:
            self._open_when_trusted()

    def refuse_length(self, length: int) -> None:
        if length < auth.MIN_FRAME:
            reason = f"frame length {length} out of range"
        else:
            self.bus.count("frames_too_large")
            reason = f"frame of {length} bytes before the link is trusted"
        log.warning("Closing cluster bus link with %s: bad frame: %s", self.peer_ip, reason)
        self.close()

    def fast_frames_done(self, sender: bytes, frames: int, size: int) -> None:
        self.sender = sender
        self.bus.account(sender, RECEIVED, frames, size)
        self.bus.owner.on_fast_frames(sender, frames)

    def _on_handshake(self, payload: bytes) -> None:
        bus = self.bus
        if self._connector is not None:                     # our link
            proof, authenticated = self._connector.on_challenge(payload)
            self._connector = None
            if proof is not None:
                self.transport.write(proof)
            self.trusted = authenticated
            self._set_ready()
        elif self._acceptor is not None:                    # their PROOF
            self.peer_id = self._acceptor.on_proof(payload)
            self._acceptor = None
            self.trusted = True
        elif self.node is None and not self.trusted:        # their HELLO
            acceptor = auth.Acceptor(bus.auth_settings()[0])
            self.transport.write(acceptor.on_hello(payload))
            if acceptor.secret is not None:
                self._acceptor = acceptor
        else:
            raise auth.AuthFailed("unexpected handshake frame")

    def _on_message(self, header: msg.Header, body, size: int) -> None:
        bus = self.bus
        if self._connector is not None or self._acceptor is not None:
            raise auth.AuthFailed("a bus message before the handshake ended")
        if not self.trusted and self.node is None:
            secret, mode = bus.auth_settings()
            if secret is not None and mode == auth.MODE_REQUIRE:
                raise auth.AuthFailed("this node requires the cluster secret")
            if header.type not in HEARTBEATS:
                raise msg.BadFrame("the first message of a link is a heartbeat")
            self.trusted = True            # on_frame then opens the fast path
        if header.sender == bus.my_id() or \
                (self.peer_id is not None and header.sender != self.peer_id):
            bus.count("frames_refused")     # forged: not who authenticated
            return
        self.sender = header.sender
        bus.account(header.sender, RECEIVED, 1, size)
        bus.deliver(self, header, body)

    def _account_sent(self, frames: int, size: int) -> None:
        peer = self.node.id if self.node is not None else self.sender
        if peer is not None:
            self.bus.account(peer, SENT, frames, size)

    def _set_ready(self) -> None:
        if self.ready is not None and not self.ready.done():
            self.ready.set_result(True)

    def send(self, frame: bytes) -> None:
        if self.closed:
            return
        if not self._pending:
            self.bus.loop.call_soon(self._flush)
        self._pending.append(frame)
        self._account_sent(1, len(frame))

    def write_frames(self, data: bytes, frames: int) -> None:
        """`frames` frames encoded in `data`, written at once (behind any
        frames still queued, keeping the order)."""
        if self.closed:
            return
        self._account_sent(frames, len(data))
        pending = self._pending
        if pending:
            data = b"".join(pending) + data
            pending.clear()          # the _flush already scheduled finds nothing
        self.transport.write(data)

    def _flush(self) -> None:
        if not self.closed and self._pending:
            self.transport.write(b"".join(self._pending))
        self._pending.clear()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            if self.transport is not None:
                self.transport.close()
        if self.ready is not None and not self.ready.done():
            self.ready.set_result(False)

    def connection_lost(self, exc) -> None:
        if self._acceptor is not None:
            self.bus.count("auth_failures")     # it left without its PROOF
        self.close()
        self.bus.lost(self)


class BusOwner(Protocol):
    """What the bus asks of the service that owns it (server/cluster_service.py):
    the bus settings, and where link changes and messages go."""

    auth_secret: bytes | None          # cluster-secret, None when unset
    auth_mode: str                     # cluster-secret-mode
    membership: object                 # cluster/membership.py: myself.id

    def bus_tls(self) -> tuple | None: ...
    def wants_link(self, node, generation: int) -> bool: ...
    def on_link_up(self, node) -> None: ...
    def on_link_failed(self, node, generation: int) -> None: ...
    def on_bus_message(self, link: BusLink, header: msg.Header, body) -> None: ...
    def on_fast_frames(self, sender: bytes, frames: int) -> None: ...


class ClusterBus:
    def __init__(self, owner: BusOwner) -> None:
        self.owner = owner
        self.loop = None
        self.servers: list = []
        self.links: dict = {}          # ClusterNode -> our BusLink to it
        self.inbound: set[BusLink] = set()
        self.stats = dict.fromkeys(STAT_NAMES, 0)
        self.traffic: dict[bytes, list[int]] = {}    # peer node ID -> its counters

    # ------------------------------------------------------------ what it asks

    def auth_settings(self) -> tuple[bytes | None, str]:
        return self.owner.auth_secret, self.owner.auth_mode

    def my_id(self) -> bytes:
        return self.owner.membership.myself.id

    def count(self, stat: str) -> None:
        self.stats[stat] += 1

    def account(self, peer_id: bytes, direction: int, frames: int, size: int) -> None:
        counters = self.traffic.get(peer_id)
        if counters is None:
            counters = self.traffic[peer_id] = [0, 0, 0, 0]
        counters[direction] += frames
        counters[direction + 1] += size

    def traffic_of(self, known_ids) -> dict[bytes, list[int]]:
        """The counters of the known nodes; those of any other node are dropped."""
        traffic = self.traffic
        for peer_id in [peer_id for peer_id in traffic if peer_id not in known_ids]:
            del traffic[peer_id]
        return traffic

    def untrusted_inbound(self) -> int:
        return sum(1 for link in self.inbound if not link.trusted)

    # ------------------------------------------------------------ links

    def tls(self, side: int):
        """The ssl context of this side (0: listener, 1: connector), or None."""
        contexts = self.owner.bus_tls()
        return contexts[side] if contexts is not None else None

    async def listen(self, hosts: list[str | None], port: int) -> None:
        self.loop = asyncio.get_running_loop()
        for host in hosts:
            server = await self.loop.create_server(lambda: BusLink(self), host=host, port=port,
                                                   reuse_address=True, ssl=self.tls(0))
            self.servers.append(server)

    def connect(self, node, ip: str, port: int, generation: int) -> None:
        self.loop.create_task(self._connect(node, ip, port, generation))

    async def _connect(self, node, ip: str, port: int, generation: int) -> None:
        try:
            _, link = await asyncio.wait_for(
                self.loop.create_connection(lambda: BusLink(self, node), ip, port,
                                            ssl=self.tls(1)),
                CONNECT_TIMEOUT_S)
            usable = await asyncio.wait_for(asyncio.shield(link.ready), CONNECT_TIMEOUT_S)
        except (OSError, asyncio.TimeoutError):
            usable = False
            link = None
        if not usable:
            if link is not None:
                link.close()
            self.owner.on_link_failed(node, generation)
            return
        if not self.owner.wants_link(node, generation):
            link.node = None          # stale: for a forgotten node or an old address
            link.close()
            return
        old = self.links.get(node)
        if old is not None:
            old.close()
        link.generation = generation
        self.links[node] = link
        self.owner.on_link_up(node)

    def send(self, node, frame: bytes) -> bool:
        link = self.links.get(node)
        if link is None or link.closed:
            return False
        link.send(frame)
        return True

    def write_frames(self, node, data: bytes, frames: int) -> bool:
        link = self.links.get(node)
        if link is None or link.closed:
            return False
        link.write_frames(data, frames)
        return True

    def drop(self, node) -> None:
        link = self.links.pop(node, None)
        if link is not None:
            link.close()

    def deliver(self, link: BusLink, header, body) -> None:
        self.owner.on_bus_message(link, header, body)

    def lost(self, link: BusLink) -> None:
        self.inbound.discard(link)
        node = link.node
        if node is not None and self.links.get(node) is link:
            del self.links[node]
            self.owner.on_link_failed(node, link.generation)

    def close_idle_inbound(self, idle_s: float) -> None:
        """Inbound links carry the peer's PINGs; one silent this long is dead,
        and one not vouched for within UNTRUSTED_MAX_AGE_S is a stranger's."""
        now = time.monotonic()
        for link in list(self.inbound):
            if link.last_data < now - idle_s:
                log.verbose("Closing idle cluster bus link from %s", link.peer_ip)
                link.close()
            elif not link.trusted and link.opened < now - UNTRUSTED_MAX_AGE_S:
                self.count("links_refused")
                link.close()

    def reset_links(self) -> None:
        """The secret or its mode changed: every link goes; ours reconnect
        (and authenticate, or not, as now configured)."""
        for link in list(self.links.values()) + list(self.inbound):
            link.close()

    def close(self) -> None:
        for server in self.servers:
            server.close()
        for link in list(self.links.values()) + list(self.inbound):
            link.close()
