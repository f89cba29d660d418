"""The checker: what a simulated cluster promises, watched as the run goes.

It sits on a SimNet as its observer (track_copies on), so it sees, in
order, every copy of a job appear and go on every node (the cores' AOF
effects), every frame carrying whole jobs leave the network, every answer
to a parked client, and (told by the workload) every crash, ADDJOB (and
what a DEDUP key made of it) and delivery. From that it keeps, per job:

  * losses: the nodes whose copy died with them (crashed holding it, not
    acked, and not in an AOF that restart would load);
  * closed: the first moment no copy remains anywhere: no live node holds
    it unacknowledged, no down node's AOF holds it, no REPLJOB/YOURJOBS
    carrying it is in flight. From then on nothing can legitimately make
    it deliverable again;
  * its deliveries to consumers.

Violations, each a string naming the job:
  (1) an ADDJOB answered with the ID had fewer than REPLICATE copies at that
      moment (counting copies since lost), or a node deleted a copy of an
      at-least-once job nobody had acknowledged yet, or, after quiescence, an
      at-least-once job whose ADDJOB succeeded was never acknowledged (the
      drain acknowledges every job it gets: a job delivered, then NACKed or
      forgotten by its consumer, is owed another delivery) although
      fewer than REPLICATE of its holders lost their copy (with `strict`, for
      "holders replaced one by one", where a node is lost only once the
      others healed the copies: whatever the losses; ASYNC: although
      crashes did not destroy every copy; ASYNC on a leaving node, which
      keeps none: although a copy reached a holder). At-most-once jobs may
      be lost by design; they must be delivered at most once (unless the
      network duplicated a frame that carried it). An ADDJOB answered
      with an earlier job's ID (DEDUP, see (10)) promises that job as its
      own ADDJOB would, at the level n the answer stands for: the job must
      then have had n copies (counting copies since lost), and it must
      not be lost unless n of its holders lost their copy, whatever its
      own ADDJOB's fate;
  (2) a delivery after the job closed (its ACK had reached every copy);
  (4) memory left after quiescence: jobs, queued jobs, producers parked;
      and used memory beyond what the queues and the DEDUP keys take (a
      key's memory is counted while it lasts, as INFO's dedup_memory).
  (5) a job dead-lettered early (see "Failed jobs" below);
  (6) a job not dead-lettered when due;
  (7) a job dead-lettered by two nodes in one life, with no excuse;
  (8) the job changed: a delivery with a body other than ADDJOB's, a copy
      served from a dead-letter queue that is not dead, a job dead-lettered
      into another queue than its DEADLETTER (or "<queue>:dead") or without
      the queue it came from, a live copy made from a REPLJOB or YOURJOBS
      its dead-letterer sent after deciding (a REPLJOB flagged MSG_PROMISED
      makes no copy: a holder persists its flag, a node without the job
      ignores it); and each node's count of
      dead-lettered jobs (INFO total_jobs_dead_lettered) must be what the
      checker saw it dead-letter and mark dead.
  (9) a DEDUP table that is not what the node received (see "Idempotent
      producers" below): looked at now and then, after each restart from
      its AOF and at the end, each node's table must hold exactly the
      entries (ADDJOB's queue, key, job ID, window end) the checker's model
      of it holds, open windows only; a node must not make a new job for a
      pair it holds an open entry for; a new job's key and window are
      ADDJOB's, and so is the pair of every copy of it (after the job
      moved too); a key is forgotten early (UNDEDUP) only by the producer
      whose ADDJOB is failing, or on a DELJOB flagged MSG_ABANDONED from
      it, and never for a job whose ADDJOB succeeded.
 (10) a wrong answer to a duplicate: an ADDJOB whose (queue, key) names a
      job J (the model's open entry of the pair whose window ends last)
      gets what the protocol says, given J's copy on that node when it
      arrives (engine/node/dedup.pxi, node/replication.py):
        a. no copy there: J's ID at once;
        b. a copy acked there, or flagged FLAG_CONFIRMED (J reached its
           REPLICATE level there): J's ID at once;
        c. J waiting there for its copies (this node is its producer): the
           duplicate parks, and gets J's first ADDJOB's own outcome (the
           same answer, just after it), or NOREPL at its own deadline;
        d. any other copy: with n = min(J's REPLICATE, the duplicate's),
           J's ID at once when n <= 1, NOREPL at once when fewer than n - 1
           peers are reachable, else the duplicate parks for a promise
           round: J's ID once n copies are confirmed, or as soon as J is
           acked there; NOREPL at its own deadline or once J left the node.
      And the ID is earned ((1), at that moment): a. J acked by a consumer,
      or its ADDJOB answered with the ID, or an earlier ID answer earned it
      (n >= 1), or its TTL ran out; b. acked: J acked by a consumer;
      confirmed: J acked, or its ADDJOB answered with the ID, or an earlier
      answer earned J's REPLICATE level, or as many copies were flagged
      promised as J's REPLICATE (a round that reached it, counted as in
      d); c. J's ADDJOB answered with the ID (its (1) check covers the
      copies); d. at once (n <= 1): n copies
      (holders now, and copies lost since they were made); in a round: n
      copies a round confirmed (holders whose copy is flagged FLAG_PROMISED,
      or acked, or was loaded from their AOF since J was made, which may
      have cleared the flag; copies in a down node's AOF; copies lost
      since), or J acked. From then on J is owed at level n (d, for a duplicate with
      RETRY > 0: an at-most-once producer accepts a loss; a, b: nothing
      beyond what earned it; c: its ADDJOB's).
(3), nothing raises, is the runner's: any exception fails the seed. And now
and then during the run, each node's books must agree with themselves
(check_books): a broken invariant shows where it breaks, long before it
loses or revives a job.

Failed jobs (ADDJOB MAXDELIVERIES n [DEADLETTER q], BACKOFF; NACK DELAY;
QREQUEUE). The cores are TracedNodes: each enqueue() (the engine's cpdef
dispatch calls a Python override even from C), each MSG_DEAD heard
(mark_dead) and each QREQUEUE (revive_dead) is reported with the job's
counters just before and after, unchanged. A *decision* is an enqueue()
that moved the job into its dead-letter queue; a *counted re-queue* is an
enqueue() that raised nacks (a NACK) or deliveries (a RETRY re-queue: the
awake timer's, or an ENQUEUE). A job's *life* ends at each QREQUEUE that
moves it (counters back to 0). The reasoning, for a job with limit n:

  * What the counters may hold. nacks and deliveries grow only by counted
    re-queues: on the node that re-queues, and on the other holders by
    QUEUED with MSG_INCR_NACKS / MSG_INCR_DELIV, one per event; copies
    (REPLJOB, YOURJOBS, the AOF) carry some holder's counters, never more;
    QREQUEUE resets them. So on any node, at any time,
        nacks      <= NACKs accepted (nack_jobs answered 1) + QUEUED
                      frames with MSG_INCR_NACKS the network duplicated
                      + stale ones (below),
        deliveries <= RETRY re-queues that happened on any node + QUEUED
                      frames with MSG_INCR_DELIV duplicated + stale ones,
    both counted over the job's whole run (a sound bound across lives).
    A *stale* QUEUED is one in flight to a node when that node made a new
    copy (REPLJOB, YOURJOBS): the copy may carry a counter that counts its
    event already, and the QUEUED then counts it again (the engine's
    increments are not idempotent; on a reordering link, or with the copy
    from a third node, this happens: seed 654, "counts an event twice" in
    the trace). Counters are best effort the other way too: a lost QUEUED
    leaves a holder behind, lower than this, which is allowed.
  * (5) never early. A decision must be due on the deciding node's own
    counters before the re-queue counts itself (1 + nacks + deliveries
    >= n), and those counters must be within the bounds above. Each
    accepted NACK follows its own GETJOB delivery (a consumer NACKs a job
    it got, once), so together: GETJOB deliveries + RETRY re-queues +
    duplicated increments >= n, checked too. That is the promise: a job
    is dead-lettered only once it was handed out n times, counting a
    RETRY re-queue as a delivery (a job re-queued by its timer is
    presumed delivered and lost, as Disque's additional-deliveries does:
    with a holder cut off from the one that has it queued, that can be a
    job nobody consumed; the bound then says the counters are what the
    re-queues made, not more).
  * (6) on time. A counted re-queue whose counters were due (1 + nacks +
    deliveries >= n before it, job not dead yet) must be a decision; a
    NACK DELAY that was due must dead-letter at once, not later. Queueings
    that count nothing (the first, a federation move, a delayed NACK's
    own queueing, counted and checked when asked for, QREQUEUE's) are
    not re-queues and decide nothing.
  * (7) one node. The decider tells the job's other holders with QUEUED
    + MSG_DEAD; a holder that hears it marks its copy dead, so it cannot
    decide in this life again. A second decision in the same life is
    excused only if the first decider's MSG_DEAD to that node was lost
    (a fault: drop, partition, cut, crash) or still in flight (concurrent
    decisions: both re-queued before either heard the other), or the
    decider did not list the node among the holders (a copy made while
    its holder list was on its way: federation or healing in flight), or
    the node's copy was made after the first decision (from a holder that
    had not heard yet, a REPLJOB the MSG_DEAD overtook, or a duplicated
    REPLJOB that brings a deleted job back), or revised after it (a
    QREQUEUE elsewhere, whose REPLJOB MSG_REVISED came after the MSG_DEAD:
    the revive and the death crossed; lives are counted per job, not per
    copy), or the node restarted since (its AOF does not record the move).
    So without faults, reordering, concurrent re-queues or QREQUEUE racing
    a death, a job is dead-lettered on one node.

Idempotent producers (ADDJOB ... DEDUP key [WINDOW s]; engine/node/dedup.pxi).
The checker keeps its own model of each node's table, one entry per job:
node i remembers a job's (queue, key) when it makes the job (its ADDJOB,
even on a leaving node that keeps no copy) or receives a copy of it (its
AOF record seen: REPLJOB, YOURJOBS, REPLJOB flagged MSG_PROMISED), with
ADDJOB's queue (wherever the job moved since) and window end, unless that
window ended; it forgets it when its window ends, when it writes an
UNDEDUP record (a failed ADDJOB), or when it crashes. A restart from the
AOF brings back what its records carry: the entries of its LOADJOB and
DEDUP records, less those of the UNDEDUP records after them, whose window
is still open (an expired job's record too). Nothing else may add or drop
an entry; a lookup answers the open entry of the pair whose window ends
last. Two jobs may share a pair (a retry that reached a node that knew
neither): both are remembered, each until its own window ends.
"""

