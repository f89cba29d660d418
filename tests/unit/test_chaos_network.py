"""The chaos checker's network faults, without namespaces: the partition
shapes keep their promises, the nftables text is what the faults mean (and
nft itself accepts it, where nft can be asked), the kinds load and remove
one table per fault through a fake lab, the relay parses its commands and
keeps a stream's order, and the run puts nodes in namespaces only when a
fault needs it."""

from __future__ import annotations

import asyncio
import ipaddress
import itertools
import os
import random
import shutil
import subprocess

import pytest

from disque_py.tools.chaos import netns
from disque_py.tools.chaos.faults import FaultInjector, FaultPlan
from disque_py.tools.chaos.faults import shapes
from disque_py.tools.chaos.faults.base import CLUSTER, back_kinds
from disque_py.tools.chaos.faults.network import (LONGER_THAN_TIMEOUT, SHORTER_THAN_TIMEOUT,
                                                  around_node_timeout)
from disque_py.tools.chaos.nft_rules import (block_table, loss_table, redirect_table,
                                             reset_table)
from disque_py.tools.chaos.nodes import UP
from disque_py.tools.chaos.relay import Relay
from disque_py.tools.chaos.report import Report
from disque_py.tools.chaos.run import ChaosOptions

SEEDS = range(40)
NODE_COUNTS = range(2, 10)


def _all(shape: str):
    """Every (nodes, partition) of a shape over NODE_COUNTS x SEEDS that it can make."""
    for nodes, seed in itertools.product(NODE_COUNTS, SEEDS):
        if shape in shapes.shapes_for(nodes):
            yield nodes, shapes.SHAPES[shape](nodes, random.Random(seed))


def _components(partition: shapes.Partition) -> set[frozenset[int]]:
    return set(partition.views().values())


def test_every_shape_cuts_pairs_of_distinct_nodes_both_ways():
    for shape in shapes.SHAPES:
        for nodes, partition in _all(shape):
            assert partition.blocked, (shape, nodes)
            for a, b in partition.blocked:
                assert 0 <= a < b < nodes
                assert b in partition.cut_from(a) and a in partition.cut_from(b)
            assert all(node in view for node, view in partition.views().items())


