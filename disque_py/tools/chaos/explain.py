"""How a run's report explains what it found, from the faults' record.

Owns the words for a lost job (the excuse, when the promise of the run's
settings allows its loss, and the faults around it), for a delivery after
an acknowledged ACKJOB, and for the fault timeline (faults.txt). Rules
kept: it only reads (the injector's events, the fleet's answers about a
job); times are shown from the run's start (`@12.3s`).
"""

from __future__ import annotations

import time
from collections import Counter
from typing import TYPE_CHECKING, Protocol

from disque_py.tools.chaos.faults.base import CLUSTER, Event
from disque_py.tools.chaos.report import LostJob

if TYPE_CHECKING:
    from disque_py.tools.chaos.cluster import Fleet
    from disque_py.tools.chaos.faults import FaultInjector

FAULT_CONTEXT_S = 15.0       # faults shown before an ack or an add, to explain a finding
FAULT_CONTEXT_EVENTS = 8
# appendfsync everysec: a power cut loses what a node wrote since its last
# fsync, a second apart, plus the time that fsync took (a slow one delays
# the next): what a node wrote this long before its power went is at risk.
EVERYSEC_LOSS_WINDOW_S = 2.0


class RunSettings(Protocol):
    """What the explanations read of the run's options (run.ChaosOptions)."""

    nodes: int
    replicate: int
    appendonly: bool
    appendfsync: str
    rereplicate: bool


class Explainer:
    def __init__(self, options: RunSettings, injector: FaultInjector, fleet: Fleet | None,
                 started: float) -> None:
        self.options = options
        self.injector = injector
        self.fleet = fleet
        self.started = started

    def lost_job(self, record) -> LostJob:
        excused = self.power_cut_excuse(record.added_at) or self.no_aof_excuse(record)
        faults = self._faults_text(record.added_at - FAULT_CONTEXT_S, time.monotonic())
        return LostJob(record.job_id, record.body, record.queue,
                       record.added_at - self.started, excused,
                       f"added on node{record.node}, delivered {len(record.deliveries)} "
                       f"times, NACKed {record.nacks} times; nodes say: "
                       f"{self.fleet.describe_job(record.job_id)}; faults: {faults}")

    def power_cut_excuse(self, added_at: float) -> str:
        """appendfsync everysec promises a node's writes once a second: a job
        every copy of which may have gone with power cuts inside that window
        is excused; with appendfsync no (only rewrites fsync), any power cut
        after it was added may have taken a copy. always excuses nothing."""
        o = self.options
        if not o.appendonly or o.appendfsync == "always":
            return ""
        window = EVERYSEC_LOSS_WINDOW_S
        if o.appendfsync == "everysec":
            end, when = added_at + window, f"within {window:g}s of its add"
        else:
            end, when = time.monotonic(), "after it was added"
        cut = {e.node for e in self.injector.events_between(added_at - window, end)
               if e.kind == "powerloss"}
        if len(cut) < o.replicate:
            return ""
        return f"appendfsync {o.appendfsync}: {len(cut)} node(s) lost power {when}"

    def no_aof_excuse(self, record) -> str:
        o = self.options
        if o.appendonly:
            return ""
        if o.rereplicate:
            # Copies heal: only REPLICATE nodes down at once can take every copy.
            at_once = self.injector.most_lost_at_once(record.added_at)
            if at_once >= o.replicate:
                return f"no AOF, {at_once} node(s) killed at once after it was added"
            return ""
        killed = self.injector.losses_after(record.added_at)
        if len(killed) >= o.replicate:
            return f"no AOF, {len(killed)} node(s) killed after it was added"
        return ""

    def after_ack_line(self, record, delivery) -> str:
        """The facts needed to explain it: who added, delivered, acked, and which
        faults hit those nodes between the add and the late delivery."""
        t = self._at
        first = record.deliveries[0]
        involved = {record.node, first.node, record.acked_on, delivery.node}
        faults = self._faults_text(record.sent_at, delivery.asked_at, involved)
        others = set(range(self.options.nodes)) - involved
        elsewhere = self._faults_text(record.acked_at, delivery.asked_at, others)
        down = ", ".join(f"node{n} ({why})" for n, why in
                         sorted(self.injector.down_at(record.acked_at).items())) or "none"
        added = (f"added on node{record.node} {t(record.added_at)}" if record.added_at is not None
                 else f"ADDJOB sent to node{record.node} {t(record.sent_at)} without an answer")
        return (f"{delivery.job_id} {added}, first "
                f"delivered by node{first.node} {t(first.asked_at)}, ACKJOB answered by "
                f"node{record.acked_on} {t(record.acked_at)}, delivered again by "
                f"node{delivery.node} {t(delivery.asked_at)} "
                f"(+{delivery.asked_at - record.acked_at:.1f}s); down at the ack: {down}; "
                f"faults on these nodes: {faults}; on others since the ack: {elsewhere}")

    def faults_by_detail(self) -> dict[str, int]:
        """`partition:halves` -> 3: faults counted by the first word of their
        detail (a partition's shape, a netem fault's effect)."""
        injector = self.injector
        counts = Counter(f"{e.kind}:{e.detail.split()[0]}" for e in injector.events
                         if e.detail and e.kind in injector.plan.kinds)
        return dict(sorted(counts.items()))

    def timeline(self) -> str:
        """faults.txt: every fault and heal, a line each."""
        return "\n".join(f"{self._at(e.at)} {_event_text(e)}" for e in self.injector.events) + "\n"

    def _at(self, moment: float) -> str:
        return f"@{moment - self.started:.1f}s"

    def _faults_text(self, start: float, end: float, nodes: set[int] | None = None) -> str:
        events = [e for e in self.injector.events_between(start, end)
                  if nodes is None or e.node in nodes or e.node == CLUSTER]
        text = ", ".join(f"{_event_text(e)} {self._at(e.at)}"
                         for e in events[:FAULT_CONTEXT_EVENTS])
        more = len(events) - FAULT_CONTEXT_EVENTS
        return (text or "none") + (f" and {more} more" if more > 0 else "")


def _event_text(event: Event) -> str:
    """`kill node2`, `partition halves [0,2]|[1,3,4] for 4.1s`."""
    where = f" node{event.node}" if event.node != CLUSTER else ""
    return f"{event.kind}{where}" + (f" {event.detail}" if event.detail else "")