from __future__ import annotations

import itertools
from typing import NamedTuple

from disque_py.formats import bus as msg
from disque_py.base.effects import ToPeer, Unblock
from disque_py.engine import (ACKED, DEAD_NONE, DEDUP_MEMORY_OVERHEAD, FLAG_COUNTED, FLAG_PROMISED,
                              QUEUE_MEMORY_OVERHEAD, QUEUED, WAIT_REPL)
from disque_py.engine.records import deserialize_job
from disque_py.node.node import Node
from disque_py.persistence import aof_format
from tests.sim.dedup_checks import DedupAsk, DedupChecks, record_dedup
from tests.sim.outcomes import OK, REFUSED, UNKNOWN, WAITING
from tests.unit.simnet import COPY_KINDS, SimNet

QUEUE_MEMORY = QUEUE_MEMORY_OVERHEAD     # used_memory per queue
DEDUP_KEY_MEMORY = DEDUP_MEMORY_OVERHEAD  # ... per DEDUP key, beyond the key


class TracedNode(Node):
    """A Node that reports to its `tracer` (the Checker) what decides a
    job's dead-lettering: every enqueue() of a job with MAXDELIVERIES (the
    engine calls this override from C too, through cpdef dispatch), every
    MSG_DEAD heard (mark_dead) and every QREQUEUE (revive_dead), with the
    counters before and after. It changes nothing: each call is Node's."""

    tracer = None
    index = -1

    def enqueue(self, job, nack=False, now=0, q=None):
        if self.tracer is None or job.options is None:
            return Node.enqueue(self, job, nack, now, q)
        options = self.options_of(job)
        if options is None or not options.max_deliveries:
            return Node.enqueue(self, job, nack, now, q)
        before = (job.nacks, job.deliveries, options.dead_reason, job.queue)
        queued = Node.enqueue(self, job, nack, now, q)
        self.tracer.enqueued(self.index, job, options, nack, before, queued)
        return queued

    def mark_dead(self, job):
        options = self.options_of(job)
        was = options.dead_reason if options is not None else None
        Node.mark_dead(self, job)
        if self.tracer is not None and options is not None:
            self.tracer.heard_dead(self.index, job, options, was)

    def revive_dead(self, dead_queue, to_queue, count):
        moved = Node.revive_dead(self, dead_queue, to_queue, count)
        if self.tracer is not None:
            self.tracer.revived(self.index, moved)
        return moved


