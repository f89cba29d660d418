"""What a workload is: the load a chaos run puts on the nodes, and the
promises of its own it checks over the ledger.

Each workload is a class registered under the word `--workload` takes. The
run gives it a Setup (the nodes' addresses, the ledger, the seed, the jobs'
REPLICATE, RETRY and TTL, the rate and thread counts) and asks it for its
threads (producers, consumers, observers), for what the drain must read
beyond the queues the consumers read all along (dead letters, a backlog),
and, at the end, for its Findings: the total-queue verdict (ledger.py) is
the run's, the workload's own promises are its own. Rules kept: every
client thread is a clients.Worker (the run stops it by its role); every
check is a pure function of the ledger's records and the fault record (a
CheckContext), so the unit tests drive it with a fake history; a broken
promise is a failure, and an outcome the documented promise allows is
excused with its reason and counted, never silently dropped.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, ClassVar, Protocol

from disque_py.tools.chaos.ledger import JobRecord, Ledger, same_queue
from disque_py.tools.chaos.workloads.clients import QUEUES, Consumer, JobSpec, Producer, Worker

if TYPE_CHECKING:
    from disque_py.tools.chaos.faults.base import Event

SHOWN_FINDINGS = 8


@dataclass
class Setup:
    """What a workload needs to make its threads."""

    addresses: list[tuple[str, int]]
    ledger: Ledger
    seed: int
    spec: JobSpec                       # REPLICATE, RETRY and TTL from the run's options
    rate: float                         # ADDJOBs per second, all producers together
    producers: int
    consumers: int
    backlog: int = 0
    node_ids: list[str] = field(default_factory=list)   # each node's ID, by index
    rng: Callable[[], random.Random] = random.Random   # a new generator from the run's seed


class FaultRecord(Protocol):
    """The questions a workload's checks ask of the fault record (the
    injector answers them in a run; the unit tests give a list of events)."""

    def events_between(self, start: float, end: float) -> list[Event]: ...

    def losses_after(self, moment: float) -> set[int]: ...


@dataclass
class CheckContext:
    faults: FaultRecord
    durable: bool           # a kill -9 loses no acknowledged write (AOF, appendfsync always)
    healed_at: float        # when the last fault was undone

    def faults_on(self, nodes: set[int], start: float, end: float) -> list[Event]:
        """Faults (and their heals) on any of `nodes` between the two moments."""
        return [e for e in self.faults.events_between(start, end) if e.node in nodes]

    def forgot(self, node: int, since: float) -> bool:
        """Whether `node` may have lost what it wrote since `since` (killed
        or crashed without a durable AOF)."""
        return not self.durable and node in self.faults.losses_after(since)


@dataclass
class Findings:
    """A workload's own verdict: broken promises, outcomes the documented
    promise excuses (each with its reason), and the workload's figures."""

    failures: list[str] = field(default_factory=list)
    excused: list[str] = field(default_factory=list)
    figures: dict[str, float | int | str] = field(default_factory=dict)

    def lines(self, workload: str) -> list[str]:
        out = [f"{workload}: " + (", ".join(f"{k} {_figure(v)}" for k, v in self.figures.items())
                                  or "no figures of its own")]
        out += [f"  {workload} FAILED: {line}" for line in self.failures[:SHOWN_FINDINGS]]
        out += [f"  {workload} excused: {line}" for line in self.excused[:SHOWN_FINDINGS]]
        return out


def _figure(value) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


class Workload:
    """The plain load: ADDJOB ... REPLICATE r, GETJOB, NACK, WORKING, ACKJOB."""

    name: ClassVar[str]
    summary: ClassVar[str] = ""       # one line for --help and the docs
    queues: ClassVar[tuple[str, ...]] = QUEUES
    # The command option of disque-py's own this workload needs, so that
    # Disque C cannot run it (disque_c.py): "" when Disque C can.
    needs_disque_py: ClassVar[str] = ""

    def __init__(self, setup: Setup) -> None:
        self.setup = setup

    # ---------------------------------------------------------- the load

    def spec(self) -> JobSpec:
        return self.setup.spec

    def loaders(self) -> list[Worker]:
        """Producers the run starts and waits for before the faults (none by default)."""
        return []

    def loaded_text(self) -> str:
        return ""

    def threads(self) -> list[Worker]:
        return self.producers() + self.consumers() + self.observers()

    def producers(self) -> list[Worker]:
        s = self.setup
        return [Producer(n, s.seed, s.rate / s.producers, self.spec(), queues=self.queues,
                         **self.common()) for n in range(s.producers)]

    def consumers(self) -> list[Worker]:
        return [Consumer(n, queues=self.queues, drain_queues=self.drain_queues(),
                         **self.common()) for n in range(self.setup.consumers)]

    def observers(self) -> list[Worker]:
        return []

    def common(self) -> dict:
        return dict(rng=self.setup.rng(), addresses=self.setup.addresses,
                    ledger=self.setup.ledger)

    # ---------------------------------------------------------- the checks

    def drain_queues(self) -> tuple[str, ...]:
        """Queues the consumers read only once they drain."""
        return ()

    def queues_of(self, queue: str) -> set[str]:
        """Where a job added to `queue` may be delivered from."""
        return same_queue(queue)

    def settings(self) -> dict:
        return {"workload": self.name}

    def check(self, records: list[JobRecord], context: CheckContext) -> Findings:
        return Findings()


WORKLOADS: dict[str, type[Workload]] = {}
DEFAULT_WORKLOAD = "plain"


def register(workload: type[Workload]) -> type[Workload]:
    WORKLOADS[workload.name] = workload
    return workload
