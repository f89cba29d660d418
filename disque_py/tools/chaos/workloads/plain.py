"""The plain workloads: today's load, with and without a backlog.

  plain    ADDJOB ... REPLICATE r with a unique body, GETJOB, some NACK and
           WORKING, ACKJOB on the same node or another one; its promise is
           the total-queue verdict alone (nothing lost, nothing unexpected).
  backlog  the same, plus `--backlog N` jobs added before the faults, as
           fast as the nodes take them, to BACKLOG_QUEUE, which consumers
           read only once they drain: jobs that sit unconsumed through
           every fault, what re-replication is for.
"""

from __future__ import annotations

from disque_py.tools.chaos.workloads.base import Workload, register
from disque_py.tools.chaos.workloads.clients import Producer, Worker

BACKLOG_QUEUE = "chaos-backlog"
BACKLOG_PRODUCER_BASE = 1000      # backlog producers' numbers (their bodies differ)
DEFAULT_BACKLOG = 2000


@register
class Plain(Workload):
    name = "plain"
    summary = "ADDJOB ... REPLICATE r; GETJOB, NACK, WORKING, ACKJOB (the default)"


@register
class Backlog(Workload):
    name = "backlog"
    summary = (f"plain, plus --backlog N jobs (default {DEFAULT_BACKLOG}) added before the "
               f"faults to a queue read only by the drain")

    @property
    def size(self) -> int:
        return self.setup.backlog or DEFAULT_BACKLOG

    def drain_queues(self) -> tuple[str, ...]:
        return (BACKLOG_QUEUE,)

    def settings(self) -> dict:
        return {**super().settings(), "backlog": self.size}

    def loaders(self) -> list[Worker]:
        s, count = self.setup, self.setup.producers
        return [Producer(BACKLOG_PRODUCER_BASE + n, s.seed, None, self.spec(),
                         queues=(BACKLOG_QUEUE,),
                         limit=self.size // count + (n < self.size % count), **self.common())
                for n in range(count)]

    def loaded_text(self) -> str:
        return (f"backlog of {self.size} jobs loaded in {BACKLOG_QUEUE} "
                f"({self.setup.ledger.progress()['added']} acknowledged)")
