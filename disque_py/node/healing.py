"""Copies that heal: a job whose holders are lost is copied again, until it
is back at its REPLICATE level (the `rereplicate` directive, on by default).

Disque never restores a job's replication level: a job added with
REPLICATE 3 whose three holders are lost one after the other is gone, even
when the cluster never had more than one node down at a time (a kill -9
without an AOF, then a restart, empties a node). Here the surviving holders
make new copies as soon as a holder is seen lost.

A lost holder, as this node sees it:
  * flagged FAIL (membership: a majority agreed it is down), or no longer
    known at all (CLUSTER FORGET). PFAIL is not enough: only FAIL is agreed,
    so only FAIL makes the survivors act the same way;
  * restarted empty. Every node has a start epoch that changes whenever it
    starts without loading jobs from an AOF, and that its peers learn
    (cluster/membership.py, EPOCH). When a peer's epoch changes, every job
    here that lists it as a holder is marked: that holder lost its copy (a
    "wiped" holder). A node restarted with its AOF keeps its epoch: its jobs
    are back, nothing is lost.
A job's level here is this node (it has the job) plus the holders listed in
job.delivered that are neither lost nor wiped. Below job.repl it is healed;
at-most-once jobs (REPLICATE 1) and acknowledged ones never are. A listed
holder is one a REPLJOB was sent to, not one that confirmed (only the
producer hears GOTJOBs): a frame lost with its sender, or sent to a node
already down, leaves a holder listed without a copy. So a job examined
after a loss that is still at its level on paper is sent again to the
holders that count (a "resend": one REPLJOB each; a holder with the copy
merges the list, a lost or wiped one is not sent one), by the same one
holder a heal would come from; flagged MSG_RESENT, since it did not go to
every holder it lists (its receivers keep their marks). A REPLJOB that
brings a job's holders makes its receivers look again (RECHECK), not
resend it.

Who acts, for one job: exactly one holder, the first of the holders that
count in a per-job order every node computes alike (crc32 of the job ID
and the node ID: rendezvous hashing, so the work of one lost node spreads
over all the survivors). A survivor that is not first watches the job and
acts only if it is still below its level after HEAL_FALLBACK_MS times its
place in that order (the first one died too, or sees the cluster
otherwise). Views can differ for a moment (a FAIL not yet received), which
at worst makes one copy too many, never one too few for long.

What it does is what an ADDJOB does: replicate(job, k, noreply=True)
chooses k new holders at random among the reachable nodes not listed yet,
and sends a REPLJOB carrying the full holder list to every listed holder,
old and new. A new holder adopts the copy with that list; a surviving
holder merges the list into its own (on_repljob), so the ack's garbage
collection (SETACK/GOTACK/DELJOB, sent to every listed holder) reaches the
new copies too; a wiped holder that is reachable again is still listed, so
the same REPLJOB gives it its copy back, and k counts it: healing prefers
the old holders to new nodes, which keeps holder lists short.

The holder list (job.delivered) means "every node that may have a copy",
and healing only ever adds to it:
  * a FAIL holder stays listed: it may come back with its AOF and its copy,
    and must then get the ack (SETACK, DELJOB) like any other holder. Its
    copy comes back on top of the new ones: one copy too many, until acked;
  * a wiped holder stays listed: it answers SETACK with GOTACK (a job it
    does not know), which costs one message per ack, and any later heal
    gives it a copy back (then it counts again);
  * a holder never heard of again (forgotten) stays listed too, and holds
    the ack's collection up until the job's TTL, as in Disque.
A REPLJOB received for a job (not a resend) clears its marks here, but
its sender's own: its sender just sent a copy to every holder it lists,
the wiped ones included. A holder that keeps a job its producer gave up
on (DEDUP: its ID was promised to a duplicate) marks every other holder,
the producer first: they may have deleted their copies
(after_abandon).

Pacing: a lost holder starts a pass over the whole job table, HEAL_SCAN_JOBS
jobs per HEAL_PERIOD_MS (finding the jobs that list it), and at most
HEAL_JOBS_PER_PERIOD jobs are healed per period (each heal is one REPLJOB
per holder), so a node failure does not flood the bus: 5,000 jobs a second
per node at most. A job with no node left to copy to waits until a node
becomes reachable again.

Limits: the holders of a job lost together before any of them was seen
lost (or faster than the pacing heals) lose it, as without healing
(without an AOF: nothing can bring it back). A wiped holder is recognised
only by a node that knew its previous epoch: a node restarted with its AOF
while a peer was emptied does not know that peer lost its copies. A copy
given by a heal is confirmed by nobody (no GOTJOB): if that REPLJOB is lost
on a link that broke without the node restarting, the holder is counted
but has nothing until the next loss among the job's holders resends it.
Costs: the REPLJOBs of a heal and one more copy of a job's body on the new
holder; the pass reads every job once per loss.

The node stays pure: the cluster view comes through Node.set_cluster_view
and view() here, time from the node's clock, and every
copy leaves through the node's messages to peers (engine/node/outbox.pxi).
"""

