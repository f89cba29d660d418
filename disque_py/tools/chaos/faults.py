"""The fault injector: kill -9 and restart, SIGSTOP and SIGCONT, AOF rewrites.

Owns the schedule of faults and the recovery of the nodes it took down. At
random intervals it kills (SIGKILL) or pauses (SIGSTOP) a random running
node, never letting more than `max_down` nodes be killed, paused or
restarting at once; each downed node gets a recovery time, after which it is
restarted on the same port and directory (loading its AOF) or resumed
(SIGCONT). With the AOF on it also asks a node now and then to BGREWRITEAOF,
so kills land during rewrites too. The first two faults are one kill and
one pause, so even a short run exercises both. A node that exits by itself
is recorded as a crash and restarted. `recover_all` brings every node back
once the faults stop.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass

from disque_py.tools.chaos.link import Link, LinkError
from disque_py.tools.chaos.nodes import PAUSED, UP, Node

TICK_S = 0.1
KILL = "kill"
PAUSE = "pause"
REWRITE = "rewrite"
REWRITE_WEIGHT = 0.1
REWRITE_TIMEOUT_S = 2.0
START_FAILED = "start-failed"
START_RETRY_S = 5.0


@dataclass
class FaultPlan:
    max_down: int
    mean_interval_s: float
    kill_down_s: tuple[float, float]
    pause_s: tuple[float, float]
    rewrites: bool
    pauses: bool = True               # False: kill -9 only


@dataclass
class Event:
    at: float        # time.monotonic()
    kind: str        # kill, pause, restart, resume, rewrite, crash
    node: int


class FaultInjector(threading.Thread):
    def __init__(self, nodes: list[Node], plan: FaultPlan, rng: random.Random) -> None:
        super().__init__(name="faults", daemon=True)
        self.nodes = nodes
        self.plan = plan
        self.rng = rng
        self.events: list[Event] = []
        self.recover_at: dict[int, float] = {}      # downed node -> when to bring it back
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
            self.inject()
            self._next_fault_at = time.monotonic() + self._interval()

    def _interval(self) -> float:
        return self.rng.uniform(0.5, 1.5) * self.plan.mean_interval_s

    # ---------------------------------------------------------- faults

    def inject(self) -> None:
        kind = self._next_kind()
        running = [node for node in self.nodes if node.state == UP
                   and node.index not in self.recover_at]
        if kind == REWRITE:
            if running:
                self._rewrite(self.rng.choice(running))
            return
        if len(self.recover_at) >= self.plan.max_down or not running:
            return
        node = self.rng.choice(running)
        if kind == KILL:
            node.kill()
            down_for = self.rng.uniform(*self.plan.kill_down_s)
        else:
            node.pause()
            down_for = self.rng.uniform(*self.plan.pause_s)
        self.recover_at[node.index] = time.monotonic() + down_for
        self.record(kind, node.index)

    def _next_kind(self) -> str:
        done = {event.kind for event in self.events}
        kinds = (KILL, PAUSE) if self.plan.pauses else (KILL,)
        for first in kinds:
            if first not in done and self.plan.max_down > 0:
                return first
        if self.plan.rewrites and self.rng.random() < REWRITE_WEIGHT:
            return REWRITE
        return self.rng.choice(kinds)

    def _rewrite(self, node: Node) -> None:
        link = Link(node.port, REWRITE_TIMEOUT_S)
        try:
            link.call("BGREWRITEAOF")
            self.record(REWRITE, node.index)
        except LinkError:
            pass     # a rewrite already running, or the node busy: not a fault injected
        finally:
            link.close()

    # ---------------------------------------------------------- recovery

    def recover_due(self, now: float) -> None:
        self.notice_crashes()
        for index, due in list(self.recover_at.items()):
            if due <= now:
                self.recover(index)

    def recover(self, index: int) -> bool:
        """Resume or restart a downed node; False (and a retry later) if it fails to start."""
        node = self.nodes[index]
        if node.state == PAUSED:
            node.resume()
            self.record("resume", index)
        elif node.state != UP:
            node.start()
            try:
                node.wait_ready()
            except RuntimeError:
                self.record(START_FAILED, index)   # its exit is counted as a crash too
                self.notice_crashes()
                self.recover_at[index] = time.monotonic() + START_RETRY_S
                return False
            self.record("restart", index)
        self.recover_at.pop(index, None)
        return True

    def recover_all(self, timeout: float) -> list[str]:
        """After stop(): bring back every node still down; the names of those that stay down."""
        now = time.monotonic()
        for node in self.nodes:
            if node.state != UP:
                self.recover_at[node.index] = now
        deadline = now + timeout
        while self.recover_at and time.monotonic() < deadline:
            self.recover_due(time.monotonic())
            time.sleep(TICK_S)
        return [self.nodes[index].name for index in sorted(self.recover_at)]

    def notice_crashes(self) -> None:
        for node in self.nodes:
            if node.check_exit() is not None:
                self.record("crash", node.index)
                self.recover_at.setdefault(node.index, time.monotonic())

    def stop(self) -> None:
        self.stopping.set()
        self.join()

    # ---------------------------------------------------------- the record

    def record(self, kind: str, node: int) -> None:
        with self._lock:
            self.events.append(Event(time.monotonic(), kind, node))

    def count(self, kind: str) -> int:
        with self._lock:
            return sum(1 for event in self.events if event.kind == kind)

    def kills_after(self, moment: float) -> set[int]:
        """The nodes killed (or crashed) after `moment`."""
        with self._lock:
            return {event.node for event in self.events
                    if event.at > moment and event.kind in (KILL, "crash")}

    def events_between(self, start: float, end: float) -> list[Event]:
        with self._lock:
            return [event for event in self.events if start <= event.at <= end]

    def most_killed_at_once(self, since: float) -> int:
        """The most nodes killed (or crashed) and not yet restarted at one
        moment from `since` on (those down at `since` included)."""
        killed: set[int] = set()
        most = None
        with self._lock:
            for event in self.events:
                if event.at > since and most is None:
                    most = len(killed)            # down when it began
                if event.kind in (KILL, "crash"):
                    killed.add(event.node)
                elif event.kind == "restart":
                    killed.discard(event.node)
                if most is not None:
                    most = max(most, len(killed))
        return len(killed) if most is None else most

    def down_at(self, moment: float) -> dict[int, str]:
        """Node -> why it was down (kill, pause, crash) at `moment`, from the record."""
        down: dict[int, str] = {}
        with self._lock:
            for event in self.events:
                if event.at > moment:
                    break
                if event.kind in (KILL, PAUSE, "crash"):
                    down[event.node] = event.kind
                elif event.kind in ("restart", "resume"):
                    down.pop(event.node, None)
        return down

    def down(self) -> list[str]:
        return [f"{node.name}:{node.state}" for node in self.nodes if node.state != UP]
