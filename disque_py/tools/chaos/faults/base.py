"""What a kind of fault is: it picks its victims, does its harm, and undoes it.

Each kind is a class registered under the word `--faults` takes. The
injector asks one kind at a time to inject; the kind answers with a Harm
(what it did, to which nodes, when it is to be undone) or None when it
could do nothing now (every candidate is down already, say). Harm.heal()
undoes it: True once done, False to be tried again later (a node that
failed to start). Rules kept: a kind touches only the nodes the injector
offers it, and records what it does through the injector, so the run's
timeline (faults.txt, the report's explanations) has every fault and heal.

A kind may ask for environment variables on every node of the run
(launch_env: a preloaded library, a test seam) and report figures it
measured (measures). Kinds that take a node out of the cluster (`takes_down`) count against the
run's max_down while their harm lasts; kinds that can make a node lose what
it had not written (`loses_data`) are what a lost job may be excused by
when the AOF is off. Kinds that work on packets (`needs_network`) make the
run put its nodes in network namespaces; `needs_relays`, behind delaying
relays too. A kind that needs a seam or a behaviour only disque-py
has says which in `needs_disque_py` (Disque C's comparison runs refuse it). Only the heal events of kinds that take down or lose data say
a node is back (a partition's heal brings no node back).
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar, Protocol

from disque_py.tools.chaos.nodes import Node

CLUSTER = -1           # an Event's node when it concerns no one node (a partition healed)
CRASH = "crash"        # a node that exited by itself: restarted like a killed one
RESTART = "restart"


@dataclass
class Event:
    at: float        # time.monotonic()
    kind: str        # a kind's name, or what undid it (restart, resume, ...)
    node: int        # CLUSTER when it concerns no one node
    detail: str = ""


@dataclass
class Harm:
    """One injected fault, until it is undone."""

    kind: str
    nodes: tuple[int, ...]
    heal_at: float                   # time.monotonic() when it is to be undone
    heal: Callable[[], bool]         # True once undone, False: try again later
    takes_down: bool = True
    restarts: bool = False           # its heal starts the node again (kill, crash)


class Injector(Protocol):
    """What a kind asks of the injector (injector.py's FaultInjector), named
    here so that this module need not import the one that imports it."""

    nodes: list[Node]
    rng: random.Random
    plan: Any                   # injector.FaultPlan
    harms: list[Harm]           # the harms not yet undone
    stopping: threading.Event   # set when the faults stop (the drain begins)

    def record(self, kind: str, node: int, detail: str = "") -> None: ...

    def running(self) -> list[Node]: ...

    def pick_victim(self) -> Node | None: ...

    def notice_crashes(self) -> None: ...


class FaultKind:
    """A kind of fault. `weight`: how often it is drawn against the others."""

    name: ClassVar[str]
    heal_name: ClassVar[str] = ""         # the Event that undoes it
    takes_down: ClassVar[bool] = True
    loses_data: ClassVar[bool] = False
    needs_network: ClassVar[bool] = False
    needs_relays: ClassVar[bool] = False
    weight: ClassVar[float] = 1.0
    # What of disque-py's own this kind needs, so that Disque C cannot run
    # it (disque_c.py says so): "" when Disque C's server can take it.
    needs_disque_py: ClassVar[str] = ""

    def __init__(self, injector: Injector) -> None:
        self.injector = injector

    @classmethod
    def launch_env(cls, directory: Path) -> dict[str, str]:
        """Environment a node needs for this kind (a preloaded clock, a
        seam's side file in its `directory`), set from its first start."""
        return {}

    def inject(self, now: float) -> Harm | None:
        raise NotImplementedError

    def measures(self) -> dict[str, float]:
        """Figures this kind measured, for the report."""
        return {}


KINDS: dict[str, type[FaultKind]] = {}


def register(kind: type[FaultKind]) -> type[FaultKind]:
    KINDS[kind.name] = kind
    return kind


def down_kinds() -> set[str]:
    """Events that take a node down, and those that bring it back."""
    return {k.name for k in KINDS.values() if k.takes_down} | {CRASH}


def back_kinds() -> set[str]:
    return {k.heal_name for k in KINDS.values()
            if k.heal_name and (k.takes_down or k.loses_data)} | {RESTART}


def data_loss_kinds() -> set[str]:
    return {k.name for k in KINDS.values() if k.loses_data} | {CRASH}
