"""The shapes of a partition: which pairs of nodes cannot reach each other.

Pure functions of the node count and a random generator (tests check every
shape's promise directly). A Partition is a set of blocked pairs, always
symmetric (a pair is cut both ways), plus the text the fault record shows:

  isolated  one node cut from all the others:        isolated [3]|[0,1,2,4]
  halves    a random split into two halves:            halves [0,2]|[1,3,4]
  ring      majorities ring: every node reaches a majority (itself counted)
            and no two nodes reach the same set. Nodes in a shuffled ring,
            each reaching its `k` nearest on either side, k the least that
            makes a majority; with 3 nodes a ring would reach everyone, so
            the ring is a line (the middle node reaches both ends): views
            are then {a,b}, {a,b,c}, {b,c}. Needs 3 nodes or more.
                                                       ring 0:[0,1,4] 1:[0,1,2] ...
  bridge    two halves that cannot reach each other and one node that
            reaches both (Jepsen's bridge). Needs 3 nodes or more.
                                                       bridge 2 between [0,4]|[1,3]
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass

Pair = tuple[int, int]


@dataclass(frozen=True)
class Partition:
    shape: str
    nodes: int
    blocked: frozenset[Pair]          # (a, b) with a < b: cut both ways
    text: str

    def cut_from(self, node: int) -> list[int]:
        """The nodes `node` cannot reach."""
        return _cut_from(self.blocked, node)

    def views(self) -> dict[int, frozenset[int]]:
        """Each node -> the nodes it reaches, itself included."""
        return _views(self.nodes, self.blocked)


def _cut_from(blocked, node: int) -> list[int]:
    return sorted({b if a == node else a for a, b in blocked if node in (a, b)})


def _views(nodes: int, blocked) -> dict[int, frozenset[int]]:
    return {node: frozenset(range(nodes)) - set(_cut_from(blocked, node))
            for node in range(nodes)}


def majority(nodes: int) -> int:
    return nodes // 2 + 1


def _pair(a: int, b: int) -> Pair:
    return (a, b) if a < b else (b, a)


def _between(*groups) -> frozenset[Pair]:
    """Every pair with its nodes in two different groups."""
    return frozenset(_pair(a, b) for one, other in itertools.combinations(groups, 2)
                     for a in one for b in other)


def _side(nodes) -> str:
    return "[" + ",".join(map(str, sorted(nodes))) + "]"


def _split(nodes: int, rng: random.Random, first: int) -> tuple[list[int], list[int]]:
    order = list(range(nodes))
    rng.shuffle(order)
    return sorted(order[:first]), sorted(order[first:])


def isolated(nodes: int, rng: random.Random) -> Partition:
    alone, rest = _split(nodes, rng, 1)
    return Partition("isolated", nodes, _between(alone, rest),
                     f"isolated {_side(alone)}|{_side(rest)}")


def halves(nodes: int, rng: random.Random) -> Partition:
    one, other = _split(nodes, rng, nodes // 2)
    return Partition("halves", nodes, _between(one, other), f"halves {_side(one)}|{_side(other)}")


def majorities_ring(nodes: int, rng: random.Random) -> Partition:
    order = list(range(nodes))
    rng.shuffle(order)
    reach = majority(nodes) // 2       # neighbours on either side: 2 * reach + 1 >= majority
    if 2 * reach + 1 >= nodes:         # 3 nodes: a line, not a ring
        a, b, c = order
        blocked = frozenset({_pair(a, c)})
    else:
        blocked = frozenset(_pair(order[i], order[j]) for i, j in
                            itertools.combinations(range(nodes), 2)
                            if min(j - i, nodes - (j - i)) > reach)
    views = _views(nodes, blocked)
    text = "ring " + " ".join(f"{node}:{_side(views[node])}" for node in range(nodes))
    return Partition("ring", nodes, blocked, text)


def bridge(nodes: int, rng: random.Random) -> Partition:
    middle, rest = _split(nodes, rng, 1)
    rng.shuffle(rest)
    one, other = sorted(rest[:len(rest) // 2]), sorted(rest[len(rest) // 2:])
    return Partition("bridge", nodes, _between(one, other),
                     f"bridge {middle[0]} between {_side(one)}|{_side(other)}")


SHAPES = {"isolated": isolated, "halves": halves, "ring": majorities_ring, "bridge": bridge}
MIN_NODES = {"isolated": 2, "halves": 2, "ring": 3, "bridge": 3}


def shapes_for(nodes: int) -> list[str]:
    """The shapes that can be made with this many nodes."""
    return [name for name in SHAPES if nodes >= MIN_NODES[name]]


def draw(nodes: int, rng: random.Random) -> Partition:
    return SHAPES[rng.choice(shapes_for(nodes))](nodes, rng)
