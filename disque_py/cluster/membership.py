"""Who is in the cluster and who is up: the node table, handshakes, gossip,
failure detection. Pure state: no sockets; effects go to the runtime.

Every node has the same role. A node learns others through CLUSTER MEET
(a handshake with an address) and through gossip: each PING/PONG carries a
few known nodes, and a node heard of from a known sender is met in turn, so
a chain of MEETs ends in a full mesh.

Failure detection, Disque's rule: a node that has not answered a PING within
cluster-node-timeout, and sent nothing else meanwhile, is PFAIL (possibly
failing) here; anything it sends clears that. Other nodes report
their PFAIL/FAIL views in gossip; when this node sees it as PFAIL and the
reports plus itself reach a majority of the cluster size, it flags it FAIL
and tells everyone (FAIL message). A node that answers again is cleared.

Start epochs (for the node layer's re-replication, node/healing.py): every
node has one, chosen at start (the server keeps it when it loaded its jobs
from an AOF, else draws a new one). A node sets SPEAKS_EPOCH in the node
flags of every header it sends; a node answering a PING or MEET whose
header has that bit sends EPOCH right after its PONG, on the same link. So
each node learns a peer's epoch from the answer to its own PING (every
link that comes up starts with one), and a node that never set the bit (an
older version, which would reject the unknown message type) is never sent
EPOCH. A peer whose epoch changed restarted without its jobs. A node also
asks each peer once (MSG_WANT_EPOCHS on its PING) for the epochs that
peer heard from the others, and keeps them as hints for the nodes it has
not heard from itself yet: a node that just started (empty) learns what
epoch a node that is still down had, and so can tell, when that node comes
back, whether it restarted empty meanwhile.

Job options (BACKOFF, MAXDELIVERIES...): a node sets SPEAKS_JOB_OPTIONS in
its headers when it reads a job's options block; each peer's header bits
are kept (ClusterNode.capabilities) and the engine sends jobs with their
options only to peers that set it, plain jobs to the others; likewise
SPEAKS_PRIORITY for the block's version 2 (a v1 reader gets v1, no priority)
and SPEAKS_DEDUP for version 3 (the DEDUP key: a v2 reader gets v2 without it).

Links: each node keeps one outgoing connection to every other node and
sends its PINGs there; PONGs come back on it. Connections others opened to
us (inbound) are answered on the same connection. The bus reports link
events here; this module decides what to send and when to reconnect (with
backoff, never slower than RECONNECT_MAX_MS).
"""

from __future__ import annotations

import random

from disque_py.formats import bus as msg
from disque_py.cluster.nodes import (BUS_PORT_OFFSET, FAIL, HANDSHAKE, HEADER_CAPABILITIES,
                                     LEAVING, MAX_CLIENT_PORT, MEET, MYSELF, NOADDR, PFAIL,
                                     RECONNECT_MAX_MS, RECONNECT_MIN_MS, SPEAKS_EPOCH, FLAG_NAMES,
                                     FLAGS_BY_NAME, ClusterNode, normalize_ip, random_node_id)
from disque_py.cluster.nodes_conf import NodeRecord
from disque_py.base.effects import Connect, DropLink, ReplyOn, SaveConfig, Send

FAIL_REPORT_VALIDITY_MULT = 2
HANDSHAKE_TIMEOUT_MIN_MS = 1000
BLACKLIST_TTL_MS = 60_000
GOSSIP_MIN_ENTRIES = 3
PING_RANDOM_EVERY_TICKS = 10
PING_RANDOM_SAMPLE = 5


