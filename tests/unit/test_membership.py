"""Membership (cluster/membership.py) driven without sockets.

A few Membership instances share a FakeClock and a tiny simulated network
that plays the part of bus.py + cluster_service.py:

- Connect(node, ip, port) from A opens A's outbound link to whoever listens
  on that bus port (link_up on A), or fails it (link_failed on A);
- Send(node, ...) from A travels over A's outbound link to `node` and
  arrives at the peer as an inbound message (via=None);
- ReplyOn(link, ...) answers on the link the message arrived on, so it
  arrives back at the link's opener with via = the opener's ClusterNode;
- DropLink(node) closes A's outbound link (no link_failed, as in bus.py).

Every frame is really encoded and decoded with messages.py on the way, so
what membership emits must also be something the codec carries. Time moves
in 100 ms cron ticks, like ClusterService's timer.
"""

from __future__ import annotations

import collections

import pytest

from disque_py.formats import bus as msg
from disque_py.cluster import nodes_conf
from disque_py.cluster.membership import BLACKLIST_TTL_MS, Membership
from disque_py.cluster.nodes import (BUS_PORT_OFFSET, FAIL, HANDSHAKE, LEAVING, MEET, MYSELF,
                                     NOADDR, PFAIL, RECONNECT_MAX_MS, RECONNECT_MIN_MS,
                                     SPEAKS_DEDUP, SPEAKS_EPOCH, SPEAKS_JOB_OPTIONS,
                                     SPEAKS_PRIORITY, options_version_read, random_node_id)
from disque_py.base.clock import FakeClock
from disque_py.base.effects import Connect, DropLink, ReplyOn, SaveConfig, Send

IP = "127.0.0.1"
TIMEOUT = 1000
TICK = 100
BASE_PORT = 7700


class Link:
    """One TCP connection: opened by `owner` for its ClusterNode `node`."""

    def __init__(self, owner: "SimNode", node, target: "SimNode") -> None:
        self.owner = owner
        self.node = node
        self.target = target
        self.open = True


class SimNode:
    def __init__(self, net: "Net", port: int, node_id: bytes | None = None) -> None:
        self.net = net
        self.port = port
        self.membership = Membership(node_id or random_node_id(), port, TIMEOUT, net.clock)
        self.membership._rng.seed(port)
        self.links: dict = {}            # our ClusterNode -> outbound Link
        self.state = "up"                # up | muted (SIGSTOP-like) | down (killed)
        self.saves = 0
        self.connects: list[tuple[int, object]] = []   # (time, node) of Connect effects
        self.old = False                 # an older version: no EPOCH, rejects it (BadFrame)
        self.refused: list[str] = []     # frames an old version would have refused

    @property
    def id(self) -> bytes:
        return self.membership.myself.id

    def node(self, node_id: bytes):
        return self.membership.nodes.get(node_id)

    def known_ids(self) -> set[bytes]:
        """IDs past the handshake."""
        return {node.id for node in self.membership.nodes.values()
                if not node.flags & HANDSHAKE}

    def flags_of(self, other: "SimNode") -> int | None:
        node = self.node(other.id)
        return None if node is None else node.flags

    def __repr__(self) -> str:
        return f"<SimNode {self.port} {self.id[:8].decode()} {self.state}>"