class Decision(NamedTuple):
    """A node moved a job to its dead-letter queue (not a MSG_DEAD mark)."""
    at: int
    node: int
    life: int
    incarnation: int
    holders: tuple              # the node's holder list then (its MSG_DEAD went there)
    seq: int                    # the checker's order of events (several share a ms)
    sent: int                   # len(net.sent) then: net.sent[sent:] came after it
    received: int               # len(net.delivered) then: likewise, frames received
    # (peer, kind) of the copies of the job the node had made before deciding,
    # not sent yet: a node's frames leave once its call returns, so the
    # first such frame after `sent` that carries the job holds a copy made
    # before the decision.
    pending: frozenset


class JobFacts:
    __slots__ = ("id", "name", "node", "repl", "retry", "async_", "external", "stand_in",
                 "outcome", "deliveries", "losses", "closed_at", "acked",
                 "body", "max_deliveries", "nacks_sent", "requeues", "life", "decisions",
                 "stale_nacks", "stale_deliveries", "queue", "key", "until", "level",
                 "answer", "expires", "made_at")

    def __init__(self, job_id: bytes, name: str, node: int, repl: int, retry: int,
                 async_: bool, external: bool) -> None:
        self.id = job_id
        self.name = name
        self.node = node                # where ADDJOB ran
        self.repl = repl
        self.retry = retry
        self.async_ = async_
        self.external = external        # added on a leaving node: it keeps no copy
        self.stand_in = external        # its wait-repl stand-in there is still to go
        self.outcome = WAITING
        self.deliveries: list = []      # (time, node)
        self.losses: set[int] = set()
        self.closed_at: int | None = None
        self.acked = False              # a consumer sent ACKJOB or FASTACK for it
        self.body: bytes | None = None  # what ADDJOB sent (None: not checked)
        self.max_deliveries = 0         # MAXDELIVERIES (0: none)
        self.nacks_sent = 0             # NACKs a node accepted (nack_jobs answered 1)
        self.requeues = 0               # RETRY re-queues (deliveries counted), any node
        self.life = 0                   # QREQUEUEs that moved it (each resets counters)
        self.decisions: list[Decision] = []
        # QUEUED increments in flight to a node when it made a copy: the copy
        # may count their events already, and they count them again.
        self.stale_nacks = self.stale_deliveries = 0
        self.queue: bytes | None = None
        self.key: bytes | None = None   # DEDUP (None: none)
        self.until = 0                  # the key's window's end (ms)
        self.level = 0                  # the copies ID answers to duplicates stood for (max)
        self.answer = None              # what its own ADDJOB was answered, once it was
        self.expires = 0                # its TTL's end (ms)
        self.made_at = 0                # when its ADDJOB ran (ms)

    def promised_copies(self) -> int:
        """The copies clients were promised: its ADDJOB's REPLICATE if that
        succeeded, or the level an ID answered to a duplicate stood for."""
        return max(self.repl if self.outcome == OK else 0, self.level)