class Membership:
    def __init__(self, myself_id: bytes, port: int, node_timeout_ms: int, clock,
                 announce_ip: str = "") -> None:
        self.clock = clock
        self.node_timeout = node_timeout_ms
        self.effects: list = []
        self.nodes: dict[bytes, ClusterNode] = {}
        self.blacklist: dict[bytes, int] = {}
        self.myself = ClusterNode(myself_id, announce_ip, port, MYSELF, clock.now_ms())
        self.nodes[myself_id] = self.myself
        self.size = 1
        self.reachable: list[ClusterNode] = []
        self.messages_sent = 0
        self.messages_received = 0
        self.ticks = 0
        self._rng = random.Random()
        self.epoch = 0               # this node's start epoch (set before the bus starts)
        self.capabilities = HEADER_CAPABILITIES

    # ------------------------------------------------------------ queries

    def header(self, kind: int, mflags: int = 0) -> msg.Header:
        me = self.myself
        return msg.Header(kind, me.id, me.port, (me.flags & LEAVING) | self.capabilities,
                          mflags)

    def peers(self) -> list[ClusterNode]:
        return [node for node in self.nodes.values() if node is not self.myself]

    @property
    def leaving(self) -> bool:
        return bool(self.myself.flags & LEAVING)

    def refresh_views(self) -> None:
        """Cluster size (nodes past handshake) and reachable peers."""
        self.size = sum(1 for node in self.nodes.values() if not node.flags & HANDSHAKE)
        unreachable = MYSELF | HANDSHAKE | LEAVING | PFAIL | FAIL
        self.reachable = [node for node in self.nodes.values() if not node.flags & unreachable]

    def records(self) -> list[NodeRecord]:
        """What nodes.conf keeps: every node past its handshake (a handshake
        node has a made-up ID that means nothing after a restart)."""
        return [NodeRecord(node.id.decode(), node.ip, node.port,
                           {name for flag, name in FLAG_NAMES if node.flags & flag})
                for node in self.nodes.values() if not node.flags & HANDSHAKE]

    def load_records(self, records: list[NodeRecord]) -> None:
        """Peers from nodes.conf (myself is already set up by the caller)."""
        now = self.clock.now_ms()
        for record in records:
            flags = 0
            for name in record.flags:
                flags |= FLAGS_BY_NAME.get(name, 0)
            if flags & MYSELF:
                self.myself.flags |= flags & LEAVING
                if record.ip and not self.myself.ip:
                    self.myself.ip = record.ip
                continue
            node = ClusterNode(record.node_id.encode(), record.ip, record.port,
                               flags & ~(PFAIL | FAIL), now)
            self.nodes[node.id] = node
        self.refresh_views()

    # ------------------------------------------------------------ commands

    def meet(self, ip: str, port: int) -> bool:
        """CLUSTER MEET: start a handshake. False if the address is invalid."""
        normalized = normalize_ip(ip)
        if normalized is None or not 0 < port <= MAX_CLIENT_PORT:
            return False
        self._start_handshake(normalized, port)
        return True

    def forget(self, node: ClusterNode) -> None:
        self.blacklist[node.id] = self.clock.now_ms() + BLACKLIST_TTL_MS
        self._delete(node)
        self._changed()

    def reset(self, new_id: bytes | None) -> None:
        """Forget every other node; with a new ID for a hard reset."""
        for node in self.peers():
            self._delete(node)
        if new_id is not None:
            del self.nodes[self.myself.id]
            self.myself.id = new_id
            self.nodes[new_id] = self.myself
        self._changed()

    def set_leaving(self, leaving: bool) -> None:
        old = self.myself.flags
        self.myself.flags = old | LEAVING if leaving else old & ~LEAVING
        if old != self.myself.flags:
            self._changed()

    def set_node_timeout(self, timeout_ms: int) -> None:
        self.node_timeout = timeout_ms

    # ------------------------------------------------------------ link events

    def is_current(self, node: ClusterNode, generation: int) -> bool:
        """Does a connect outcome still concern a live node and its address?"""
        return self.nodes.get(node.id) is node and node.link_generation == generation

    def link_up(self, node: ClusterNode) -> None:
        """Our connection to `node` is open: greet it (MEET or PING)."""
        if self.nodes.get(node.id) is not node:
            self.effects.append(DropLink(node))     # forgotten meanwhile
            return
        now = self.clock.now_ms()
        node.connecting = False
        node.linked = True
        node.link_since = now
        node.backoff = RECONNECT_MIN_MS
        old_ping_sent = node.ping_sent
        self._send_heartbeat(node, msg.MEET if node.flags & MEET else msg.PING)
        if old_ping_sent:
            node.ping_sent = old_ping_sent   # a ping in flight keeps its age
        node.flags &= ~MEET

    def link_failed(self, node: ClusterNode) -> None:
        """Connecting to `node` failed, or its link broke."""
        if self.nodes.get(node.id) is not node:
            return
        now = self.clock.now_ms()
        node.connecting = False
        node.linked = False
        if node.ping_sent == 0:
            node.ping_sent = now     # without this a dead node never times out
        node.next_connect = now + node.backoff
        node.backoff = min(node.backoff * 2, RECONNECT_MAX_MS)

    # ------------------------------------------------------------ messages

    def on_heartbeat(self, via: ClusterNode | None, link, peer_ip: str, local_ip: str,
                     header: msg.Header, body: msg.Heartbeat) -> None:
        """PING, PONG or MEET, from our link to `via` or from an inbound link."""
        now = self.clock.now_ms()
        sender = self.nodes.get(header.sender)
        kind = header.type
        if kind != msg.PONG:
            self._learn_own_address(kind, local_ip)
            if sender is None and kind == msg.MEET:
                node = ClusterNode(random_node_id(), peer_ip, header.port, HANDSHAKE, now)
                self.nodes[node.id] = node
                self._changed()
            self.effects.append(ReplyOn(link, msg.PONG, self._heartbeat_body()))
            if header.flags & SPEAKS_EPOCH and self.epoch:
                others = self._known_epochs(header.sender) \
                    if header.mflags & msg.MSG_WANT_EPOCHS else []
                self.effects.append(ReplyOn(link, msg.EPOCH, msg.Epoch(self.epoch, others)))
        if via is not None and not self._check_link_identity(via, header, peer_ip):
            return
        if sender is None and via is not None:
            sender = via     # this PONG just finished its handshake: learn all it says
        if sender is not None and kind == msg.PING and not sender.flags & HANDSHAKE:
            self._update_address(sender, peer_ip, header.port)
        if via is not None and kind == msg.PONG:
            via.pong_received = now
            via.ping_sent = 0
            if via.flags & (PFAIL | FAIL):
                via.flags &= ~(PFAIL | FAIL)
                self._changed()
        if sender is not None:
            self.heard_from(sender, now)
            sender.capabilities = header.flags & HEADER_CAPABILITIES
        if sender is not None and not sender.linked and not sender.connecting \
                and not sender.flags & (HANDSHAKE | NOADDR):
            # It talks to us again (a restart?): reconnect now, not after backoff.
            sender.backoff = RECONNECT_MIN_MS
            self._connect(sender)
        if sender is not None:
            leaving = header.flags & LEAVING
            if (sender.flags & LEAVING) != leaving:
                sender.flags = (sender.flags & ~LEAVING) | leaving
                self._changed()
            self._process_gossip(sender, body.gossip, now)

    def heard_from(self, node: ClusterNode, now: int) -> None:
        """Any message from a node proves it is up: no longer PFAIL."""
        node.data_received = now
        if node.flags & PFAIL:
            node.flags &= ~PFAIL
            self._changed()

    def on_fail(self, header: msg.Header, body: msg.Fail) -> None:
        if header.sender not in self.nodes:
            return
        failing = self.nodes.get(body.node_id)
        if failing is not None and not failing.flags & (FAIL | MYSELF):
            failing.flags = (failing.flags | FAIL) & ~PFAIL
            failing.fail_time = self.clock.now_ms()
            self._changed()

    def on_epoch(self, header: msg.Header, body: msg.Epoch) -> bool:
        """EPOCH: a peer's start epoch (and hints about others'). True if
        its own changed (or is new)."""
        node = self.nodes.get(header.sender)
        if node is None or node.flags & (HANDSHAKE | MYSELF):
            return False
        node.epochs_asked = True         # it answers only our heartbeats, which asked
        if body.others:
            for node_id, epoch in body.others:
                other = self.nodes.get(node_id)
                if other is not None and not other.epoch and not other.epoch_hint \
                        and not other.flags & (HANDSHAKE | MYSELF):
                    other.epoch_hint = epoch
        if node.epoch == body.epoch:
            return False
        node.epoch = body.epoch
        return True

    def epochs(self) -> dict[bytes, int]:
        """The start epoch of every peer past its handshake we know one of:
        as it told us, or else as another node heard it."""
        return {node.id: node.epoch or node.epoch_hint for node in self.nodes.values()
                if (node.epoch or node.epoch_hint) and not node.flags & (HANDSHAKE | MYSELF)}

    def _known_epochs(self, asker: bytes) -> list[tuple[bytes, int]]:
        """(ID, epoch) of the peers that told us theirs, but the asker."""
        return [(node.id, node.epoch) for node in self.nodes.values()
                if node.epoch and node.id != asker and not node.flags & (HANDSHAKE | MYSELF)]

    def _learn_own_address(self, kind: int, local_ip: str) -> None:
        # Peers reach us at the address they MEET us on: that is our address.
        if (kind == msg.MEET or not self.myself.ip) and local_ip and local_ip != self.myself.ip:
            self.myself.ip = local_ip
            self._changed()

    def _check_link_identity(self, via: ClusterNode, header: msg.Header, peer_ip: str) -> bool:
        """On our own link: finish a handshake, or notice a node changed ID."""
        if self.nodes.get(via.id) is not via:
            return False          # a link to a node forgotten meanwhile
        if via.flags & HANDSHAKE:
            known = self.nodes.get(header.sender)
            if known is not None:      # we met an address we already knew
                self._update_address(known, via.ip, header.port)
                self._delete(via)
                self._changed()
                return False
            del self.nodes[via.id]
            via.id = header.sender
            via.flags &= ~HANDSHAKE
            self.nodes[via.id] = via
            self._changed()
        elif via.id != header.sender:
            via.flags |= NOADDR
            via.ip, via.port = "", 0
            self._drop_link(via)
            self._changed()
            return False
        return True

    def _update_address(self, node: ClusterNode, ip: str, port: int) -> None:
        if not ip or (node.ip == ip and node.port == port):
            return
        node.ip, node.port = ip, port
        node.flags &= ~NOADDR
        self._drop_link(node)
        self._changed()

    def _process_gossip(self, sender: ClusterNode, gossip: list[msg.Gossip], now: int) -> None:
        for entry in gossip:
            node = self.nodes.get(entry.node_id)
            if node is not None:
                if node is not self.myself:
                    if entry.flags & (FAIL | PFAIL):
                        node.fail_reports[sender.id] = now
                        self._mark_failing_if_needed(node, now)
                    else:
                        node.fail_reports.pop(sender.id, None)
                ip = normalize_ip(entry.ip)
                if node.flags & (FAIL | PFAIL) and ip is not None \
                        and (node.ip, node.port) != (ip, entry.port):
                    self._start_handshake(ip, entry.port)
            elif not entry.flags & NOADDR and not self._blacklisted(entry.node_id, now):
                ip = normalize_ip(entry.ip)
                if ip is not None and 0 < entry.port <= MAX_CLIENT_PORT:
                    self._start_handshake(ip, entry.port)

    def _mark_failing_if_needed(self, node: ClusterNode, now: int) -> None:
        if not node.flags & PFAIL or node.flags & FAIL:
            return
        validity = self.node_timeout * FAIL_REPORT_VALIDITY_MULT
        reports = node.fail_reports
        for reporter, when in list(reports.items()):
            if now - when > validity:
                del reports[reporter]
        if len(reports) + 1 < self.size // 2 + 1:
            return
        node.flags = (node.flags | FAIL) & ~PFAIL
        node.fail_time = now
        for peer in self.peers():
            self.effects.append(Send(peer, msg.FAIL, msg.Fail(node.id)))
        self._changed()

    # ------------------------------------------------------------ the cron

    def tick(self) -> None:
        """Every 100 ms: handshakes, reconnects, pings, timeouts."""
        now = self.clock.now_ms()
        self.ticks += 1
        self._reconnect(now)
        if self.ticks % PING_RANDOM_EVERY_TICKS == 0:
            self._ping_a_random_node()
        self._detect_timeouts(now)
        self.refresh_views()

    def _reconnect(self, now: int) -> None:
        handshake_timeout = max(self.node_timeout, HANDSHAKE_TIMEOUT_MIN_MS)
        for node in self.peers():
            if node.flags & NOADDR:
                continue
            if node.flags & HANDSHAKE and now - node.ctime > handshake_timeout:
                self._delete(node)
                self._changed()
                continue
            if not node.linked and not node.connecting and now >= node.next_connect:
                self._connect(node)

    def _ping_a_random_node(self) -> None:
        candidates = [node for node in self.peers()
                      if node.linked and not node.ping_sent and not node.flags & HANDSHAKE]
        if candidates:
            sample = self._rng.sample(candidates, min(PING_RANDOM_SAMPLE, len(candidates)))
            self._send_heartbeat(min(sample, key=lambda node: node.pong_received), msg.PING)

    def _detect_timeouts(self, now: int) -> None:
        timeout = self.node_timeout
        for node in self.peers():
            if node.flags & (NOADDR | HANDSHAKE):
                continue
            _restart_ages_from(node, now)
            # A PING is in flight while ping_sent is set (a PONG clears it).
            # Not `pong_received < ping_sent`: after the wall clock steps
            # back, a fresh PING looks older than the last PONG, and a lost
            # PONG then left the link unwatched for good (never PINGed again).
            waiting = bool(node.ping_sent)
            if node.linked and waiting and now - node.link_since > timeout \
                    and now - node.ping_sent > timeout // 2:
                # A silent link may be a broken one: reconnect it.
                self._drop_link(node)
            if node.linked and not node.ping_sent and now - node.pong_received > timeout // 2:
                self._send_heartbeat(node, msg.PING)
                continue
            if node.ping_sent and now - node.ping_sent > timeout \
                    and now - node.data_received > timeout \
                    and not node.flags & (PFAIL | FAIL):
                node.flags |= PFAIL
                self._changed()

    # ------------------------------------------------------------ helpers

    def _send_heartbeat(self, node: ClusterNode, kind: int) -> None:
        if kind == msg.PING:
            node.ping_sent = self.clock.now_ms()
        mflags = 0 if node.epochs_asked or not self.capabilities else msg.MSG_WANT_EPOCHS
        self.effects.append(Send(node, kind, self._heartbeat_body(), mflags))

    def _heartbeat_body(self) -> msg.Heartbeat:
        """A gossip sample: a tenth of the nodes, at least 3, failing ones first.

        Failing nodes are reported even while we have no link to them: their
        failure reports are what turns PFAIL into FAIL elsewhere."""
        wanted = max(len(self.nodes) // 10, GOSSIP_MIN_ENTRIES)
        eligible = [node for node in self.peers() if not node.flags & (HANDSHAKE | NOADDR)]
        failing = [node for node in eligible if node.flags & (PFAIL | FAIL)]
        others = [node for node in eligible if not node.flags & (PFAIL | FAIL)]
        self._rng.shuffle(others)
        chosen = (failing + others)[:wanted]
        return msg.Heartbeat([msg.Gossip(node.id, node.ip, node.port, node.flags & ~MEET)
                              for node in chosen])

    def _start_handshake(self, ip: str, port: int) -> None:
        for node in self.nodes.values():
            if node.flags & HANDSHAKE and node.ip == ip and node.port == port:
                return
        node = ClusterNode(random_node_id(), ip, port, HANDSHAKE | MEET, self.clock.now_ms())
        self.nodes[node.id] = node

    def _connect(self, node: ClusterNode) -> None:
        node.connecting = True
        node.link_generation += 1
        self.effects.append(Connect(node, node.ip, node.port + BUS_PORT_OFFSET,
                                    node.link_generation))

    def _drop_link(self, node: ClusterNode) -> None:
        if node.linked or node.connecting:
            self.effects.append(DropLink(node))
        node.linked = node.connecting = False
        node.link_generation += 1

    def _blacklisted(self, node_id: bytes, now: int) -> bool:
        for listed, until in list(self.blacklist.items()):
            if until < now:
                del self.blacklist[listed]
        return node_id in self.blacklist

    def _delete(self, node: ClusterNode) -> None:
        self.nodes.pop(node.id, None)
        for other in self.nodes.values():
            other.fail_reports.pop(node.id, None)
        self._drop_link(node)

    def _changed(self) -> None:
        self.refresh_views()
        self.effects.append(SAVE_CONFIG)

    def take_effects(self) -> list:
        effects = self.effects
        self.effects = []
        return effects


SAVE_CONFIG = SaveConfig()


def _restart_ages_from(node: ClusterNode, now: int) -> None:
    """After the wall clock stepped back, a link's stamps lie in the future
    and its timeouts would wait for the clock to catch up (up to the step):
    their ages restart from now instead."""
    if node.link_since > now:
        node.link_since = now
    if node.ping_sent > now:
        node.ping_sent = now
    if node.pong_received > now:
        node.pong_received = now
    if node.data_received > now:
        node.data_received = now
