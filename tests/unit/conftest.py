"""Fixtures for the socket-free unit tests: a node on a fake clock.

Time only moves when a test moves it, and the clock's jitter is seeded, so
every retry, delay and expiry below is deterministic. `drive` plays the part
of the runtime's timer: it wakes the node at every time it asked for, up to
a target, so no event is skipped or handled late.
"""

from __future__ import annotations

import pytest

from disque_py.base.clock import FakeClock
from disque_py.node.node import Node

NODE_ID = b"9bfa56e329abf3577408e45419d642cac8154459"
START_MS = 1_700_000_000_000   # a whole second, so etime * 1000 is exact


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START_MS, seed=7)


@pytest.fixture
def node(clock) -> Node:
    return Node(NODE_ID, clock, id_seed=b"unit-test-seed")


def drive_to(node: Node, clock: FakeClock, target_ms: int, max_steps: int = 1_000_000) -> None:
    """Run the node's timers as a perfect event loop would, up to target_ms."""
    for _ in range(max_steps):
        wake = node.next_wakeup()
        if wake is None or wake > target_ms:
            break
        clock.set(max(clock.now_ms(), wake))
        while node.tick():
            pass
    else:
        raise AssertionError("node never went idle before the target time")
    clock.set(max(clock.now_ms(), target_ms))
    while node.tick():
        pass


@pytest.fixture
def drive(node, clock):
    """drive(ms): move time forward by ms, waking the node on schedule."""

    def run(ms: int) -> None:
        drive_to(node, clock, clock.now_ms() + ms)

    return run