class Checker(DedupChecks):
    def __init__(self, net: SimNet, log) -> None:
        self.net = net
        self.log = log                  # log(text, job=None): the run's trace
        self.jobs: dict[bytes, JobFacts] = {}
        self.violations: list[str] = []
        self.books_broken = False
        self.strict = False             # no excuse for REPLICATE >= 2 (holders replaced)
        # Per node, since its core was made: dead-letterings it decided, and
        # copies it marked dead on hearing MSG_DEAD (INFO counts both).
        self.dead_counted = [0] * len(net.nodes)
        self.dead_queue_names: set[bytes] = set()   # queues only dead jobs reach (the workload's)
        self.restarts: dict[int, list[int]] = {}     # node -> when it came back
        self.copies_made: dict[tuple, int] = {}      # (node, job ID) -> seq of its last copy
        self._seq = itertools.count()                # orders decisions and copies
        # Idempotent producers: the model of each node's DEDUP table, and of
        # what its AOF would bring back ({job ID: (queue, key, window end)}).
        self.dedup_table: list[dict] = [{} for _ in net.nodes]
        self.dedup_disk: list[dict] = [{} for _ in net.nodes]
        self.dedup_answers = 0                       # ADDJOBs answered without a new job
        self.dedup_forgotten: list = []              # (node, when, job ID): UNDEDUP, judged later
        self.parked: dict = {}                       # client -> dedup_checks.ParkedDuplicate
        self._table_reported: set = set()            # (node, entry, what): reported once
        net.observer = self
        for i, node in enumerate(net.nodes):
            self.booted(i, node)

    # ------------------------------------------------------------ told by the workload

    def added(self, job_id: bytes, node: int, repl: int, retry: int, async_: bool,
              parked: bool, external: bool = False, body: bytes | None = None,
              max_deliveries: int = 0, queue: bytes | None = None, key: bytes | None = None,
              until: int = 0, job=None, ask: DedupAsk | None = None) -> JobFacts:
        """ADDJOB made a job (`key`: its DEDUP key, `until`: the end of the
        window ADDJOB asked for; `job`: the Job, to read its options; `ask`:
        dedup_before()'s look at the node, for a key)."""
        facts = JobFacts(job_id, "j%d" % len(self.jobs), node, repl, retry, async_, external)
        facts.body = body
        facts.max_deliveries = max_deliveries
        facts.queue, facts.key, facts.until = queue, key, until
        facts.made_at = self.net.clock.now_ms()
        if job is not None:
            facts.expires = job.etime * 1000
        self.jobs[job_id] = facts
        if not parked:
            facts.outcome = OK
            facts.answer = job_id
        if key is not None:
            self._dedup_made(node, facts, job, ask)
        self._check_closed(facts)       # ASYNC on a leaving node: its frames may be lost
        return facts

    def delivered(self, job_id: bytes, node: int, job=None) -> None:
        facts = self.jobs.get(job_id)
        if facts is None:
            return
        now = self.net.clock.now_ms()
        facts.deliveries.append((now, node))
        if facts.closed_at is not None:
            why = "its ACK had reached every copy" if facts.acked else "no copy was left"
            self.violate(facts, f"(2) delivered by node {node} after {why} (at "
                                f"{self.net_time(facts.closed_at)})")
        if job is not None:
            self._check_delivered_copy(facts, node, job)

    def _check_delivered_copy(self, facts: JobFacts, i: int, job) -> None:
        """(8): what a consumer gets is the job ADDJOB made, and a copy in
        a dead-letter queue is a dead one."""
        if facts.body is not None and job.body != facts.body:
            self.violate(facts, f"(8) node {i} delivered body {job.body!r}, ADDJOB sent "
                                f"{facts.body!r}")
        if job.queue in self.dead_queue_names:
            node = self.net.nodes[i]
            options = node.options_of(job) if node.lookup(job.id) is job else None
            if options is None or options.dead_reason == DEAD_NONE:
                self.violate(facts, f"(8) node {i} delivered it from dead-letter queue "
                                    f"{job.queue!r} but its copy is not dead ({options!r})")

    def nacking(self, job_id: bytes) -> JobFacts | None:
        """A consumer is about to NACK: count it now, as the hooks that see
        the NACK counted may need it (nacked() takes it back if no node
        accepted it)."""
        facts = self.jobs.get(job_id)
        if facts is not None:
            facts.nacks_sent += 1
        return facts

    def nacked(self, i: int, facts: JobFacts | None, before: tuple | None, delay_ms: int,
               accepted: int) -> None:
        """Node i answered a NACK (DELAY delay_ms; < 0: none); `before`:
        before_nack() of its copy."""
        if facts is None:
            return
        if not accepted:
            facts.nacks_sent -= 1
            return
        # (6): a NACK due to dead-letter the job does so at once, DELAY or not.
        if before is None:
            return
        nacks, deliveries, dead, n, delayed_nack = before
        options = self._options_on(i, facts.id)
        if dead == DEAD_NONE and n and 1 + nacks + deliveries >= n and \
                (options is None or options.dead_reason == DEAD_NONE):
            how = "NACK" if delay_ms < 0 else f"NACK DELAY {delay_ms // 1000}"
            self.violate(facts, f"(6) node {i} took {how} at delivery "
                                f"{1 + nacks + deliveries} of MAXDELIVERIES {n} and did not "
                                f"dead-letter it (it is in {self._queue_on(i, facts.id)!r}"
                                f"{'; a delayed NACK was pending' if delayed_nack else ''})")

    def before_nack(self, i: int, job_id: bytes) -> tuple | None:
        """The counters of node i's copy, for nacked()."""
        job = self.net.nodes[i].lookup(job_id)
        options = self._options_on(i, job_id)
        if job is None or options is None:
            return None
        return (job.nacks, job.deliveries, options.dead_reason, options.max_deliveries,
                bool(job.flags & FLAG_COUNTED))

    def _queue_on(self, i: int, job_id: bytes):
        job = self.net.nodes[i].lookup(job_id)
        return job.queue if job is not None else None

    def _options_on(self, i: int, job_id: bytes):
        node = self.net.nodes[i]
        job = node.lookup(job_id)
        return node.options_of(job) if job is not None else None

    def acked(self, job_id: bytes) -> None:
        facts = self.jobs.get(job_id)
        if facts is not None:
            facts.acked = True

    def crashing(self, i: int) -> list[bytes]:
        """Node i is about to die: count the copies that die with it."""
        net = self.net
        on_disk = net.aof_jobs[i] if net.aof[i] is not None else ()
        lost = []
        for job in net.nodes[i].jobs.values():
            facts = self.jobs.get(job.id)
            if facts is not None and job.state != ACKED and job.id not in on_disk:
                facts.losses.add(i)
                lost.append(job.id)
        lost.sort()                     # the job table's order follows PYTHONHASHSEED
        for facts in self.jobs.values():
            if facts.node == i and facts.outcome == WAITING:
                facts.outcome = UNKNOWN      # the producer's connection died
        return lost

    def crashed(self, lost: list[bytes]) -> None:
        for job_id in lost:
            self._check_closed(self.jobs[job_id])

    # ------------------------------------------------------------ SimNet observer

    def observe_record(self, i: int, argv: list[bytes]) -> None:
        """An AOF record node i's core noted (aof_format.v2_records' form)."""
        command = argv[0]
        if command == b"DELJOB":
            facts = self.jobs.get(argv[1])
            if facts is None:
                return
            if facts.stand_in and i == facts.node:
                facts.stand_in = False  # the producer's stand-in goes once copies exist
            elif facts.retry and facts.outcome == OK and not facts.acked:
                self.violate(facts, f"(1) node {i} deleted its copy before any ACK")
            self._check_closed(facts)
        elif command == b"LOADJOB":
            job = deserialize_job(argv[1])
            facts = self.jobs.get(job.id)
            if facts is not None and facts.max_deliveries:
                self._copy_made(i, job, facts)
            self._dedup_copy(i, job, facts)
        elif command == aof_format.DEDUP:
            self._dedup_remember(i, argv[3], argv[1], argv[2], int(argv[4]))
        elif command == aof_format.UNDEDUP:
            self._dedup_undedup(i, argv[1], argv[2], argv[3])

    def observe(self, i: int, effect) -> None:
        """An Unblock effect of node i: a parked client answered."""
        if type(effect) is Unblock:
            client = effect.waiter.client
            if client.producer and client.follows:
                self._parked_answered(i, client, effect.outcome)
            elif client.producer:
                self._producer_answered(i, client.job_id, effect.outcome)
            elif type(effect.outcome) is list:
                for job in effect.outcome:
                    self.delivered(job.id, i, job)

    def frame_done(self, trace) -> None:
        for job_id in trace.keys:
            facts = self.jobs.get(job_id)
            if facts is not None:
                self._check_closed(facts)

    def _producer_answered(self, i: int, job_id: bytes, outcome) -> None:
        facts = self.jobs[job_id]
        facts.answer = outcome
        if outcome != job_id:
            facts.outcome = REFUSED
            self.log(f"{facts.name} ADDJOB answered {outcome}", job_id)
            return
        facts.outcome = OK
        if facts.deliveries:
            # Copies re-queued themselves (RETRY) while the producer waited,
            # and a consumer's ACK counted as replication (as in Disque).
            self.log(f"{facts.name} ADDJOB answered with the ID, after a delivery", job_id)
            return
        holders = self.holders(job_id)
        self.log(f"{facts.name} ADDJOB answered with the ID; copies on {sorted(holders)}"
                 f", lost on {sorted(facts.losses)}", job_id)
        if len(holders | facts.losses) < facts.repl:
            self.violate(facts, f"(1) ADDJOB REPLICATE {facts.repl} answered with the ID "
                                f"with copies on {sorted(holders)} only (lost on "
                                f"{sorted(facts.losses)})")

    # ------------------------------------------------------------ failed jobs (TracedNode)

    def booted(self, i: int, node) -> None:
        if isinstance(node, TracedNode):
            node.tracer, node.index = self, i
        self.dead_counted[i] = 0
        # A new core remembers nothing, but what its AOF (loaded next) carries.
        now = self.net.clock.now_ms()
        self.dedup_table[i] = {} if self.net.aof[i] is None else \
            {job_id: entry for job_id, entry in self.dedup_disk[i].items() if entry[2] > now}

    def enqueued(self, i: int, job, options, nack: bool, before: tuple, queued: bool) -> None:
        """Node i ran enqueue() on a job with MAXDELIVERIES: was it a counted
        re-queue, a decision, and were both right? (5), (6), (7)."""
        nacks0, deliveries0, dead0, queue0 = before
        decided = dead0 == DEAD_NONE and options.dead_reason != DEAD_NONE
        if decided:
            self.dead_counted[i] += 1
        facts = self.jobs.get(job.id)
        if facts is None:
            return
        counted = (job.nacks, job.deliveries) != (nacks0, deliveries0)
        n = options.max_deliveries
        if not counted:
            if decided:
                self.violate(facts, f"(5) node {i} dead-lettered it on a queueing that "
                                    f"counted nothing (nacks {nacks0}, deliveries {deliveries0})")
            return
        retry_requeue = job.deliveries != deliveries0
        due = dead0 == DEAD_NONE and 1 + nacks0 + deliveries0 >= n
        at = 1 + nacks0 + deliveries0
        if due and not decided:
            self.violate(facts, f"(6) node {i} re-queued it in {job.queue!r} at delivery "
                                f"{at} of MAXDELIVERIES {n}, not in its dead-letter queue")
        if decided:
            self._decided(i, job, facts, options, nack, retry_requeue, nacks0, deliveries0,
                          queue0)
        if retry_requeue:
            facts.requeues += 1

    def _decided(self, i: int, job, facts: JobFacts, options, nack: bool, retry_requeue: bool,
                 nacks0: int, deliveries0: int, queue0: bytes) -> None:
        net, n = self.net, options.max_deliveries
        now = net.clock.now_ms()
        expected = options.deadletter if options.deadletter is not None else queue0 + b":dead"
        if job.queue != expected or options.origin != queue0:
            self.violate(facts, f"(8) node {i} dead-lettered it from {queue0!r} into "
                                f"{job.queue!r} (origin {options.origin!r}), not {expected!r}")
        self.log(f"{facts.name} dead-lettered on n{i} by {'NACK' if nack else 'RETRY'}: "
                 f"{queue0.decode()} -> {job.queue.decode()} at nacks {nacks0}, deliveries "
                 f"{deliveries0} (limit {n}; {len(facts.deliveries)} GETJOB deliveries, "
                 f"{facts.nacks_sent} NACKs, {facts.requeues} RETRY re-queues so far)", job.id)
        # (5) never early: due on its own counters, and those counters are
        # what happened (see the module's docstring).
        dup_nacks = self._duplicated_increments(job.id, msg.MSG_INCR_NACKS) + facts.stale_nacks
        dup_deliveries = self._duplicated_increments(job.id, msg.MSG_INCR_DELIV) \
            + facts.stale_deliveries
        nacks_bound = facts.nacks_sent - (1 if nack else 0) + dup_nacks
        deliveries_bound = facts.requeues + dup_deliveries
        if 1 + nacks0 + deliveries0 < n:
            self.violate(facts, f"(5) node {i} dead-lettered it at delivery "
                                f"{1 + nacks0 + deliveries0} of MAXDELIVERIES {n}")
        if nacks0 > nacks_bound - facts.stale_nacks or \
                deliveries0 > deliveries_bound - facts.stale_deliveries:
            self.log(f"{facts.name}: n{i}'s counters count an event twice (a copy made while "
                     f"the QUEUED counting it was on its way)", job.id)
        if nacks0 > nacks_bound:
            self.violate(facts, f"(5) node {i} dead-lettered it counting {nacks0} NACKs; "
                                f"consumers NACKed it {facts.nacks_sent - (1 if nack else 0)} "
                                f"times before (+{dup_nacks} QUEUED duplicated or in "
                                f"flight to a new copy)")
        if deliveries0 > deliveries_bound:
            self.violate(facts, f"(5) node {i} dead-lettered it counting {deliveries0} "
                                f"additional deliveries; {facts.requeues} RETRY re-queues "
                                f"happened (+{dup_deliveries} QUEUED duplicated or in "
                                f"flight to a new copy)")
        handed = len(facts.deliveries) + facts.requeues + (1 if retry_requeue else 0)
        if handed + dup_nacks + dup_deliveries < n:
            self.violate(facts, f"(5) node {i} dead-lettered it after {len(facts.deliveries)} "
                                f"GETJOB deliveries and {handed - len(facts.deliveries)} RETRY "
                                f"re-queues, MAXDELIVERIES {n}")
        # (7) one node per life.
        pending = frozenset((net.index[effect.node_id], effect.kind)
                            for effect in net.nodes[i].effects
                            if type(effect) is ToPeer and effect.kind in COPY_KINDS
                            and effect.item[:40] == job.id)
        decision = Decision(now, i, facts.life, net.incarnation[i], job.delivered,
                            next(self._seq), len(net.sent), len(net.delivered), pending)
        for earlier in facts.decisions:
            if earlier.life == facts.life:
                why = self._second_decision_excuse(job.id, earlier, decision)
                if why is None:
                    self.violate(facts, f"(7) dead-lettered by node {i} and, earlier in the "
                                        f"same life, by node {earlier.node} (at "
                                        f"{self.net_time(earlier.at)})")
                else:
                    self.log(f"{facts.name} dead-lettered again on n{i} (first on "
                             f"n{earlier.node}): {why}", job.id)
        facts.decisions.append(decision)

    def _second_decision_excuse(self, job_id: bytes, first: Decision,
                                second: Decision) -> str | None:
        net = self.net
        x, y = first.node, second.node
        if x == y:
            restarted = second.incarnation != first.incarnation
        else:
            restarted = self._restarted_between(y, first.at, second.at)
        if restarted:
            return f"n{y} restarted since"
        if self.copies_made.get((y, job_id), -1) > first.seq:
            return f"n{y}'s copy was made after (a stale or reordered copy, not there to hear)"
        for m in net.delivered[first.received:]:
            if m.dst == y and m.kind == msg.REPLJOB and m.mflags & msg.MSG_REVISED \
                    and job_id in m.keys:
                return f"n{y}'s copy was revised since by n{m.src}'s QREQUEUE (REPLJOB " \
                       f"MSG_REVISED), that the MSG_DEAD did not see"
        if x == y:
            return None
        if net.ids[y] not in first.holders:
            return f"n{x} did not list n{y} among the holders"
        frames = [m for m in net.sent[first.sent:] if m.at == first.at and m.src == x
                  and m.dst == y and m.kind == msg.QUEUED and m.mflags & msg.MSG_DEAD
                  and job_id in m.keys]
        if not frames:
            return None
        dropped = {id(m) for m in net.dropped}
        in_flight = {id(entry[2]) for entry in net._inflight}
        if any(id(m) in dropped for m in frames):
            return f"n{x}'s MSG_DEAD to n{y} was lost"
        if any(id(m) in in_flight for m in frames):
            return f"n{x}'s MSG_DEAD to n{y} was still in flight (concurrent re-queues)"
        return None

    def _copy_made(self, i: int, job, facts: JobFacts) -> None:
        """Node i made a copy (ADDJOB, REPLJOB, YOURJOBS: its AOF record, a
        JobRecord).
        (8): one made from a frame its dead-letterer sent after deciding, in
        the same life, is dead too (copies carry the dead state)."""
        net = self.net
        frame = net.delivering
        if frame is None or frame.kind not in COPY_KINDS or job.id not in frame.keys:
            return                      # the producer's own copy (ADDJOB, GOTJOB, SETACK)
        if frame.kind == msg.REPLJOB and frame.mflags & msg.MSG_PROMISED:
            return      # a promise round's REPLJOB makes no copy: the holder persists its flag
        self.copies_made[(i, job.id)] = next(self._seq)
        for entry in net._inflight:
            m = entry[2]
            if m.dst == i and m.kind == msg.QUEUED and job.id in m.keys:
                facts.stale_nacks += bool(m.mflags & msg.MSG_INCR_NACKS)
                facts.stale_deliveries += bool(m.mflags & msg.MSG_INCR_DELIV)
        if not facts.decisions:
            return
        last = facts.decisions[-1]
        if last.life != facts.life or frame.src != last.node or frame.at < last.at \
                or net.incarnation[last.node] != last.incarnation \
                or not any(m is frame for m in net.sent[last.sent:]) \
                or self._sent_before(frame, job.id, last) \
                or self._copy_replaced(last.node, job.id, last):
            return
        node = net.nodes[i]
        copy = node.lookup(job.id)
        options = node.options_of(copy) if copy is not None else None
        if options is None or options.dead_reason == DEAD_NONE:
            self.violate(facts, f"(8) node {i} made a live copy ({job.queue!r}, {options!r}) "
                                f"from n{frame.src}'s {frame.name} of {self.net_time(frame.at)},"
                                f" sent after n{frame.src} dead-lettered it")

    def _sent_before(self, frame, job_id: bytes, decision: Decision) -> bool:
        """The frame carries a copy the node made before deciding (it left
        with the frames of the same call, after the decision was seen): the
        first frame of its kind to that peer that carries the job. Not the
        first of its kind: other frames of that kind, with other flags (a
        promise round's REPLJOB), may leave before it in the same flush."""
        if (frame.dst, frame.kind) not in decision.pending:
            return False
        first = next(m for m in self.net.sent[decision.sent:]
                     if m.src == decision.node and m.dst == frame.dst and m.kind == frame.kind
                     and job_id in m.keys)
        return first is frame

    def _copy_replaced(self, i: int, job_id: bytes, since: Decision) -> bool:
        """Node i's copy was made again, or revised by a QREQUEUE elsewhere,
        after `since`: it may be alive again without a new life here."""
        if self.copies_made.get((i, job_id), -1) > since.seq:
            return True
        return any(m.dst == i and m.kind == msg.REPLJOB and m.mflags & msg.MSG_REVISED
                   and job_id in m.keys for m in self.net.delivered[since.received:])

    def _restarted_between(self, i: int, start: int, end: int) -> bool:
        return any(start <= at <= end for at in self.restarts.get(i, ()))

    def aof_cut(self, i: int) -> None:
        """Node i's AOF lost its tail while it was down (a damaged file):
        what the cut file carries is what the node will remember, and a job
        whose DELJOB was cut off comes back there (a delivery after its ack
        is then the disk's doing: the job is open again, owed an ack)."""
        disk: dict = {}
        for argv in self.net.aof_records(i):
            command = argv[0].upper()
            if command == b"LOADJOB":
                job = deserialize_job(argv[1])
                pair = record_dedup(job)
                if pair is not None:
                    disk[job.id] = pair
            elif command == aof_format.DEDUP:
                disk[argv[3]] = (argv[1], argv[2], int(argv[4]))
            elif command == aof_format.UNDEDUP:
                disk.pop(argv[3], None)
        self.dedup_disk[i] = disk
        for job_id in sorted(self.net.aof_jobs[i]):
            facts = self.jobs.get(job_id)
            if facts is not None and facts.closed_at is not None:
                facts.closed_at = None
                self.log(f"{facts.name} back on n{i}: its DELJOB was cut off its AOF", job_id)

    def restarted(self, i: int) -> None:
        self.restarts.setdefault(i, []).append(self.net.clock.now_ms())
        if self.net.aof[i] is not None:
            self._check_dedup_table(i, "after its restart from its AOF")

    def _duplicated_increments(self, job_id: bytes, flag: int) -> int:
        return sum(1 for m in self.net.duplicated
                   if m.kind == msg.QUEUED and m.mflags & flag and job_id in m.keys)

    def heard_dead(self, i: int, job, options, was) -> None:
        if was == DEAD_NONE and options.dead_reason != DEAD_NONE:
            self.dead_counted[i] += 1
            facts = self.jobs.get(job.id)
            if facts is not None:
                self.log(f"{facts.name} marked dead on n{i} (MSG_DEAD): now in "
                         f"{job.queue.decode()}", job.id)

    def revived(self, i: int, jobs) -> None:
        for job in jobs:
            facts = self.jobs.get(job.id)
            if facts is not None:
                facts.life += 1
                self.log(f"{facts.name} QREQUEUEd on n{i} to {job.queue.decode()} "
                         f"(life {facts.life})", job.id)

    # ------------------------------------------------------------ copies

    def holders(self, job_id: bytes) -> set[int]:
        """Nodes with a copy that is not acknowledged: in memory, or in the
        AOF of a down node."""
        net = self.net
        found = set()
        for i, node in enumerate(net.nodes):
            if net.up[i]:
                job = node.jobs.get(job_id)
                if job is not None and job.state != ACKED:
                    found.add(i)
            elif net.aof[i] is not None and job_id in net.aof_jobs[i]:
                found.add(i)
        return found

    def promised_holders(self, facts: JobFacts) -> set[int]:
        """Holders whose copy a promise round confirmed: flagged FLAG_PROMISED
        (or acked) in memory, or in the AOF of a down node, or loaded from
        its AOF since the job was made (the flags an AOF record carries
        may predate the round's: they are not looked at)."""
        net = self.net
        found = set()
        now = net.clock.now_ms()
        for i, node in enumerate(net.nodes):
            if net.up[i]:
                job = node.jobs.get(facts.id)
                if job is not None and (
                        job.state == ACKED or job.flags & FLAG_PROMISED
                        or net.aof[i] is not None
                        and self._restarted_between(i, facts.made_at, now)):
                    found.add(i)
            elif net.aof[i] is not None and facts.id in net.aof_jobs[i]:
                found.add(i)
        return found

    def _check_closed(self, facts: JobFacts) -> bool:
        if facts.closed_at is None:
            if self.net.copies_in_flight[facts.id] > 0 or self.holders(facts.id):
                return False
            facts.closed_at = self.net.clock.now_ms()
            self.log(f"{facts.name} closed: no copy left anywhere", facts.id)
        return True

    def _name(self, job_id) -> str:
        if job_id is None:
            return "no job"
        facts = self.jobs.get(job_id)
        return facts.name if facts is not None else job_id.decode()

    def names_of(self, job_ids) -> list[str]:
        return sorted((self._name(job_id) for job_id in job_ids),
                      key=lambda name: (len(name), name))

    # ------------------------------------------------------------ the books

    def check_books(self) -> None:
        if self.books_broken:
            return                      # the first break says it all
        for i in self.net.live():
            problem = books_problem(self.net.nodes[i])
            if problem is not None:
                self.books_broken = True
                self.violations.append(f"(books) node {i} at "
                                       f"{self.net_time(self.net.clock.now_ms())}: {problem}")
                self.log("VIOLATION (books) " + problem)
                return
        for i in self.net.live():
            self._check_dedup_table(i, "looked at")

    # ------------------------------------------------------------ at the end

    def finish(self) -> list[str]:
        """The checks that need quiescence; returns every violation."""
        self._check_memory()
        self._check_dead_counts()
        for i in self.net.live():
            self._check_dedup_table(i, "at the end")
        self._judge_dedup()
        duplicated = self._duplicated_copies()
        for facts in self.jobs.values():
            if facts.outcome != OK and not facts.level:
                continue                # nobody was promised this job
            if facts.retry == 0:
                if len(facts.deliveries) > 1 and facts.id not in duplicated:
                    self.violate(facts, f"(1) at-most-once job delivered "
                                        f"{len(facts.deliveries)} times: {facts.deliveries}")
            elif not facts.acked and not self._excused(facts):
                what = "never delivered" if not facts.deliveries else \
                    f"delivered {len(facts.deliveries)} times, never acknowledged"
                promised = f"; IDs answered to duplicates stood for {facts.level} copies" \
                    if facts.level else ""
                self.violate(facts, f"(1) {what}; REPLICATE {facts.repl}"
                                    f"{' ASYNC' if facts.async_ else ''}, its ADDJOB "
                                    f"{facts.outcome}{promised}, copies lost on "
                                    f"{sorted(facts.losses) or 'no node'}")
        return self.violations

    def _excused(self, facts: JobFacts) -> bool:
        """Lost the way every promise made allows: its ADDJOB's (if it
        succeeded) and the IDs answered to duplicates' (n copies: n holders
        died with their copy)."""
        if facts.outcome == OK and not self._excused_addjob(facts):
            return False
        if facts.level and (self.strict and facts.level >= 2
                            or len(facts.losses) < facts.level):
            return False
        return True

    def _excused_addjob(self, facts: JobFacts) -> bool:
        """Lost the way its ADDJOB's promise allows: REPLICATE holders died with their
        copy; an ASYNC job (copies never confirmed) died in crashes. ASYNC
        on a leaving node keeps no copy at all and sends its copies once,
        unconfirmed (as Disque does): a lost frame loses it, crash or not."""
        if facts.async_:
            return (bool(facts.losses) or facts.external) and facts.closed_at is not None
        if self.strict and facts.repl >= 2:
            return False
        return len(facts.losses) >= facts.repl

    def _check_dead_counts(self) -> None:
        """(8): INFO's total_jobs_dead_lettered is the decisions and marks seen
        (it would not be if a path dead-lettered without the hooks knowing)."""
        for i in self.net.live():
            node = self.net.nodes[i]
            if isinstance(node, TracedNode) and node.stats_dead_lettered != self.dead_counted[i]:
                self.violations.append(
                    f"(8) node {i} counts {node.stats_dead_lettered} dead-lettered jobs; the "
                    f"checker saw {self.dead_counted[i]} (decisions and MSG_DEAD marks)")

    def _duplicated_copies(self) -> set[bytes]:
        return {job_id for trace in self.net.duplicated if trace.kind in COPY_KINDS
                for job_id in trace.keys}

    def _check_memory(self) -> None:
        net = self.net
        for i, node in enumerate(net.nodes):
            left = [self.describe(job) for job in node.jobs.values()]
            if left:
                self.violations.append(f"(4) node {i} still holds {len(left)} jobs: "
                                       + ", ".join(left[:5]))
            queued = sum(len(q.jobs) for q in node.queues.values())
            if queued or node.replication.replicating or node.parking.blocked_clients or len(node.schedule):
                self.violations.append(
                    f"(4) node {i}: {queued} queued, {len(node.replication.replicating)} replicating, "
                    f"{node.parking.blocked_clients} clients parked, {len(node.schedule)} scheduled")
            # No job left: the memory counted is the queues' and the DEDUP keys'.
            keys = sum(DEDUP_KEY_MEMORY + len(key) for _, key, _, _ in node.dedup.items())
            expected = QUEUE_MEMORY * len(node.queues) + keys
            if not left and (node.used_memory != expected or node.dedup.memory != keys):
                self.violations.append(
                    f"(4) node {i} counts {node.used_memory} bytes used ({node.dedup.memory} "
                    f"for its DEDUP keys); its {len(node.queues)} queues and "
                    f"{len(node.dedup)} keys take {expected} ({keys})")

    # ------------------------------------------------------------ reporting

    def describe(self, job) -> str:
        facts = self.jobs.get(job.id)
        name = facts.name if facts is not None else job.id.decode()
        state = ("wait-repl", "active", "queued", "acked")[job.state]
        return f"{name} ({state})"

    def violate(self, facts: JobFacts, text: str) -> None:
        self.violations.append(f"{facts.name} {facts.id.decode()}: {text}")
        self.log("VIOLATION " + text, facts.id)

    def net_time(self, at: int) -> str:
        return "t=%d" % (at - self.net.start_ms)


