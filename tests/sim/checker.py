"""The checker: what a simulated cluster promises, watched as the run goes.

It sits on a SimNet as its observer (track_copies on), so it sees, in
order, every copy of a job appear and go on every node (the cores' AOF
effects), every frame carrying whole jobs leave the network, every answer
to a parked client, and (told by the workload) every crash, ADDJOB and
delivery. From that it keeps, per job:

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
      network duplicated a frame that carried it);
  (2) a delivery after the job closed (its ACK had reached every copy);
  (4) memory left after quiescence: jobs, queued jobs, producers parked.
(3), nothing raises, is the runner's: any exception fails the seed. And now
and then during the run, each node's books must agree with themselves
(check_books): a broken invariant shows where it breaks, long before it
loses or revives a job.
"""

from __future__ import annotations

from disque_py.core.effects import AofDelJob, Unblock
from disque_py.core.job import ACKED, QUEUED, WAIT_REPL
from tests.unit.simnet import COPY_KINDS, SimNet

WAITING, OK, REFUSED, UNKNOWN = "waiting", "ok", "refused", "unknown"


class JobFacts:
    __slots__ = ("id", "name", "node", "repl", "retry", "async_", "external", "stand_in",
                 "outcome", "deliveries", "losses", "closed_at", "acked")

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


class Checker:
    def __init__(self, net: SimNet, log) -> None:
        self.net = net
        self.log = log                  # log(text, job=None): the run's trace
        self.jobs: dict[bytes, JobFacts] = {}
        self.violations: list[str] = []
        self.books_broken = False
        self.strict = False             # no excuse for REPLICATE >= 2 (holders replaced)
        net.observer = self

    # ------------------------------------------------------------ told by the workload

    def added(self, job_id: bytes, node: int, repl: int, retry: int, async_: bool,
              parked: bool, external: bool = False) -> JobFacts:
        facts = JobFacts(job_id, "j%d" % len(self.jobs), node, repl, retry, async_, external)
        self.jobs[job_id] = facts
        if not parked:
            facts.outcome = OK
        self._check_closed(facts)       # ASYNC on a leaving node: its frames may be lost
        return facts

    def delivered(self, job_id: bytes, node: int) -> None:
        facts = self.jobs.get(job_id)
        if facts is None:
            return
        now = self.net.clock.now_ms()
        facts.deliveries.append((now, node))
        if facts.closed_at is not None:
            why = "its ACK had reached every copy" if facts.acked else "no copy was left"
            self.violate(facts, f"(2) delivered by node {node} after {why} (at "
                                f"{self.net_time(facts.closed_at)})")

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

    def observe(self, i: int, effect) -> None:
        kind = type(effect)
        if kind is AofDelJob:
            facts = self.jobs.get(effect.job_id)
            if facts is None:
                return
            if facts.stand_in and i == facts.node:
                facts.stand_in = False  # the producer's stand-in goes once copies exist
            elif facts.retry and facts.outcome == OK and not facts.acked:
                self.violate(facts, f"(1) node {i} deleted its copy before any ACK")
            self._check_closed(facts)
        elif kind is Unblock:
            client = effect.waiter.client
            if client.producer:
                self._producer_answered(i, client.job_id, effect.outcome)
            elif type(effect.outcome) is list:
                for job in effect.outcome:
                    self.delivered(job.id, i)

    def frame_done(self, trace) -> None:
        for job_id in trace.keys:
            facts = self.jobs.get(job_id)
            if facts is not None:
                self._check_closed(facts)

    def _producer_answered(self, i: int, job_id: bytes, outcome) -> None:
        facts = self.jobs[job_id]
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

    def _check_closed(self, facts: JobFacts) -> bool:
        if facts.closed_at is None:
            if self.net.copies_in_flight[facts.id] > 0 or self.holders(facts.id):
                return False
            facts.closed_at = self.net.clock.now_ms()
            self.log(f"{facts.name} closed: no copy left anywhere", facts.id)
        return True

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

    # ------------------------------------------------------------ at the end

    def finish(self) -> list[str]:
        """The checks that need quiescence; returns every violation."""
        self._check_memory()
        duplicated = self._duplicated_copies()
        for facts in self.jobs.values():
            if facts.outcome != OK:
                continue
            if facts.retry == 0:
                if len(facts.deliveries) > 1 and facts.id not in duplicated:
                    self.violate(facts, f"(1) at-most-once job delivered "
                                        f"{len(facts.deliveries)} times: {facts.deliveries}")
            elif not facts.acked and not self._excused(facts):
                what = "never delivered" if not facts.deliveries else \
                    f"delivered {len(facts.deliveries)} times, never acknowledged"
                self.violate(facts, f"(1) {what}; REPLICATE {facts.repl}"
                                    f"{' ASYNC' if facts.async_ else ''}, copies lost on "
                                    f"{sorted(facts.losses) or 'no node'}")
        return self.violations

    def _excused(self, facts: JobFacts) -> bool:
        """Lost the way the promise allows: REPLICATE holders died with their
        copy; an ASYNC job (copies never confirmed) died in crashes. ASYNC
        on a leaving node keeps no copy at all and sends its copies once,
        unconfirmed (as Disque does): a lost frame loses it, crash or not."""
        if facts.async_:
            return (bool(facts.losses) or facts.external) and facts.closed_at is not None
        if self.strict and facts.repl >= 2:
            return False
        return len(facts.losses) >= facts.repl

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
            if queued or node.replicating or node.blocked_clients or len(node.schedule):
                self.violations.append(
                    f"(4) node {i}: {queued} queued, {len(node.replicating)} replicating, "
                    f"{node.blocked_clients} clients parked, {len(node.schedule)} scheduled")

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
    is scheduled; queued jobs, and only they, sit in their queue; jobs
    waiting for copies, and only they, are in the replication loop."""
    for job in node.jobs.values():
        if job.awake_due is None:
            return f"{job} is in no awake bucket"
        q = node.queues.get(job.queue) if job.queue is not None else None
        if (job.state == QUEUED) != (q is not None and job in q.jobs):
            return f"{job} is {'not ' if job.state == QUEUED else ''}in its queue"
        if (job.state == WAIT_REPL) != (job in node.replicating):
            return f"{job} is {'not ' if job.state == WAIT_REPL else ''}replicating"
    for job in node.replicating:
        if node.jobs.get(job.id) is not job:
            return f"{job} is replicating but not in the jobs table"
    for q in node.queues.values():
        for job in q.jobs:
            if node.jobs.get(job.id) is not job:
                return f"{job} is in queue {q.name!r} but not in the jobs table"
    return None
