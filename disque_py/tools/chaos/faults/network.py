"""Faults of the network between the nodes: partitions, and slow or lossy links.

Both need the nodes in network namespaces (netns.py; the run makes them when
one of these kinds is asked for) and work with nftables tables loaded into
the nodes' namespaces (nft_rules.py): one table per fault, deleted whole when
it heals, so the rules of two faults never mix. Their traffic rules match
node addresses only, so the checker's clients reach every node throughout:
producers and consumers keep writing, reading and acking on every side of a
partition, which is what splits a job's copies and acks between sides (Jepsen
binds clients to nodes, so its partitions cut clients off too; here a
client cut off would only stop adding, not test the cluster more). Neither
kind takes a node down (max_down counts processes killed or paused, and a
partition loses no copy) nor loses data. One partition and one netem fault
at most at a time (a second draw while one lasts does nothing); both heal
when due, and at recover_all.

  partition  a shape from shapes.py for a duration drawn around the
             cluster's node timeout, half shorter (the nodes may not even
             flag each other as failing) and half longer (they do, and the
             sides work apart); every packet between the sides is dropped,
             both ways, bus and client ports alike
  netem      on the links of one node, or one link between two nodes, one of:
             loss   P% of the packets each way dropped at random (independent
                    draws: no bursts, no corruption, no reordering)
             reset  a share of connection attempts refused, and a share of
                    TCP packets answered, with a TCP reset
             delay  the delaying relay (relay.py) holds the bus traffic of
                    those links for a delay with jitter, each way (a stream
                    held, never reordered: no packet-level timing, no
                    bandwidth limit; clients' traffic is not delayed)
"""

from __future__ import annotations

from disque_py.tools.chaos.faults import shapes
from disque_py.tools.chaos.faults.base import CLUSTER, FaultKind, Harm, register
from disque_py.tools.chaos.netns import NetworkUnavailable
from disque_py.tools.chaos.nft_rules import (FILTER_FAMILY, block_table, loss_table,
                                             reset_table)

# Durations as shares of the node timeout: half the faults shorter, half longer.
SHORTER_THAN_TIMEOUT = (0.3, 0.9)
LONGER_THAN_TIMEOUT = (1.2, 8.0)
LOSS_PERCENT = (5, 40)
RESET_CONNECT_PERCENT = (20, 100)
RESET_PACKET_PERMILLE = (1, 20)
DELAY_OF_TIMEOUT = (0.02, 0.5)        # one way: the round trip is twice that
JITTER_OF_DELAY = 0.5
NETEM_EFFECTS = ("loss", "reset", "delay")


def around_node_timeout(rng, node_timeout_s: float) -> float:
    low, high = rng.choice((SHORTER_THAN_TIMEOUT, LONGER_THAN_TIMEOUT))
    return rng.uniform(low, high) * node_timeout_s


class NetworkFault(FaultKind):
    """What partition and netem share: the lab, a table per fault, one at a time."""

    takes_down = False
    needs_network = True

    def __init__(self, injector) -> None:
        super().__init__(injector)
        self.active = False
        self.made = 0

    @property
    def lab(self):
        return self.injector.plan.network

    def table_name(self) -> str:
        self.made += 1
        return f"dqc_{self.name}_{self.made}"

    def load(self, name: str, scripts: dict[int, str]) -> None:
        """One table per node; if one fails, those loaded go again."""
        try:
            for node, script in scripts.items():
                self.lab.apply(node, script)
        except NetworkUnavailable:
            self.unload(name, scripts)
            raise

    def unload(self, name: str, nodes) -> bool:
        try:
            for node in nodes:
                self.lab.delete_table(node, FILTER_FAMILY, name)
        except NetworkUnavailable:
            return False        # tried again later (the injector's START_RETRY_S)
        return True

    def harm(self, now: float, detail: str, undo) -> Harm:
        """Records the fault and returns its Harm; its heal runs `undo` (True once done)."""
        duration = around_node_timeout(self.injector.rng, self.injector.plan.node_timeout_s)
        self.active = True
        self.injector.record(self.name, CLUSTER, f"{detail} for {duration:.1f}s")

        def heal() -> bool:
            if not undo():
                return False
            self.active = False
            self.injector.record(self.heal_name, CLUSTER, detail)
            return True

        return Harm(self.name, (), now + duration, heal, takes_down=False)


@register
class Partition(NetworkFault):
    name = "partition"
    heal_name = "partition-heal"

    def inject(self, now: float) -> Harm | None:
        if self.active:
            return None
        partition = shapes.draw(len(self.injector.nodes), self.injector.rng)
        name = self.table_name()
        scripts = {node: block_table(name, [self.lab.address(peer) for peer in cut])
                   for node in range(partition.nodes)
                   for cut in [partition.cut_from(node)] if cut}
        self.load(name, scripts)
        return self.harm(now, partition.text, lambda: self.unload(name, scripts))


@register
class Netem(NetworkFault):
    name = "netem"
    heal_name = "netem-heal"
    needs_relays = True

    def inject(self, now: float) -> Harm | None:
        if self.active:
            return None
        links, where = self._links()
        effect = self.injector.rng.choice(NETEM_EFFECTS)
        detail, undo = getattr(self, f"_{effect}")(links)
        return self.harm(now, f"{detail} on {where}", undo)

    def _links(self) -> tuple[dict[int, list[int]], str]:
        """Node -> the peers whose links suffer (symmetric), and how to say it."""
        rng, count = self.injector.rng, len(self.injector.nodes)
        if rng.random() < 0.5:
            node = rng.randrange(count)
            others = [peer for peer in range(count) if peer != node]
            links = {node: others, **{peer: [node] for peer in others}}
            return links, f"node{node}<->all"
        a, b = rng.sample(range(count), 2)
        return {a: [b], b: [a]}, f"node{a}<->node{b}"

    def _addresses(self, peers: list[int]) -> list[str]:
        return [self.lab.address(peer) for peer in peers]

    def _loss(self, links):
        percent = self.injector.rng.randint(*LOSS_PERCENT)
        name = self.table_name()
        scripts = {node: loss_table(name, self._addresses(peers), percent)
                   for node, peers in links.items()}
        self.load(name, scripts)
        return f"loss {percent}%", lambda: self.unload(name, scripts)

    def _reset(self, links):
        rng = self.injector.rng
        connects, packets = rng.randint(*RESET_CONNECT_PERCENT), rng.randint(*RESET_PACKET_PERMILLE)
        name = self.table_name()
        scripts = {node: reset_table(name, self._addresses(peers), connects, packets)
                   for node, peers in links.items()}
        self.load(name, scripts)
        return (f"reset {connects}% of connections, {packets}/1000 of packets",
                lambda: self.unload(name, scripts))

    def _delay(self, links):
        rng = self.injector.rng
        delay_ms = int(rng.uniform(*DELAY_OF_TIMEOUT) * self.injector.plan.node_timeout_s * 1000)
        jitter_ms = int(rng.uniform(0, JITTER_OF_DELAY) * delay_ms)
        self._set_delays(links, delay_ms, jitter_ms)
        return (f"delay {delay_ms}ms+-{jitter_ms}ms",
                lambda: self._set_delays(links, 0, 0))

    def _set_delays(self, links, delay_ms: int, jitter_ms: int) -> bool:
        for node, peers in links.items():
            for address in self._addresses(peers):
                self.lab.relay(node).set_delay(address, delay_ms, jitter_ms)
        return True