def books_problem(node) -> str | None:
    """What is wrong with a node's own bookkeeping, if anything: every job
    is scheduled; queued jobs, and only they, sit in their queue, in
    GETJOB's order (higher priority first, then older first); jobs waiting
    for copies, and only they, are in the replication loop; the switches
    the engine reads say exactly whether someone waits."""
    waits, consumers = node.waits, node.consumers
    switches = ((node.watch_jobs, bool(waits.job_waits)),
                (node.watch_queues, bool(waits.queue_waits)),
                (node.pattern_waiting, consumers.pattern_waiters is not None))
    if any(switch != expected for switch, expected in switches):
        return f"the engine's wait switches {switches} disagree with the parked clients"
    for job in node.jobs.values():
        if job.awake_due is None:
            return f"{job} is in no awake bucket"
        q = node.queues.get(job.queue) if job.queue is not None else None
        if (job.state == QUEUED) != (q is not None and job in q.jobs):
            return f"{job} is {'not ' if job.state == QUEUED else ''}in its queue"
        if (job.state == WAIT_REPL) != (job in node.replication.replicating):
            return f"{job} is {'not ' if job.state == WAIT_REPL else ''}replicating"
    for job in node.replication.replicating:
        if node.jobs.get(job.id) is not job:
            return f"{job} is replicating but not in the jobs table"
    for q in node.queues.values():
        previous = None
        for job in q.jobs:
            if node.jobs.get(job.id) is not job:
                return f"{job} is in queue {q.name!r} but not in the jobs table"
            if previous is not None and \
                    (previous.priority, -previous.ctime) < (job.priority, -job.ctime):
                return f"queue {q.name!r} serves {job} after {previous}"
            previous = job
    return None