from __future__ import annotations

import heapq
import zlib

from disque_py.formats.bus import MSG_PROMISED, MSG_RESENT
from disque_py.engine import ACKED, WAIT_REPL, Job

HEAL_PERIOD_MS = 100              # how often healing runs while it has work
HEAL_SCAN_JOBS = 20_000           # jobs the pass looks at per period
HEAL_JOBS_PER_PERIOD = 500        # jobs healed (copies sent) per period, at most
HEAL_CHECKS_PER_PERIOD = 4_000    # jobs examined per period (cheap when at level)
HEAL_FALLBACK_MS = 10_000         # per place in the order, before a watcher acts
HEAL_WAIT_REPL_MS = 500           # a job still waiting for its first copies: look again
HEAL_PRUNE_PER_PERIOD = 1_000     # marks checked per period (jobs gone, acked)

LOST, WIPED = 1, 2                # why a holder is looked for by the pass
# Why a job is examined: LOOK, a loss among its holders (the first in line
# acts; a job at its level on paper is resent); FALLBACK, a watcher's turn
# came (it acts whatever its place); RECHECK, a REPLJOB just brought its
# holders (healed if below its level; the sender resent it already).
LOOK, FALLBACK, RECHECK = 0, 1, 2


class Healing:
    """Re-replication on one node: its view of lost holders, its pass over
    the job table, and the jobs it examines, watches and heals."""

    def __init__(self, core) -> None:
        self.core = core
        self.enabled = True
        # The cluster view, as last pushed (view).
        self._failed: frozenset = frozenset()
        self._known: frozenset = frozenset()
        self._linked: frozenset = frozenset()
        self._epochs: dict[bytes, int] = {}
        # The pass: which holders it looks for, where it is, what is left.
        self._triggers: dict[bytes, int] = {}
        self._cursor = 0
        self._left = 0
        self._next = 0
        # Jobs: to examine (and why: LOOK, FALLBACK, RECHECK); watched
        # (another holder first); short of nodes.
        self._pending: dict[Job, int] = {}
        self._watch: dict[Job, int] = {}
        self._watch_heap: list = []
        self._seq = 0
        self._short: dict[Job, None] = {}
        self._marks: dict[Job, tuple] = {}      # job -> its wiped holders
        # The bus's fast path leaves a REPLJOB to on_repljob while either has jobs.
        core.heal_marks, core.heal_watch = self._marks, self._watch
        self._prune: list = []
        # Counters (INFO).
        self.peers_failed = 0
        self.peers_restarted_empty = 0
        self.jobs_restored = 0
        self.copies_restored = 0
        self.jobs_resent = 0

    # ------------------------------------------------------------ the view

    def view(self, failed, epochs) -> None:
        """The membership's view of lost nodes: `failed`, the peers flagged
        FAIL; `epochs`, {peer ID: start epoch} of the peers that told theirs
        (None: this caller knows no epochs). Called with every view push."""
        core = self.core
        lost: list[bytes] = []
        failed = frozenset(failed or ())
        if failed != self._failed:
            newly = sorted(failed - self._failed)
            self.peers_failed += len(newly)
            lost += newly
            self._failed = failed
        known = core.known_peers
        if len(known) != len(self._known) or not self._known.issuperset(known):
            lost += sorted(self._known.difference(known))
            self._known = frozenset(known)
        wiped: list[bytes] = []
        if epochs:
            seen = self._epochs
            for node_id, epoch in epochs.items():
                before = seen.get(node_id)
                if before != epoch:
                    seen[node_id] = epoch
                    if before is not None:
                        wiped.append(node_id)
            if wiped:
                wiped.sort()
                self.peers_restarted_empty += len(wiped)
        linked = core.reachable
        grew = shrank = False
        if len(linked) != len(self._linked) or not self._linked.issuperset(linked):
            grew = not self._linked.issuperset(linked)
            linked = frozenset(linked)
            shrank = not linked.issuperset(self._linked)
            self._linked = linked
        if not self.enabled:
            return
        if lost or wiped:
            self._start_pass(lost, wiped)
        if shrank and self._watch:
            # The holder this node waits for to act may be the one whose
            # link just broke (killed, not FAIL for seconds yet): rank the
            # watched jobs again now, not when their fallback comes.
            pending = self._pending
            for job in self._watch:
                pending.setdefault(job, LOOK)
            self._next = 0
        if grew and self._short:
            self._pending.update(dict.fromkeys(self._short, FALLBACK))   # somewhere
            self._short.clear()                                            # to copy to?
            self._next = 0

    def _start_pass(self, lost, wiped) -> None:
        triggers = self._triggers
        for node_id in lost:
            triggers.setdefault(node_id, LOST)
        for node_id in wiped:
            triggers[node_id] = WIPED
        self._left = self.core.jobs.partition_count     # a whole pass from here
        self._next = 0

    def set_enabled(self, enabled: bool) -> None:
        """CONFIG SET rereplicate. Turned on: one pass looks for the jobs of
        the nodes failing now. Turned off: the work under way is dropped."""
        enabled = bool(enabled)
        if enabled == self.enabled:
            return
        self.enabled = enabled
        if enabled:
            if self._failed:
                self._start_pass(sorted(self._failed), ())
        else:
            self.reset(keep_view=True)

    def reset(self, keep_view: bool = True) -> None:
        """Drop the work under way and the marks (FLUSHALL, or turned off)."""
        self._triggers.clear()
        self._left = 0
        self._pending.clear()
        self._watch.clear()
        self._watch_heap.clear()
        self._short.clear()
        self._marks.clear()
        self._prune.clear()

    # ------------------------------------------------------------ timers

    def has_work(self) -> bool:
        """Whether a period's work waits (tick() then runs it when due)."""
        return bool(self._left or self._pending or self._watch_heap or self._marks
                    or self._short)

    def due(self, now: int) -> bool:
        return now >= self._next and self.has_work()

    def next_due(self) -> int | None:
        """When healing has something to do (None: nothing)."""
        if self._left or self._pending:
            return self._next
        if self._watch_heap:
            return max(self._watch_heap[0][0], self._next)
        return None

    def tick(self, now: int) -> None:
        """One period's work: the pass, the jobs found, the watched ones due."""
        self._next = now + HEAL_PERIOD_MS
        if self._left:
            self._scan(HEAL_SCAN_JOBS)
        heap = self._watch_heap
        if heap:
            watch, pending = self._watch, self._pending
            while heap and heap[0][0] <= now:
                due, _, job, mode = heapq.heappop(heap)
                if watch.get(job) == due:
                    del watch[job]
                    pending[job] = mode
        if self._pending:
            self._work(now)
        if self._marks or self._short:
            self._prune_marks(HEAL_PRUNE_PER_PERIOD)

    def _scan(self, budget: int) -> None:
        """Visit partitions of the job table until `budget` jobs were seen:
        the jobs listing a holder the pass looks for are examined next
        (those listing a wiped one are marked). In ID order, so a seed of
        the simulation replays whatever the hash seed."""
        core = self.core
        table, triggers, me = core.jobs, self._triggers, core.id
        count = table.partition_count
        found = []
        seen = 0
        while self._left and seen < budget:
            jobs = table.partition(self._cursor)
            self._cursor = (self._cursor + 1) % count
            self._left -= 1
            seen += len(jobs)
            for job in jobs:
                if job.repl < 2 or job.state == ACKED:
                    continue
                for node_id in job.delivered:
                    if node_id in triggers:
                        found.append(job)
                        break
        if not self._left:
            triggers_now = dict(triggers)
            triggers.clear()
        else:
            triggers_now = triggers
        found.sort(key=job_id_of)
        marks, pending = self._marks, self._pending
        for job in found:
            wiped = tuple(node_id for node_id in job.delivered
                          if node_id != me and triggers_now.get(node_id) == WIPED)
            if wiped:
                old = marks.get(job, ())
                marks[job] = old + tuple(node_id for node_id in wiped if node_id not in old)
            pending[job] = LOOK

    def _work(self, now: int) -> None:
        pending = self._pending
        healed = checked = 0
        while pending and healed < HEAL_JOBS_PER_PERIOD and checked < HEAL_CHECKS_PER_PERIOD:
            job = next(iter(pending))
            mode = pending.pop(job)
            checked += 1
            healed += self._examine(job, now, mode)

    # ------------------------------------------------------------ one job

    def _examine(self, job: Job, now: int, mode: int = LOOK) -> bool:
        """Examine one job; heal it if it is below its level and this node
        is first in line (or, FALLBACK, was watching it long enough), and
        resend it after a loss if it is at its level on paper (not on
        RECHECK). True if copies were sent."""
        core = self.core
        if core.jobs.get(job.id) is not job or job.state == ACKED or job.repl < 2:
            self._marks.pop(job, None)
            return False
        if job.state == WAIT_REPL:
            self._watch_job(job, now + HEAL_WAIT_REPL_MS, LOOK)    # its producer's, for now
            return False
        me = core.id
        failed, known, linked = self._failed, core.node_ids, self._linked
        marks = self._marks.get(job, ())
        counted = [me]
        refresh = 0
        for node_id in job.delivered:
            if node_id == me or node_id in failed or node_id not in known:
                continue
            if node_id in marks:
                refresh += node_id in linked
                continue
            counted.append(node_id)
        deficit = job.repl - len(counted)
        if deficit <= 0 and mode == RECHECK:
            return False
        place = self._place(job, counted) if mode != FALLBACK else 0
        if place:
            self._watch_job(job, now + place * HEAL_FALLBACK_MS, FALLBACK)
            return False
        if deficit <= 0:
            # At its level on paper. But a holder is listed once a REPLJOB is
            # sent to it, not once it confirms: that frame may have died
            # with its sender, or reached a node already down. A loss is
            # the moment to make sure: the job goes again to the holders
            # that count (one that has it only merges the list).
            core.replicate(job, 0, noreply=True, only=tuple(counted[1:]))   # [0] is me
            self._watch.pop(job, None)
            self.jobs_resent += 1
            return True
        wanted = max(deficit - refresh, 0)
        added = core.replicate(job, wanted, noreply=True)
        if refresh:
            left = tuple(node_id for node_id in marks if node_id not in linked)
            if left:
                self._marks[job] = left
            else:
                del self._marks[job]
        self._watch.pop(job, None)
        self.jobs_restored += 1
        self.copies_restored += added + refresh
        if added < wanted:
            self._short[job] = None       # not enough nodes: when one comes back
        return True

    def _place(self, job: Job, counted: list) -> int:
        """This node's place in the job's order among the holders that count
        and can act now (0: first): a holder this node has no link to may
        be dead (not FAIL yet) and would hold the job up."""
        me, linked = self.core.id, self._linked
        able = [node_id for node_id in counted if node_id == me or node_id in linked]
        if len(able) < 2:
            return 0
        crc = zlib.crc32(job.id)
        order = sorted(able, key=lambda node_id: (zlib.crc32(node_id, crc), node_id))
        return order.index(me)

    def after_abandon(self, job: Job) -> None:
        """`job`'s producer gave up on it, and this holder keeps it (its ID
        was promised to a duplicate ADDJOB): the producer deleted its copy,
        and so did every holder that had promised nothing, so every other
        holder counts as one that lost its copy (marked) until a REPLJOB
        shows otherwise, and the job is examined at the next period. Its
        heal sends the job to every holder listed, the producer included
        (which keeps holder lists as they were, and the ack's collection
        reaching every copy); a stale holder list can then only name nodes
        that are sent a copy. Whatever `rereplicate` says: this is the
        promise made to the duplicate, not a lost node."""
        others = tuple(node_id for node_id in job.delivered if node_id != self.core.id)
        if others:
            self._marks[job] = others
        self._pending[job] = LOOK

    def _watch_job(self, job: Job, due: int, mode: int) -> None:
        """Look at the job again at `due`; a job already watched keeps its
        earlier time (new passes must not put a fallback off forever)."""
        before = self._watch.get(job)
        if before is not None and before <= due:
            return
        self._watch[job] = due
        self._seq += 1
        heapq.heappush(self._watch_heap, (due, self._seq, job, mode))

    def on_repljob(self, sender: bytes, mflags: int, jobs: list[bytes]) -> None:
        """REPLJOB (on_repljob), then: its sender sent a copy to every holder
        it lists, so marks on those jobs are cleared, and the watched ones
        are looked at again (their holders may have changed). Not for a
        promise round's REPLJOB (DEDUP): it gives no copy to a holder that
        lost its own; and a resend (MSG_RESENT) went to some holders only,
        so it clears no mark. The sender's own mark stays: its copy may be
        older than the mark (a frame sent before it was wiped, or before the
        producer gave up on the job and deleted it, in flight since), and
        keeping it costs at most one REPLJOB the sender did not need."""
        self.core.on_repljob(sender, mflags, jobs)
        if (self._marks or self._watch) and not mflags & MSG_PROMISED:
            self._copies_received(sender, jobs, not mflags & MSG_RESENT)

    def _copies_received(self, sender: bytes, jobs: list[bytes], to_all: bool) -> None:
        marks, watch, table = self._marks, self._watch, self.core.jobs
        for data in jobs:
            job = table.get(data[:40])
            if job is None:
                continue
            if to_all and marks and sender in marks.pop(job, ()):
                marks[job] = (sender,)
            if job in watch:
                del watch[job]
                self._pending[job] = RECHECK

    def _prune_marks(self, budget: int) -> None:
        """Forget the marks (and the waits for a node to copy to) of jobs
        that left or were acknowledged, a slice at a time."""
        prune, marks, short, table = self._prune, self._marks, self._short, \
            self.core.jobs
        if not prune:
            prune.extend(marks)
            prune.extend(short)
        for _ in range(min(budget, len(prune))):
            job = prune.pop()
            if table.get(job.id) is not job or job.state == ACKED:
                marks.pop(job, None)
                short.pop(job, None)

    # ------------------------------------------------------------ INFO

    def info(self) -> list[tuple[str, object]]:
        below = len(self._watch) + len(self._short)
        return [
            ("rereplicate", "yes" if self.enabled else "no"),
            ("rereplicate_peers_failed", self.peers_failed),
            ("rereplicate_peers_restarted_empty", self.peers_restarted_empty),
            ("rereplicate_peers_known_epoch", len(self._epochs)),
            ("rereplicate_jobs_to_check", len(self._pending)),
            ("rereplicate_jobs_below_level", below),
            ("rereplicate_jobs_restored", self.jobs_restored),
            ("rereplicate_copies_restored", self.copies_restored),
            ("rereplicate_jobs_resent", self.jobs_resent),
            ("rereplicate_pass_in_progress", int(bool(self._left))),
        ]


def job_id_of(job: Job) -> bytes:
    return job.id