class Net:
    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.sims: list[SimNode] = []
        self.events: collections.deque = collections.deque()
        self.delivered = collections.Counter()

    # -------------------------------------------------------------- setup

    def add(self, node_id: bytes | None = None, port: int | None = None, epoch: int = 0,
            old: bool = False) -> SimNode:
        sim = SimNode(self, port or BASE_PORT + len(self.sims), node_id)
        sim.membership.epoch = epoch or (len(self.sims) + 1) * 1000
        if old:                          # what a node before SPEAKS_EPOCH sends and reads
            sim.old = True
            sim.membership.capabilities = 0
            sim.membership.epoch = 0
        self.sims.append(sim)
        return sim

    def listener(self, bus_port: int) -> SimNode | None:
        for sim in self.sims:
            if sim.port + BUS_PORT_OFFSET == bus_port and sim.state != "down":
                return sim
        return None

    # -------------------------------------------------------------- effects

    def collect(self, sim: SimNode) -> None:
        for effect in sim.membership.take_effects():
            kind = type(effect)
            if kind is Send:
                link = sim.links.get(effect.node)
                if link is not None and link.open:
                    header = sim.membership.header(effect.kind, effect.mflags)
                    self.events.append(("inbound", link, msg.encode(header, effect.body)))
            elif kind is ReplyOn:
                link = effect.link
                header = sim.membership.header(effect.kind)
                self.events.append(("reply", link, msg.encode(header, effect.body)))
            elif kind is Connect:
                sim.connects.append((self.clock.now_ms(), effect.node))
                target = self.listener(effect.port)
                if target is None or effect.ip != IP:
                    self.events.append(("link_failed", sim, effect.node))
                else:
                    old = sim.links.pop(effect.node, None)
                    if old is not None:
                        old.open = False
                    sim.links[effect.node] = Link(sim, effect.node, target)
                    self.events.append(("link_up", sim, effect.node))
            elif kind is DropLink:
                link = sim.links.pop(effect.node, None)
                if link is not None:
                    link.open = False
            elif kind is SaveConfig:
                sim.saves += 1
            else:
                raise AssertionError(f"unexpected effect {effect!r}")

    def pump(self, max_events: int = 100_000) -> None:
        for _ in range(max_events):
            if not self.events:
                return
            event = self.events.popleft()
            if event[0] == "link_up":
                _, sim, node = event
                if sim.state == "up" and sim.links.get(node) is not None:
                    sim.membership.link_up(node)
                    self.collect(sim)
            elif event[0] == "link_failed":
                _, sim, node = event
                if sim.state == "up":
                    sim.membership.link_failed(node)
                    self.collect(sim)
            else:
                direction, link, frame = event
                if not link.open:
                    continue
                if direction == "inbound":
                    receiver, via = link.target, None
                else:
                    receiver, via = link.owner, link.node
                if receiver.state != "up":
                    continue
                header, body = msg.decode(frame[msg.LENGTH.size:])
                self.delivered[msg.TYPE_NAMES[header.type]] += 1
                membership = receiver.membership
                if receiver.old and header.type > msg.PAUSE:
                    receiver.refused.append(msg.TYPE_NAMES[header.type])   # BadFrame there
                    continue
                if header.type in (msg.PING, msg.PONG, msg.MEET):
                    membership.on_heartbeat(via, link, IP, IP, header, body)
                elif header.type == msg.FAIL:
                    membership.on_fail(header, body)
                elif header.type == msg.EPOCH:
                    membership.on_epoch(header, body)
                self.collect(receiver)
        raise AssertionError("the simulated network never went quiet")

    # -------------------------------------------------------------- time

    def step(self) -> None:
        self.clock.advance(TICK)
        for sim in self.sims:
            if sim.state == "up":
                sim.membership.tick()
                self.collect(sim)
        self.pump()

    def run(self, ms: int) -> None:
        for _ in range(ms // TICK):
            self.step()

    def run_until(self, condition, max_ms: int) -> int:
        """Step until condition() holds; the simulated ms it took."""
        start = self.clock.now_ms()
        while not condition():
            if self.clock.now_ms() - start >= max_ms:
                raise AssertionError(f"condition not reached within {max_ms} simulated ms")
            self.step()
        return self.clock.now_ms() - start

    # -------------------------------------------------------------- faults

    def mute(self, sim: SimNode) -> None:
        """Stop answering (like SIGSTOP): connections open, nothing comes back."""
        sim.state = "muted"

    def unmute(self, sim: SimNode) -> None:
        sim.state = "up"

    def kill(self, sim: SimNode) -> None:
        """Crash: every link to it breaks, connects to it fail."""
        sim.state = "down"
        for other in self.sims:
            for node, link in list(other.links.items()):
                if link.target is sim and link.open:
                    link.open = False
                    del other.links[node]
                    if other.state == "up":
                        self.events.append(("link_failed", other, node))
        for link in sim.links.values():
            link.open = False
        sim.links.clear()
        self.pump()

    # -------------------------------------------------------------- views

    def full_mesh(self, sims=None) -> bool:
        sims = [sim for sim in (sims or self.sims)]
        ids = {sim.id for sim in sims}
        for sim in sims:
            nodes = sim.membership.nodes.values()
            if {node.id for node in nodes} != ids:
                return False
            if any(node.flags & (HANDSHAKE | PFAIL | FAIL | NOADDR) for node in nodes):
                return False
            if any(not node.linked for node in sim.membership.peers()):
                return False
        return True


@pytest.fixture
def clock():
    return FakeClock(1_700_000_000_000)


@pytest.fixture
def net(clock):
    return Net(clock)


def mesh(net: Net, count: int) -> list[SimNode]:
    sims = [net.add() for _ in range(count)]
    for left, right in zip(sims, sims[1:]):
        assert left.membership.meet(IP, right.port)
    net.run_until(net.full_mesh, max_ms=10_000)
    net.run(TIMEOUT)     # let every link settle
    assert net.full_mesh()
    return sims


# ------------------------------------------------------------------ MEET

def test_meet_starts_a_handshake_with_a_random_id(net):
    a, b = net.add(), net.add()
    assert a.membership.meet(IP, b.port)
    handshakes = [node for node in a.membership.peers() if node.flags & HANDSHAKE]
    assert len(handshakes) == 1
    node = handshakes[0]
    assert node.flags & MEET
    assert node.id != b.id and len(node.id) == 40
    assert (node.ip, node.port) == (IP, b.port)
    assert a.membership.size == 1          # handshake nodes are not counted


def test_meet_handshake_renames_the_handshake_node_to_the_real_id(net):
    a, b = net.add(), net.add()
    a.membership.meet(IP, b.port)
    (handshake,) = a.membership.peers()
    net.step()                                 # connect, MEET, PONG
    assert a.node(b.id) is handshake
    assert handshake.id == b.id
    assert not handshake.flags & (HANDSHAKE | MEET)
    assert net.delivered["MEET"] == 1
    # b added a for the MEET, as a handshake node of its own, and finishes
    # the handshake by pinging back on its own link.
    (b_handshake,) = b.membership.peers()
    assert b_handshake.flags & HANDSHAKE and not b_handshake.flags & MEET
    assert (b_handshake.ip, b_handshake.port) == (IP, a.port)
    net.step()
    assert b.node(a.id) is b_handshake
    assert not b_handshake.flags & HANDSHAKE
    assert net.full_mesh()


def test_meet_learns_own_address_from_the_peer(net):
    a, b = net.add(), net.add()
    assert b.membership.myself.ip == ""
    a.membership.meet(IP, b.port)
    net.step()
    assert b.membership.myself.ip == IP


def test_meet_refuses_invalid_addresses(net):
    a = net.add()
    assert not a.membership.meet("not-an-ip", 7711)
    assert not a.membership.meet("999.1.1.1", 7711)
    assert not a.membership.meet("", 7711)
    assert not a.membership.meet(IP, 0)
    assert not a.membership.meet(IP, -1)
    assert not a.membership.meet(IP, 65535 - BUS_PORT_OFFSET + 1)
    assert a.membership.peers() == []
    assert a.membership.meet(IP, 65535 - BUS_PORT_OFFSET)
    assert a.membership.meet("::1", 7711)


def test_meet_normalizes_the_address_and_never_duplicates_a_handshake(net):
    a = net.add()
    assert a.membership.meet("0:0:0:0:0:0:0:1", 7711)
    assert a.membership.meet("::1", 7711)
    (node,) = a.membership.peers()
    assert node.ip == "::1"


def test_meet_again_with_a_known_node_adds_no_duplicate(net):
    a, b = mesh(net, 2)
    a.membership.meet(IP, b.port)
    net.run(2 * TIMEOUT)
    assert [node.id for node in a.membership.peers()] == [b.id]
    assert net.full_mesh()


def test_handshake_with_nobody_is_dropped_after_the_handshake_timeout(net):
    a = net.add()
    a.membership.meet(IP, 9999)            # nobody listens there
    net.run(TIMEOUT - TICK)
    assert len(a.membership.peers()) == 1
    net.run(3 * TICK)
    assert a.membership.peers() == []


# ------------------------------------------------------------------ gossip

@pytest.mark.parametrize("count", [2, 3, 4, 5])
def test_a_chain_of_meets_converges_to_a_full_mesh_through_gossip(net, count):
    sims = [net.add() for _ in range(count)]
    for left, right in zip(sims, sims[1:]):
        left.membership.meet(IP, right.port)
    took = net.run_until(net.full_mesh, max_ms=10_000)
    assert took <= 5_000
    for sim in sims:
        assert sim.membership.size == count
        assert len(sim.membership.reachable) == count - 1
        assert sim.known_ids() == {other.id for other in sims}


def test_meets_to_one_hub_converge_to_a_full_mesh(net):
    hub, *spokes = [net.add() for _ in range(5)]
    for spoke in spokes:
        spoke.membership.meet(IP, hub.port)
    net.run_until(net.full_mesh, max_ms=10_000)


def test_gossip_from_an_unknown_sender_is_ignored(net):
    a = net.add()
    stranger = msg.Header(msg.PING, random_node_id(), 7799, 0)
    body = msg.Heartbeat([msg.Gossip(random_node_id(), IP, 7798, 0)])
    a.membership.on_heartbeat(None, "link", IP, IP, stranger, body)
    assert a.membership.peers() == []
    (reply,) = [e for e in a.membership.take_effects() if type(e) is ReplyOn]
    assert reply.kind == msg.PONG and reply.link == "link"


def test_ping_is_answered_with_pong_on_the_same_link(net):
    a = net.add()
    a.membership.on_heartbeat(None, "the-link", IP, IP,
                              msg.Header(msg.PING, random_node_id(), 7799, 0), msg.Heartbeat())
    replies = [e for e in a.membership.take_effects() if type(e) is ReplyOn]
    assert [(r.link, r.kind) for r in replies] == [("the-link", msg.PONG)]


def test_gossip_never_includes_handshake_nodes_or_myself(net):
    a, b, c = mesh(net, 3)
    a.membership.meet(IP, 9999)
    body = a.membership._heartbeat_body()
    ids = {entry.node_id for entry in body.gossip}
    assert ids == {b.id, c.id}


# ------------------------------------------------------------------ failure detection

def test_a_silent_node_goes_pfail_after_node_timeout(net):
    a, b, c = mesh(net, 3)
    net.mute(c)
    took = net.run_until(lambda: a.flags_of(c) & (PFAIL | FAIL), max_ms=5 * TIMEOUT)
    # Never before node_timeout of silence; at most one ping period
    # (timeout/2) plus the timeout plus a couple of ticks later.
    assert took > TIMEOUT
    assert took <= TIMEOUT + TIMEOUT // 2 + 3 * TICK
    assert c.id not in {node.id for node in a.membership.reachable}


def test_a_silent_node_goes_fail_once_a_majority_reports_it(net):
    a, b, c = mesh(net, 3)
    net.mute(c)
    net.run_until(lambda: a.flags_of(c) & FAIL and b.flags_of(c) & FAIL,
                  max_ms=4 * TIMEOUT)
    assert net.delivered["FAIL"] >= 1
    for sim in (a, b):
        node = sim.node(c.id)
        assert not node.flags & PFAIL
        assert node.fail_time > 0
        assert sim.membership.size == 3     # a failing node still counts


def test_a_killed_node_goes_fail_everywhere(net):
    sims = mesh(net, 5)
    victim = sims[2]
    net.kill(victim)
    others = [sim for sim in sims if sim is not victim]
    net.run_until(lambda: all(sim.flags_of(victim) & FAIL for sim in others),
                  max_ms=4 * TIMEOUT)


def test_pfail_turns_fail_only_with_a_majority_of_reports(net):
    sims = mesh(net, 5)
    me, one, two, _, victim = sims
    node = me.node(victim.id)
    node.flags |= PFAIL
    me.membership.take_effects()

    def report_from(reporter):
        header = msg.Header(msg.PING, reporter.id, reporter.port, 0)
        entry = msg.Gossip(victim.id, IP, victim.port, PFAIL)
        me.membership.on_heartbeat(None, "link", IP, IP, header, msg.Heartbeat([entry]))
        return me.membership.take_effects()

    effects = report_from(one)               # 1 report + me = 2 < 5 // 2 + 1
    assert node.flags & PFAIL and not node.flags & FAIL
    assert not [e for e in effects if type(e) is Send]
    effects = report_from(one)               # the same reporter twice is one report
    assert not node.flags & FAIL
    effects = report_from(two)               # 2 reports + me = 3: majority
    assert node.flags & FAIL and not node.flags & PFAIL
    fails = [e for e in effects if type(e) is Send and e.kind == msg.FAIL]
    assert {e.node.id for e in fails} >= {one.id, two.id, sims[3].id}
    assert all(e.body == msg.Fail(victim.id) for e in fails)


def test_failure_reports_need_our_own_pfail(net):
    me, one, two, three, victim = mesh(net, 5)
    node = me.node(victim.id)
    for reporter in (one, two, three):
        header = msg.Header(msg.PING, reporter.id, reporter.port, 0)
        entry = msg.Gossip(victim.id, IP, victim.port, PFAIL)
        me.membership.on_heartbeat(None, "link", IP, IP, header, msg.Heartbeat([entry]))
    assert not node.flags & (PFAIL | FAIL)
    assert len(node.fail_reports) == 3


def test_failure_reports_expire(net, clock):
    me, one, two, _, victim = mesh(net, 5)
    node = me.node(victim.id)

    def report_from(reporter):
        header = msg.Header(msg.PING, reporter.id, reporter.port, 0)
        entry = msg.Gossip(victim.id, IP, victim.port, PFAIL)
        me.membership.on_heartbeat(None, "link", IP, IP, header, msg.Heartbeat([entry]))

    report_from(one)
    clock.advance(2 * TIMEOUT + 1)           # validity: 2 x node timeout
    node.flags |= PFAIL
    report_from(two)
    assert not node.flags & FAIL
    assert set(node.fail_reports) == {two.id}


def test_a_report_that_the_node_is_fine_withdraws_the_reporter(net):
    me, one, _, _, victim = mesh(net, 5)
    node = me.node(victim.id)
    header = msg.Header(msg.PING, one.id, one.port, 0)
    me.membership.on_heartbeat(None, "l", IP, IP, header,
                               msg.Heartbeat([msg.Gossip(victim.id, IP, victim.port, PFAIL)]))
    assert one.id in node.fail_reports
    me.membership.on_heartbeat(None, "l", IP, IP, header,
                               msg.Heartbeat([msg.Gossip(victim.id, IP, victim.port, 0)]))
    assert one.id not in node.fail_reports


def test_a_fail_message_makes_others_flag_the_node_at_once(net):
    a, b, c, d = mesh(net, 4)
    assert not a.flags_of(d) & (PFAIL | FAIL)
    a.membership.on_fail(msg.Header(msg.FAIL, b.id, b.port, 0), msg.Fail(d.id))
    node = a.node(d.id)
    assert node.flags & FAIL and not node.flags & PFAIL
    assert d.id not in {peer.id for peer in a.membership.reachable}
    assert any(type(e) is SaveConfig for e in a.membership.take_effects())


def test_a_fail_message_from_an_unknown_sender_is_ignored(net):
    a, b, c = mesh(net, 3)
    a.membership.on_fail(msg.Header(msg.FAIL, random_node_id(), 1, 0), msg.Fail(c.id))
    assert not a.flags_of(c) & FAIL


def test_a_fail_message_about_myself_is_ignored(net):
    a, b = mesh(net, 2)
    a.membership.on_fail(msg.Header(msg.FAIL, b.id, b.port, 0), msg.Fail(a.id))
    assert a.membership.myself.flags == MYSELF


def test_a_fail_message_reaches_every_peer_over_the_network(net):
    sims = mesh(net, 5)
    victim = sims[4]
    net.mute(victim)
    # As soon as one node flags FAIL, its FAIL message reaches all the
    # others within the same network turn.
    net.run_until(lambda: any(sim.flags_of(victim) & FAIL for sim in sims[:4]),
                  max_ms=4 * TIMEOUT)
    assert all(sim.flags_of(victim) & FAIL for sim in sims[:4])


def test_a_failed_node_is_cleared_when_it_answers_again(net):
    a, b, c = mesh(net, 3)
    net.mute(c)
    net.run_until(lambda: a.flags_of(c) & FAIL and b.flags_of(c) & FAIL, max_ms=4 * TIMEOUT)
    net.unmute(c)
    took = net.run_until(lambda: not a.flags_of(c) & (PFAIL | FAIL)
                         and not b.flags_of(c) & (PFAIL | FAIL), max_ms=4 * TIMEOUT)
    assert took <= 2 * TIMEOUT + 3 * TICK
    net.run_until(net.full_mesh, max_ms=4 * TIMEOUT)


def test_a_pfail_node_is_cleared_when_it_answers_again(net):
    a, b, c = mesh(net, 3)
    net.mute(c)
    net.run_until(lambda: a.flags_of(c) & (PFAIL | FAIL), max_ms=4 * TIMEOUT)
    net.unmute(c)
    net.run_until(lambda: not a.flags_of(c) & (PFAIL | FAIL), max_ms=4 * TIMEOUT)


def test_a_killed_and_restarted_node_rejoins_with_its_records(net):
    a, b, c = mesh(net, 3)
    records = c.membership.records()
    meets = net.delivered["MEET"]
    net.kill(c)
    net.run_until(lambda: a.flags_of(c) & FAIL and b.flags_of(c) & FAIL, max_ms=4 * TIMEOUT)
    # Restart: same port, same ID, peers from its saved records, no MEET.
    net.sims.remove(c)
    revived = net.add(node_id=c.id, port=c.port)
    revived.membership.load_records(records)
    net.run_until(net.full_mesh, max_ms=4 * TIMEOUT)
    assert net.delivered["MEET"] == meets
    assert revived.id == c.id


def test_a_silent_link_is_reconnected(net):
    a, b = mesh(net, 2)
    net.mute(b)
    net.run(2 * TIMEOUT)
    connects = [when for when, node in a.connects if node.id == b.id]
    assert connects, "a never reconnected its silent link to b"


class SteppedClock(FakeClock):
    """One node's wall clock: the shared clock, stepped by `offset_ms`."""

    __slots__ = ("base", "offset_ms")

    def __init__(self, base: FakeClock, offset_ms: int) -> None:
        super().__init__()
        self.base, self.offset_ms = base, offset_ms

    def now_ms(self) -> int:
        return self.base.now_ms() + self.offset_ms


def test_a_ping_lost_after_the_clock_stepped_back_is_sent_again(net, clock):
    """A wall clock stepped back (the chaos clock fault; NTP) makes a fresh
    PING look older than the last PONG. A link waiting on such a PING whose
    PONG was lost counted as not waiting: no PING was sent again, the link
    was never reconnected, and a peer flagged FAIL stayed FAIL while
    connected (the chaos matrix's all-kinds rows: `fail connected` a minute
    after the heal, on a node whose clock had jumped back)."""
    a, b, c = mesh(net, 3)
    a.membership.clock = SteppedClock(clock, -60_000)
    node = a.node(c.id)
    node.ping_sent = a.membership.clock.now_ms()      # a PING whose PONG was lost
    node.flags |= FAIL                                # as the others reported it
    net.run_until(lambda: not a.flags_of(c) & (PFAIL | FAIL), max_ms=4 * TIMEOUT)


# ------------------------------------------------------------------ LEAVING

def test_leaving_spreads_through_message_headers(net):
    a, b, c = mesh(net, 3)
    a.membership.set_leaving(True)
    assert a.membership.leaving
    assert a.membership.header(msg.PING).flags & LEAVING
    net.run_until(lambda: b.flags_of(a) & LEAVING and c.flags_of(a) & LEAVING,
                  max_ms=2 * TIMEOUT)
    for sim in (b, c):
        node = sim.node(a.id)
        assert node.priority == 100
        assert node not in sim.membership.reachable
        assert sim.membership.size == 3
    a.membership.set_leaving(False)
    net.run_until(lambda: not b.flags_of(a) & LEAVING and not c.flags_of(a) & LEAVING,
                  max_ms=2 * TIMEOUT)
    assert b.node(a.id).priority == 1


def test_set_leaving_saves_config_only_on_change(net):
    a = net.add()
    a.membership.set_leaving(True)
    assert any(type(e) is SaveConfig for e in a.membership.take_effects())
    a.membership.set_leaving(True)
    assert not a.membership.take_effects()


# ------------------------------------------------------------------ FORGET

def test_forget_removes_the_node_and_blacklists_it_for_60_seconds(net, clock):
    a, b, c = mesh(net, 3)
    a.membership.forget(a.node(c.id))
    assert c.id not in a.membership.nodes
    assert a.membership.size == 2
    forgot_at = clock.now_ms()
    # b keeps gossiping about c and c keeps pinging a: a must not take it back.
    for _ in range((BLACKLIST_TTL_MS - 2 * TICK) // TICK):
        net.step()
        assert c.id not in a.membership.nodes
        assert not any(node.port == c.port for node in a.membership.peers())
    # Once the blacklist entry expires, gossip brings it back.
    net.run_until(lambda: c.id in a.known_ids(), max_ms=5 * TIMEOUT)
    assert clock.now_ms() - forgot_at >= BLACKLIST_TTL_MS
    net.run_until(net.full_mesh, max_ms=4 * TIMEOUT)


def test_forget_drops_our_link_to_the_node(net):
    a, b = mesh(net, 2)
    node = a.node(b.id)
    a.membership.forget(node)
    effects = a.membership.take_effects()
    assert DropLink(node) in effects
    assert any(type(e) is SaveConfig for e in effects)


def test_forget_removes_failure_reports_by_the_forgotten_node(net):
    a, b, c = mesh(net, 3)
    header = msg.Header(msg.PING, b.id, b.port, 0)
    a.membership.on_heartbeat(None, "l", IP, IP, header,
                              msg.Heartbeat([msg.Gossip(c.id, IP, c.port, PFAIL)]))
    assert b.id in a.node(c.id).fail_reports
    a.membership.forget(a.node(b.id))
    assert b.id not in a.node(c.id).fail_reports


# ------------------------------------------------------------------ RESET

def test_hard_reset_forgets_every_peer_and_takes_the_new_id(net):
    a, b, c = mesh(net, 3)
    old_id = a.id
    new_id = random_node_id()
    a.membership.reset(new_id)
    effects = a.membership.take_effects()
    assert list(a.membership.nodes) == [new_id]
    assert a.membership.myself.id == new_id
    assert a.membership.nodes[new_id] is a.membership.myself
    assert a.membership.size == 1 and a.membership.reachable == []
    assert sum(type(e) is DropLink for e in effects) == 2
    assert any(type(e) is SaveConfig for e in effects)
    net.collect(a)
    # Peers that still ping the old ID get an answer from a different ID:
    # they mark that entry noaddr, as Disque does.
    net.run_until(lambda: b.membership.nodes[old_id].flags & NOADDR
                  and c.membership.nodes[old_id].flags & NOADDR, max_ms=2 * TIMEOUT)
    # a is not re-added by b's or c's pings (they are PINGs, not MEETs).
    assert a.membership.peers() == []


def test_hard_reset_node_can_meet_the_cluster_again_with_its_new_id(net):
    a, b, c = mesh(net, 3)
    new_id = random_node_id()
    a.membership.reset(new_id)
    net.collect(a)
    a.membership.meet(IP, b.port)
    net.run_until(lambda: new_id in b.known_ids() and new_id in c.known_ids()
                  and {b.id, c.id} <= a.known_ids(), max_ms=5 * TIMEOUT)


def test_soft_reset_keeps_the_id(net):
    a, b = mesh(net, 2)
    old_id = a.id
    a.membership.reset(None)
    assert list(a.membership.nodes) == [old_id]
    assert a.membership.myself.id == old_id


# ------------------------------------------------------------------ records

def test_records_round_trip_through_nodes_conf(net, tmp_path, clock):
    a, b, c = mesh(net, 3)
    a.membership.set_leaving(True)
    net.run(TIMEOUT)
    path = str(tmp_path / "nodes.conf")
    nodes_conf.save(path, a.membership.records())
    loaded = nodes_conf.load(path)
    (mine,) = [record for record in loaded if "myself" in record.flags]
    assert mine.node_id == a.id.decode()
    copy = Membership(mine.node_id.encode(), a.port, TIMEOUT, clock)
    copy.load_records(loaded)
    assert copy.myself.flags == MYSELF | LEAVING
    assert copy.myself.ip == IP
    assert {(n.id, n.ip, n.port) for n in copy.nodes.values()} == \
        {(n.id, n.ip, n.port) for n in a.membership.nodes.values()}
    assert copy.size == 3
    for peer in copy.peers():
        assert peer.flags == 0
        assert not peer.linked


@pytest.mark.parametrize("failing", ["fsync", "replace"])
def test_a_failed_nodes_conf_save_raises_and_leaves_no_temporary_file(
        tmp_path, monkeypatch, failing):
    path = tmp_path / "nodes.conf"
    old = [nodes_conf.NodeRecord("a" * 40, IP, 7711, {"myself"})]
    nodes_conf.save(str(path), old)
    saved = path.read_text()

    def disk_full(*args):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(nodes_conf.os, failing, disk_full)
    new = old + [nodes_conf.NodeRecord("b" * 40, IP, 7712, set())]
    with pytest.raises(OSError, match="No space left"):
        nodes_conf.save(str(path), new)
    assert [p.name for p in tmp_path.iterdir()] == ["nodes.conf"]
    assert path.read_text() == saved


def test_records_keep_leaving_flags_of_peers(net, clock):
    a, b, c = mesh(net, 3)
    b.membership.set_leaving(True)
    net.run_until(lambda: a.flags_of(b) & LEAVING, max_ms=2 * TIMEOUT)
    copy = Membership(a.id, a.port, TIMEOUT, clock)
    copy.load_records(a.membership.records())
    assert copy.nodes[b.id].flags & LEAVING
    assert b.id not in {node.id for node in copy.reachable}


def test_records_leave_out_handshake_nodes(net):
    # Disque writes nodes.conf without nodes in handshake (their IDs are
    # random placeholders); a handshake reloaded without its MEET flag
    # would PING instead of MEET and leave the peer unaware of us.
    a, b = mesh(net, 2)
    a.membership.meet(IP, 9999)
    names = {record.node_id for record in a.membership.records()}
    assert names == {a.id.decode(), b.id.decode()}


def test_records_format_matches_cluster_nodes_lines(net):
    a, b = mesh(net, 2)
    lines = {record.line() for record in a.membership.records()}
    assert f"{a.id.decode()} {IP}:{a.port} myself 0 0 connected" in lines
    assert f"{b.id.decode()} {IP}:{b.port} noflags 0 0 connected" in lines


# ------------------------------------------------------------------ reconnects

def test_reconnect_backoff_stays_within_bounds(net):
    a = net.add()
    ghost = net.add()
    a.membership.meet(IP, ghost.port)
    net.run_until(net.full_mesh, max_ms=5 * TIMEOUT)
    net.kill(ghost)
    node = a.node(ghost.id)
    a.connects.clear()
    for _ in range(150):                      # 15 s of failing connects
        net.step()
        assert RECONNECT_MIN_MS <= node.backoff <= RECONNECT_MAX_MS
    times = [when for when, target in a.connects if target is node]
    gaps = [later - earlier for earlier, later in zip(times, times[1:])]
    assert len(times) >= 10
    assert all(RECONNECT_MIN_MS <= gap <= RECONNECT_MAX_MS + TICK for gap in gaps), gaps
    assert gaps[-1] >= RECONNECT_MAX_MS      # backed off to the maximum
    assert gaps == sorted(gaps)              # never faster than before
    assert node.backoff == RECONNECT_MAX_MS


def test_reconnect_backoff_resets_when_the_link_comes_up(net, clock):
    a = net.add()
    node_port = BASE_PORT + 50
    a.membership.meet(IP, node_port)
    (node,) = a.membership.peers()
    for _ in range(5):
        a.membership.link_failed(node)
    assert node.backoff == RECONNECT_MAX_MS
    assert clock.now_ms() < node.next_connect <= clock.now_ms() + RECONNECT_MAX_MS
    a.membership.link_up(node)
    assert node.backoff == RECONNECT_MIN_MS
    assert node.linked


def test_link_failed_starts_the_failure_clock(net, clock):
    a, b = mesh(net, 2)
    node = a.node(b.id)
    assert node.ping_sent == 0
    a.membership.link_failed(node)
    assert node.ping_sent == clock.now_ms()
    clock.advance(TIMEOUT + 1)
    a.membership.tick()
    assert node.flags & PFAIL


def test_a_node_restarted_in_the_middle_of_a_meet_is_not_left_one_sided(net):
    # a saves nodes.conf while its MEET to b is still a handshake, then
    # restarts from that file. Disque never saves handshake nodes, so the
    # MEET is simply forgotten; what must never happen is a knowing b while
    # b never learns of a.
    a, b = net.add(), net.add()
    a.membership.meet(IP, b.port)
    records = a.membership.records()
    net.sims.remove(a)
    revived = net.add(node_id=a.id, port=a.port)
    revived.membership.load_records(records)
    net.run(5 * TIMEOUT)
    assert (b.id in revived.known_ids()) == (revived.id in b.known_ids())


def test_a_late_pong_for_a_handshake_that_timed_out_is_ignored(net, clock):
    # bus.py waits up to CONNECT_TIMEOUT_S (2 s) for a connect, longer than
    # the handshake timeout (1 s here): the connect may complete, and the
    # PONG arrive, after membership deleted the handshake node. Disque frees
    # the link with the node, so nothing more happens; here the late link
    # events must not raise (a KeyError inside data_received) nor resurrect
    # the node.
    a, b = net.add(), net.add()
    a.membership.meet(IP, b.port)
    (handshake,) = a.membership.peers()
    clock.advance(TICK)
    a.membership.tick()
    assert [type(e) for e in a.membership.take_effects()] == [Connect]
    clock.advance(max(TIMEOUT, 1000) + TICK)
    a.membership.tick()                       # the handshake times out
    a.membership.take_effects()
    assert a.membership.peers() == []
    a.membership.link_up(handshake)           # the connect completes late
    a.membership.take_effects()
    pong = b.membership.header(msg.PONG)
    a.membership.on_heartbeat(handshake, "late-link", IP, IP, pong, msg.Heartbeat())
    assert list(a.membership.nodes) == [a.id]


# ------------------------------------------------------------------ start epochs

def epoch_seen(sim: SimNode, other: SimNode) -> int:
    return sim.node(other.id).epoch


def test_every_header_says_the_node_speaks_epoch_and_job_options(net):
    a = net.add()
    assert a.membership.header(msg.PING).flags & SPEAKS_EPOCH
    assert a.membership.header(msg.REPLJOB).flags & SPEAKS_JOB_OPTIONS
    a.membership.set_leaving(True)
    assert a.membership.header(msg.PING).flags == \
        LEAVING | SPEAKS_EPOCH | SPEAKS_JOB_OPTIONS | SPEAKS_PRIORITY | SPEAKS_DEDUP
    # Never in the node's own flags: not gossiped, not in nodes.conf.
    assert not a.membership.myself.flags & (SPEAKS_EPOCH | SPEAKS_JOB_OPTIONS | SPEAKS_PRIORITY
                                            | SPEAKS_DEDUP)


def test_each_capability_bit_names_the_newest_options_block_a_peer_reads():
    assert options_version_read(0) == 0
    assert options_version_read(SPEAKS_EPOCH | SPEAKS_JOB_OPTIONS) == 1
    assert options_version_read(SPEAKS_JOB_OPTIONS | SPEAKS_PRIORITY) == 2
    assert options_version_read(SPEAKS_JOB_OPTIONS | SPEAKS_PRIORITY | SPEAKS_DEDUP) == 3


def test_a_peer_is_known_to_read_job_options_once_its_header_says_so(net):
    a, b = net.add(), net.add()
    old = net.add()
    old.membership.capabilities = SPEAKS_EPOCH      # the version before job options
    for left, right in ((a, b), (a, old)):
        assert left.membership.meet(IP, right.port)
    net.run_until(net.full_mesh, max_ms=10_000)
    assert a.node(b.id).capabilities & SPEAKS_JOB_OPTIONS
    assert not a.node(old.id).capabilities & SPEAKS_JOB_OPTIONS
    assert old.node(a.id).capabilities & SPEAKS_JOB_OPTIONS
    assert all("epoch" not in record.line() for record in a.membership.records())


def test_the_pong_that_ends_a_handshake_tells_what_the_peer_speaks(net):
    # The job core may replicate to a peer as soon as its handshake ends: it
    # must not take the peer for an older version until its next PING.
    a, b = net.add(), net.add()
    assert a.membership.meet(IP, b.port)

    def met():
        node = a.membership.nodes.get(b.id)
        return node is not None and not node.flags & HANDSHAKE
    net.run_until(met, max_ms=10_000)
    assert a.node(b.id).capabilities & SPEAKS_JOB_OPTIONS


def test_each_node_learns_the_epoch_of_the_others_from_the_answers_to_its_pings(net):
    a, b, c = mesh(net, 3)
    for sim in (a, b, c):
        assert {node.id: node.epoch for node in sim.membership.peers()} == {
            other.id: other.membership.epoch for other in (a, b, c) if other is not sim}
        assert sim.membership.epochs() == {node.id: node.epoch
                                           for node in sim.membership.peers()}
    assert net.delivered["EPOCH"] >= net.delivered["MEET"]


def test_a_ping_without_the_bit_gets_a_pong_and_no_epoch(net):
    a = net.add()
    a.membership.meet(IP, 9999)
    link = object()
    header = msg.Header(msg.PING, random_node_id(), 7799, 0)
    a.membership.on_heartbeat(None, link, IP, IP, header, msg.Heartbeat())
    replies = [effect.kind for effect in a.membership.take_effects() if type(effect) is ReplyOn]
    assert replies == [msg.PONG]
    header.flags = SPEAKS_EPOCH | LEAVING
    a.membership.on_heartbeat(None, link, IP, IP, header, msg.Heartbeat())
    replies = [(effect.kind, effect.body) for effect in a.membership.take_effects()
               if type(effect) is ReplyOn]
    assert [kind for kind, _ in replies] == [msg.PONG, msg.EPOCH]
    assert replies[1][1] == msg.Epoch(a.membership.epoch)


def test_an_older_node_is_never_sent_epoch_and_stays_in_the_mesh(net):
    """A rolling upgrade: nodes of the version before EPOCH never get one
    (they would refuse the frame and close the link), the mesh forms, and
    the new nodes know the epochs of each other only."""
    new1, new2 = net.add(), net.add()
    old = net.add(old=True)
    for left, right in ((new1, old), (old, new2)):
        assert left.membership.meet(IP, right.port)
    net.run_until(net.full_mesh, max_ms=10_000)
    net.run(5 * TIMEOUT)
    assert net.full_mesh()
    assert old.refused == []
    assert epoch_seen(new1, new2) == new2.membership.epoch
    assert epoch_seen(new2, new1) == new1.membership.epoch
    assert epoch_seen(new1, old) == epoch_seen(new2, old) == 0
    assert old.id not in new1.membership.epochs()
    # Upgraded in place (same ID and records, restarted): its epoch is learned.
    records = old.membership.records()
    net.kill(old)
    net.sims.remove(old)
    upgraded = net.add(node_id=old.id, port=old.port, epoch=4242)
    upgraded.membership.load_records(records)
    net.run_until(lambda: epoch_seen(new1, upgraded) == epoch_seen(new2, upgraded) == 4242,
                  max_ms=4 * TIMEOUT)


def test_a_restarted_node_is_seen_with_its_new_epoch_and_an_unchanged_one_stays(net):
    a, b, c = mesh(net, 3)
    before = c.membership.epoch
    for epoch in (before, before + 1):     # with its AOF (kept), then without (new)
        records = c.membership.records()
        net.kill(c)
        net.sims.remove(c)
        c = net.add(node_id=c.id, port=c.port, epoch=epoch)
        c.membership.load_records(records)
        net.run_until(lambda: epoch_seen(a, c) == epoch_seen(b, c) == epoch, max_ms=4 * TIMEOUT)
    assert a.membership.on_epoch(msg.Header(msg.EPOCH, c.id, c.port, 0), msg.Epoch(7)) is True
    assert a.membership.on_epoch(msg.Header(msg.EPOCH, c.id, c.port, 0), msg.Epoch(7)) is False
    stranger = random_node_id()
    assert a.membership.on_epoch(msg.Header(msg.EPOCH, stranger, 1, 0), msg.Epoch(7)) is False


def test_a_new_node_learns_from_its_peers_the_epoch_of_a_node_still_down(net):
    """A node that starts while another is down cannot ask that one its
    epoch; it takes the one its peers heard as a hint, so that the node's
    return with a new epoch (restarted empty) is seen as such."""
    a, b, c = mesh(net, 3)
    c_epoch = c.membership.epoch
    records = {sim: sim.membership.records() for sim in (b, c)}
    net.kill(c)
    net.kill(b)
    net.sims.remove(b)
    b2 = net.add(node_id=b.id, port=b.port, epoch=777)          # b back, empty
    b2.membership.load_records(records[b])
    net.run_until(lambda: b2.node(a.id).linked and epoch_seen(b2, a) != 0, max_ms=4 * TIMEOUT)
    assert b2.node(c.id).epoch == 0                              # never heard from c...
    assert b2.node(c.id).epoch_hint == c_epoch                   # ... but a did
    assert b2.membership.epochs()[c.id] == c_epoch
    assert net.delivered["EPOCH"] > 0
    net.sims.remove(c)
    c2 = net.add(node_id=c.id, port=c.port, epoch=c_epoch + 1)   # c back, empty too
    c2.membership.load_records(records[c])
    net.run_until(lambda: epoch_seen(b2, c2) == c_epoch + 1, max_ms=4 * TIMEOUT)
    assert b2.membership.epochs()[c.id] == c_epoch + 1           # a change b2 can see
    # Asked once per peer: later PINGs no longer ask.
    assert all(node.epochs_asked for node in b2.membership.peers())
    b2.membership._send_heartbeat(b2.node(a.id), msg.PING)
    (ping,) = [effect for effect in b2.membership.take_effects() if type(effect) is Send]
    assert not ping.mflags & msg.MSG_WANT_EPOCHS
    fresh = net.add()
    fresh.membership.meet(IP, a.port)
    fresh.membership.tick()
    (meet,) = [effect for effect in fresh.membership.take_effects() if type(effect) is Connect]
    fresh.membership.link_up(meet.node)
    (hello,) = [effect for effect in fresh.membership.take_effects() if type(effect) is Send]
    assert hello.kind == msg.MEET and hello.mflags & msg.MSG_WANT_EPOCHS


def test_nodes_conf_keeps_the_start_epoch_in_a_vars_line(tmp_path):
    path = str(tmp_path / "nodes.conf")
    records = [nodes_conf.NodeRecord("a" * 40, IP, 7711, {"myself"}),
               nodes_conf.NodeRecord("b" * 40, IP, 7712, set())]
    nodes_conf.save(path, records, variables={"start-epoch": "12345"})
    assert nodes_conf.load(path) == records
    assert nodes_conf.load_vars(path) == {"start-epoch": "12345"}
    assert open(path).read().splitlines()[-1].startswith("vars start-epoch 12345 crc32 ")
    nodes_conf.save(path, records)
    assert nodes_conf.load_vars(path) == {}
    assert nodes_conf.load_vars(str(tmp_path / "missing")) == {}


def test_nodes_conf_refuses_any_bit_flipped_before_its_checksum(tmp_path):
    """A flipped bit that still parses (another node ID, port or epoch)
    must not be read as the truth: the checksum catches every one."""
    path = tmp_path / "nodes.conf"
    records = [nodes_conf.NodeRecord("a" * 40, IP, 7711, {"myself"}),
               nodes_conf.NodeRecord("b" * 40, IP, 7712, set())]
    nodes_conf.save(str(path), records, variables={"start-epoch": "12345"})
    good = path.read_bytes()
    covered = good.rindex(b" crc32 ")
    for offset in range(covered):
        for bit in (0, 5):
            path.write_bytes(good[:offset] + bytes([good[offset] ^ (1 << bit)])
                             + good[offset + 1:])
            with pytest.raises(nodes_conf.NodesConfError, match="corrupted cluster config"):
                nodes_conf.load(str(path))


def test_nodes_conf_without_a_checksum_loads_as_disque_wrote_it(tmp_path):
    path = tmp_path / "nodes.conf"
    path.write_text(f"{'a' * 40} {IP}:7711 myself 0 0 connected\n"
                    f"{'b' * 40} {IP}:7712 master 0 0 connected\n"
                    "vars currentEpoch 0 lastVoteEpoch 0\n")
    assert [r.node_id for r in nodes_conf.load(str(path))] == ["a" * 40, "b" * 40]
