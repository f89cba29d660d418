"""The fault injector: draws faults from the kinds asked for, and undoes them.

Owns the schedule of faults and the recovery of what they did. At random
intervals (around `mean_interval_s`) it draws a kind, weighted, from the
run's kinds (each kind is drawn once first, so even a short run has them
all) and lets it inject; never more than `max_down` nodes are down at once
(killed, paused, restarting, isolated...). Each harm is undone when due; a
heal that fails is tried again START_RETRY_S later. A node that exits by
itself is recorded as a crash and restarted. `recover_all` undoes
everything once the faults stop. The record of events answers the report's
questions: which nodes were down at a moment, which lost data after one.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from disque_py.tools.chaos.faults.base import (CRASH, KINDS, Event, Harm, back_kinds,
                                               data_loss_kinds, down_kinds)
from disque_py.tools.chaos.faults.process import restart
from disque_py.tools.chaos.nodes import UP, Node

if TYPE_CHECKING:
    from disque_py.tools.chaos.netns import NetworkLab

TICK_S = 0.1
START_RETRY_S = 5.0


@dataclass
class FaultPlan:
    max_down: int
    mean_interval_s: float
    kinds: tuple[str, ...] = ("kill", "pause")
    replicate: int = 1             # the jobs' REPLICATE: membership keeps that many members
    first_kinds: tuple[str, ...] = field(default=())   # drawn first, once each (default: kinds)
    node_timeout_s: float = 3.0          # the nodes' cluster-node-timeout (network faults' scale)
    network: NetworkLab | None = None    # the nodes' namespaces, for the network faults


class FaultInjector(threading.Thread):
    def __init__(self, nodes: list[Node], plan: FaultPlan, rng: random.Random) -> None:
        super().__init__(name="faults", daemon=True)
        self.nodes = nodes
        self.plan = plan
        self.rng = rng
        self.kinds = [KINDS[name](self) for name in plan.kinds]
        self.harms: list[Harm] = []
        self.events: list[Event] = []
        self.stopping = threading.Event()
        self.error: BaseException | None = None
        self._lock = threading.Lock()                # events, read by the main thread
        self._next_fault_at = time.monotonic() + self._interval()

    def run(self) -> None:
        try:
            while not self.stopping.wait(TICK_S):
                self.tick(time.monotonic())
        except BaseException as error:
            self.error = error

    def tick(self, now: float) -> None:
        self.recover_due(now)
        if now >= self._next_fault_at:
            self.inject(now)
            self._next_fault_at = time.monotonic() + self._interval()

    def _interval(self) -> float:
        return self.rng.uniform(0.5, 1.5) * self.plan.mean_interval_s

    # ---------------------------------------------------------- faults

    def inject(self, now: float) -> None:
        kind = self._next_kind()
        if kind is None:
            return
        harm = kind.inject(now)
        if harm is not None:
            self.harms.append(harm)

    def _next_kind(self):
        done = {event.kind for event in self.events}
        for kind in self.kinds:
            if kind.name not in done and (self.plan.max_down > 0 or not kind.takes_down):
                return kind
        if not self.kinds:
            return None
        return self.rng.choices(self.kinds, weights=[k.weight for k in self.kinds])[0]

    def down(self) -> set[int]:
        """The nodes some harm has taken down."""
        return {index for harm in self.harms if harm.takes_down for index in harm.nodes}

    def running(self) -> list[Node]:
        """Nodes up and untouched by any harm."""
        touched = {index for harm in self.harms for index in harm.nodes}
        return [node for node in self.nodes if node.state == UP and node.index not in touched]

    def pick_victim(self) -> Node | None:
        """A running node one more fault may take down (max_down allowing), or None."""
        running = self.running()
        if len(self.down()) >= self.plan.max_down or not running:
            return None
        return self.rng.choice(running)

    # ---------------------------------------------------------- recovery

    def recover_due(self, now: float) -> None:
        self.notice_crashes()
        for harm in [h for h in self.harms if h.heal_at <= now]:
            if harm.heal():
                self.harms.remove(harm)
            else:
                harm.heal_at = time.monotonic() + START_RETRY_S

    def recover_all(self, timeout: float) -> list[str]:
        """After stop(): undo every harm; the names of the nodes still not back."""
        now = time.monotonic()
        for harm in self.harms:
            harm.heal_at = now
        deadline = now + timeout
        while self.harms and time.monotonic() < deadline:
            self.recover_due(time.monotonic())
            time.sleep(TICK_S)
        return [self.nodes[index].name for index in sorted(self.down())]

    def notice_crashes(self) -> None:
        """A node that exited by itself is restarted (unless a harm already will)."""
        for node in self.nodes:
            if node.check_exit() is None:
                continue
            self.record(CRASH, node.index)
            if not any(h.restarts and node.index in h.nodes for h in self.harms):
                self.harms.append(Harm(CRASH, (node.index,), time.monotonic(),
                                       lambda node=node: restart(self, node), restarts=True))

    def stop(self) -> None:
        self.stopping.set()
        self.join()

    # ---------------------------------------------------------- the record

    def record(self, kind: str, node: int, detail: str = "") -> None:
        with self._lock:
            self.events.append(Event(time.monotonic(), kind, node, detail))

    def count(self, kind: str) -> int:
        with self._lock:
            return sum(1 for event in self.events if event.kind == kind)

    def losses_after(self, moment: float) -> set[int]:
        """The nodes that may have lost unwritten data (killed, crashed...) after `moment`."""
        lossy = data_loss_kinds()
        with self._lock:
            return {event.node for event in self.events
                    if event.at > moment and event.kind in lossy}

    def events_between(self, start: float, end: float) -> list[Event]:
        with self._lock:
            return [event for event in self.events if start <= event.at <= end]

    def most_lost_at_once(self, since: float) -> int:
        """The most nodes that lost data and were not yet back at one moment
        from `since` on (those down at `since` included)."""
        lossy, back = data_loss_kinds(), back_kinds()
        lost: set[int] = set()
        most = None
        with self._lock:
            for event in self.events:
                if event.at > since and most is None:
                    most = len(lost)              # down when it began
                if event.kind in lossy:
                    lost.add(event.node)
                elif event.kind in back:
                    lost.discard(event.node)
                if most is not None:
                    most = max(most, len(lost))
        return len(lost) if most is None else most

    def down_at(self, moment: float) -> dict[int, str]:
        """Node -> why it was down (kill, pause, crash...) at `moment`, from the record."""
        went_down, came_back = down_kinds(), back_kinds()
        down: dict[int, str] = {}
        with self._lock:
            for event in self.events:
                if event.at > moment:
                    break
                if event.kind in went_down:
                    down[event.node] = event.kind
                elif event.kind in came_back:
                    down.pop(event.node, None)
        return down

    def down_text(self) -> list[str]:
        return [f"{node.name}:{node.state}" for node in self.nodes
                if node.state != UP and node.member]

    def event_counts(self) -> dict[str, int]:
        """How many events of each kind (faults, heals, refusals, repairs...)."""
        with self._lock:
            return dict(Counter(event.kind for event in self.events))

    def measures(self) -> dict[str, float]:
        return {name: value for kind in self.kinds for name, value in kind.measures().items()}