def test_isolated_and_halves_split_the_nodes_into_two_sides():
    sizes = {"isolated": lambda n: [1, n - 1], "halves": lambda n: [n // 2, n - n // 2]}
    for shape, expected in sizes.items():
        for nodes, partition in _all(shape):
            sides = _components(partition)           # each node sees exactly its side
            assert len(sides) == 2 and set().union(*sides) == set(range(nodes))
            named, shown = partition.text.split()
            assert named == shape
            shown_sides = shown.split("|")
            assert set(shown_sides) == {shapes._side(side) for side in sides}
            assert [side.count(",") + 1 for side in shown_sides] == expected(nodes)


def test_in_a_majorities_ring_each_node_sees_a_majority_and_no_two_the_same():
    for nodes, partition in _all("ring"):
        views = partition.views()
        assert all(len(view) >= shapes.majority(nodes) for view in views.values()), views
        assert len(set(views.values())) == nodes, views
        for node, view in views.items():
            assert f"{node}:{shapes._side(view)}" in partition.text


def test_a_bridge_node_reaches_both_halves_which_cannot_reach_each_other():
    for nodes, partition in _all("bridge"):
        views = partition.views()
        middles = [node for node, view in views.items() if len(view) == nodes]
        assert len(middles) == 1, views
        middle = middles[0]
        sides = {view - {middle} for node, view in views.items() if node != middle}
        assert len(sides) == 2 and all(sides), views
        one, other = sides
        assert not one & other and one | other == set(range(nodes)) - {middle}
        assert partition.text.startswith(f"bridge {middle} between ")


def test_shapes_offered_are_those_the_node_count_allows():
    assert shapes.shapes_for(2) == ["isolated", "halves"]
    assert shapes.shapes_for(5) == ["isolated", "halves", "ring", "bridge"]
    drawn = {shapes.draw(5, random.Random(seed)).shape for seed in range(40)}
    assert drawn == set(shapes.SHAPES)


def test_durations_fall_on_both_sides_of_the_node_timeout():
    rng = random.Random(1)
    durations = [around_node_timeout(rng, 2.0) for _ in range(200)]
    assert any(d < 2.0 for d in durations) and any(d > 2.0 for d in durations)
    assert min(durations) >= SHORTER_THAN_TIMEOUT[0] * 2.0
    assert max(durations) <= LONGER_THAN_TIMEOUT[1] * 2.0


# ------------------------------------------------------------------ rule text

PEERS = ["10.240.0.3", "10.240.0.5"]


def test_a_partition_table_drops_everything_to_and_from_the_peers():
    text = block_table("dqc_partition_1", PEERS)
    assert text.startswith("table inet dqc_partition_1 {\n")
    assert "type filter hook input priority 0; policy accept;\n" \
           "    ip saddr { 10.240.0.3, 10.240.0.5 } drop" in text
    assert "type filter hook output priority 0; policy accept;\n" \
           "    ip daddr { 10.240.0.3, 10.240.0.5 } drop" in text


def test_loss_and_reset_tables_draw_per_packet():
    assert "ip daddr { 10.240.0.3, 10.240.0.5 } numgen random mod 100 < 25 drop" \
        in loss_table("t", PEERS, 25)
    text = reset_table("t", PEERS, 60, 7)
    assert "tcp flags & (syn | ack) == syn numgen random mod 100 < 60 reject with tcp reset" \
        in text
    assert "meta l4proto tcp numgen random mod 1000 < 7 reject with tcp reset" in text
    assert "hook input" in text and "hook output" not in text


def test_the_redirect_spares_the_relays_own_connections():
    text = redirect_table("dqc_relay", [("10.240.0.3", 17001), ("10.240.0.4", 17002)],
                          41000, 0x6471)
    assert text.startswith("table ip dqc_relay {")
    assert "type nat hook output priority -100" in text
    assert ("meta mark != 0x6471 ip daddr . tcp dport { 10.240.0.3 . 17001, "
            "10.240.0.4 . 17002 } redirect to :41000") in text


@pytest.mark.skipif(shutil.which("nft") is None or os.geteuid() != 0,
                    reason="nft -c needs nft (nftables) and root")
def test_nft_accepts_every_table_we_write():
    scripts = [block_table("dqc_t1", PEERS), loss_table("dqc_t2", PEERS, 10),
               reset_table("dqc_t3", PEERS, 50, 5),
               redirect_table("dqc_t4", [("10.240.0.3", 17001)], 41000, 0x6471)]
    for script in scripts:       # -c: checked by the kernel, never committed
        done = subprocess.run(["nft", "-c", "-f", "-"], input=script, capture_output=True,
                              text=True, timeout=30)
        assert done.returncode == 0, (script, done.stderr)


# ------------------------------------------------------------------ the kinds

class FakeRelay:
    def __init__(self) -> None:
        self.delays: dict[str, tuple[int, int]] = {}

    def set_delay(self, peer: str, delay_ms: int, jitter_ms: int) -> None:
        self.delays[peer] = (delay_ms, jitter_ms)


class FakeLab:
    """The namespaces as the kinds use them: tables per node, relays."""

    def __init__(self, nodes: int) -> None:
        self.tables: dict[int, dict[str, str]] = {node: {} for node in range(nodes)}
        self.relays = [FakeRelay() for _ in range(nodes)]

    def address(self, index: int) -> str:
        return f"10.240.0.{index + 2}"

    def apply(self, index: int, script: str) -> None:
        name = script.split()[2]
        self.tables[index][name] = script

    def delete_table(self, index: int, family: str, name: str) -> None:
        self.tables[index].pop(name, None)

    def relay(self, index: int) -> FakeRelay:
        return self.relays[index]


class Node:
    def __init__(self, index: int) -> None:
        self.index, self.name, self.state = index, f"node{index}", UP

    def check_exit(self):
        return None


def _injector(kinds: tuple[str, ...], nodes: int = 5, seed: int = 1):
    lab = FakeLab(nodes)
    plan = FaultPlan(2, 1.0, kinds, node_timeout_s=2.0, network=lab)
    return FaultInjector([Node(i) for i in range(nodes)], plan, random.Random(seed)), lab


def test_a_partition_loads_one_table_per_cut_node_and_its_heal_removes_them():
    for seed in range(20):
        injector, lab = _injector(("partition",), seed=seed)
        injector.inject(0.0)
        (harm,) = injector.harms
        assert not harm.takes_down and harm.nodes == () and injector.down() == set()
        event = injector.events[-1]
        assert event.kind == "partition" and event.node == CLUSTER
        shape = event.detail.split()[0]
        assert shape in shapes.SHAPES
        for node, tables in lab.tables.items():
            for script in tables.values():
                assert "drop" in script and lab.address(node) not in script
        assert any(lab.tables.values())
        injector.inject(0.0)                       # one partition at a time
        assert len(injector.harms) == 1
        injector.recover_due(float("inf"))         # every harm due: what recover_all does
        assert not any(lab.tables.values()) and not injector.harms
        assert injector.events[-1].kind == "partition-heal"


def test_netem_loads_loss_or_resets_or_sets_delays_and_undoes_them():
    effects = set()
    for seed in range(30):
        injector, lab = _injector(("netem",), seed=seed)
        injector.inject(0.0)
        detail = injector.events[-1].detail
        effect = detail.split()[0]
        effects.add(effect)
        if effect == "delay":
            delays = [d for relay in lab.relays for d in relay.delays.values()]
            assert delays and all(delay > 0 for delay, _ in delays)
        else:
            assert any(lab.tables.values())
        injector.recover_due(float("inf"))         # every harm due: what recover_all does
        assert not any(lab.tables.values())
        assert all(d == (0, 0) for relay in lab.relays for d in relay.delays.values())
        assert "<->" in detail
    assert effects == {"loss", "reset", "delay"}


def test_network_heals_bring_no_node_back():
    """A node killed during a partition stays down when the partition heals."""
    assert "partition-heal" not in back_kinds() and "netem-heal" not in back_kinds()
    assert "restart" in back_kinds()


# ------------------------------------------------------------------ the relay

def test_the_relay_reads_delays_and_holds_each_peer_for_its_own():
    relay = Relay(mark=1, seed=3)
    relay.command("delay 10.240.0.3 400 100\n")
    relay.command("nonsense\n")
    assert relay.hold_for("10.240.0.4") == 0.0
    holds = [relay.hold_for("10.240.0.3") for _ in range(100)]
    assert all(0.3 <= hold <= 0.5 for hold in holds) and len(set(holds)) > 1
    relay.command("delay 10.240.0.3 0 0")
    assert relay.hold_for("10.240.0.3") == 0.0


class Collected:
    """A StreamWriter's write side, collecting."""

    def __init__(self) -> None:
        self.data = b""

    def write(self, data: bytes) -> None:
        self.data += data

    async def drain(self) -> None:
        pass


def test_the_relay_copies_a_stream_whole_and_in_order():
    async def copy() -> bytes:
        relay = Relay(mark=1, seed=3)
        reader = asyncio.StreamReader()
        for number in range(50):
            reader.feed_data(f"{number},".encode())
        reader.feed_eof()
        writer = Collected()
        await relay._copy(reader, writer, "10.240.0.3")
        return writer.data

    assert asyncio.run(copy()) == "".join(f"{n}," for n in range(50)).encode()


# ------------------------------------------------------------------ the run

def test_namespaces_only_when_a_fault_needs_them_or_when_asked():
    assert not ChaosOptions(faults=("kill", "pause")).uses_network()
    assert ChaosOptions(faults=("kill", "partition")).uses_network()
    assert ChaosOptions(faults=("netem",)).uses_network()
    assert ChaosOptions(faults=("kill",), netns=True).uses_network()
    with pytest.raises(ValueError, match="partition need the nodes in network namespaces"):
        ChaosOptions(faults=("partition",), netns=False).uses_network()


def test_a_free_subnet_overlaps_nothing_in_use():
    used = [ipaddress.ip_network("10.240.0.0/13"), ipaddress.ip_network("10.248.0.0/14"),
            ipaddress.ip_network("10.252.0.0/15"), ipaddress.ip_network("10.254.0.0/16")]
    subnet = netns.free_subnet(used, random.Random(1))
    assert subnet.subnet_of(netns.SUBNETS) and subnet.prefixlen == netns.PREFIX
    assert not any(subnet.overlaps(network) for network in used)
    assert str(subnet).startswith("10.255.")
    with pytest.raises(netns.NetworkUnavailable, match="in use"):
        netns.free_subnet([netns.SUBNETS], random.Random(1))


def test_without_root_or_tools_the_message_says_why_and_what_to_do(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(netns.NetworkUnavailable, match="needs root.*sudo.*leave partition"):
        netns.preflight()
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(shutil, "which", lambda name: None if name == "nft" else "/bin/x")
    with pytest.raises(netns.NetworkUnavailable, match="apt-get install nftables"):
        netns.preflight()


def test_the_report_counts_network_faults_by_shape_and_effect():
    faults = {"partition": 3, "partition:halves": 2, "partition:ring": 1, "netem": 1,
              "netem:delay": 1, "kill": 0}
    report = Report(1, {}, "/tmp/x", {}, {}, faults, [], [], [], [])
    assert report._network_faults() == [
        "network faults: 3 partition (2 halves, 1 ring), 1 netem (1 delay)"]
    assert Report(1, {}, "/tmp/x", {}, {}, {"kill": 2}, [], [], [], [])._network_faults() == []
