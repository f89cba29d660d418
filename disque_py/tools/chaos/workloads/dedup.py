"""The DEDUP workload: idempotent producers under faults, and where the AP design splits a key.

Each job has its own key (ADDJOB ... DEDUP key WINDOW w, the window longer
than the run) and body. A producer follows the recipe of
docs/beyond-disque.md: it sends the key to a node of its choice (the key's
home), sends the same ADDJOB again there after no answer or NOREPL, and
when that node cannot be reached, to the next node in a fixed order. Once
a job got its ID, some keys are sent once more, a little later, on purpose:
to the node that answered, or to another node (the producer first asks
that node with SHOW whether it holds a copy of the job).

The promise (docs/beyond-disque.md, "Idempotent producers"): deduplication
is per node. A node that knows a key inside its window (it answered an ID
for it, or it holds a copy of the job, which carries the key) never makes
a new job for it: it answers an ID it knows, waits, or answers NOREPL. So
the checks, per key:

  broken   a node made a job for the key (the job's ID names its creator:
           D-<8 hex of the node's ID>-...) after it answered another ID for
           the key, or after SHOW found it holding a copy of the key's job;
           excused if the node may have forgotten (killed or crashed since,
           without an AOF that keeps every write);
  split    two ADDJOBs of one key answered with two IDs where no node broke
           the promise: the retry reached a node that did not know the key
           (a node without a copy, the two sides of a partition, a home
           restarted empty); reported as a rate, excused with its reason;
  extra    the key's body delivered under an ID no ADDJOB answered (an
           attempt whose answer was lost made a job, and a retry elsewhere
           made another); reported as a rate.
A node may legitimately answer an ID it did not make, or a newer one than
the first it answered (it learned a later job of the same key from a
copy: a node answers the key's entry whose window ends last).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, replace

from disque_py.tools.chaos.ledger import Attempt, JobRecord
from disque_py.tools.chaos.link import LinkError
from disque_py.tools.chaos.workloads.base import CheckContext, Findings, Workload, register
from disque_py.tools.chaos.workloads.clients import DOWN_NODE_BACKOFF_S, Producer

SAME_NODE_TRIES = 3            # ADDJOBs to one node (no answer, NOREPL) before the next
RETRY_PAUSE_S = 0.5
DUPLICATE_PROBABILITY = 0.4    # keys sent once more after they got their ID
DUPLICATE_TO_OTHER_NODE = 0.5  # ... to a node other than the one that answered
DUPLICATE_AFTER_S = (0.2, 5.0)
ID_PREFIX = slice(2, 10)       # a job ID's creator: D-<first 8 hex of its node's ID>-...


@dataclass
class Knowledge:
    """A moment from which a node knew the key's job: it answered its ID,
    or SHOW found it holding a copy."""

    node: int
    at: float
    job_id: str
    how: str


def dedup_key(body: str) -> str:
    return "key:" + body.rstrip("x")


class DedupProducer(Producer):
    """Adds each job with its own DEDUP key, retrying as the docs' recipe
    says, and sends some keys again on purpose once they got their ID."""

    def __init__(self, *args, window_s: int, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.window_s = window_s
        self.pending: list[tuple[float, str, str, str, int]] = []   # duplicates due
        self.knowledge: list[tuple[str, Knowledge]] = []            # (body, SHOW found a copy)

    def step(self) -> None:
        now = time.monotonic()
        due = [entry for entry in self.pending if entry[0] <= now]
        if due:
            self.pending.remove(due[0])
            self.duplicate(*due[0][1:])
        super().step()

    def key_spec(self, body: str):
        return replace(self.spec, options=self.spec.options + (
            "DEDUP", dedup_key(body), "WINDOW", self.window_s))

    def produce(self, body: str, queue: str) -> None:
        home = self.random_node()
        spec = self.key_spec(body)
        for step in range(self.nodes):
            node = (home + step) % self.nodes
            for _ in range(SAME_NODE_TRIES):
                job_id = self.add(body, queue, node, spec)
                if job_id:
                    self.maybe_duplicate(body, queue, job_id, node)
                    return
                if self.stopping.is_set():
                    return
                if job_id is None:
                    break                          # not sent: the next node
                self.stopping.wait(RETRY_PAUSE_S)
            self.stopping.wait(DOWN_NODE_BACKOFF_S)

    def maybe_duplicate(self, body: str, queue: str, job_id: str, node: int) -> None:
        if self.rng.random() < DUPLICATE_PROBABILITY:
            due = time.monotonic() + self.rng.uniform(*DUPLICATE_AFTER_S)
            self.pending.append((due, body, queue, job_id, node))

    def duplicate(self, body: str, queue: str, job_id: str, answered_by: int) -> None:
        """The same ADDJOB again, to the node that answered or to another
        (asked first whether it holds a copy)."""
        node = answered_by
        if self.nodes > 1 and self.rng.random() < DUPLICATE_TO_OTHER_NODE:
            node = self.random_node(exclude=answered_by)
            try:
                if _holds_key(self.links.call(node, "SHOW", job_id), dedup_key(body)):
                    self.knowledge.append((body, Knowledge(node, time.monotonic(), job_id,
                                                           "held a copy (SHOW)")))
            except LinkError:
                return                             # not asked: not sent either
        self.add(body, queue, node, self.key_spec(body))


def _holds_key(show, key: str) -> bool:
    """SHOW's reply names a copy that carries the key (a dummy ack, left
    by an ACKJOB on a node without the job, carries nothing)."""
    if not show:
        return False
    fields = dict(zip(show[::2], show[1::2]))
    return fields.get(b"dedup-key") == key.encode()


@register
class Dedup(Workload):
    name = "dedup"
    needs_disque_py = "ADDJOB ... DEDUP is a disque-py extension"
    summary = "ADDJOB ... DEDUP key: retries and duplicates must not make a second job where " \
              "a node knows the key"

    def __init__(self, setup) -> None:
        super().__init__(setup)
        self.made: list[DedupProducer] = []

    def producers(self) -> list:
        s = self.setup
        self.made = [DedupProducer(n, s.seed, s.rate / s.producers, self.spec(),
                                   queues=self.queues, window_s=s.spec.ttl_s, **self.common())
                     for n in range(s.producers)]
        return list(self.made)

    def check(self, records: list[JobRecord], context: CheckContext) -> Findings:
        shown: dict[str, list[Knowledge]] = {}
        for producer in self.made:
            for body, knowledge in producer.knowledge:
                shown.setdefault(body, []).append(knowledge)
        return check_keys(records, shown, self.setup.node_ids, context)


def check_keys(records: list[JobRecord], shown: dict[str, list[Knowledge]],
               node_ids: list[str], context: CheckContext) -> Findings:
    """The DEDUP promises over every key's record (see the module's docstring)."""
    creators = {node_id[:8]: index for index, node_id in enumerate(node_ids)}
    findings = Findings()
    tally: Counter[str] = Counter(keys=0, keys_split=0)
    for record in records:
        knowledge = _answers_known(record) + shown.get(record.body, [])
        verdicts = [_judge_new_job(record, attempt, knowledge, context)
                    for attempt in record.attempts
                    if attempt.job_id is not None
                    and creators.get(attempt.job_id[ID_PREFIX]) == attempt.node]
        findings.failures += [line for broken, line in verdicts if broken and line]
        ids = record.answered_ids
        delivered = {d.job_id for d in record.deliveries}
        tally["keys"] += 1
        tally["keys_acknowledged"] += bool(ids)
        tally["tries"] += len(record.attempts)
        tally["keys_with_extra_jobs"] += bool(ids and delivered - set(ids))
        tally["keys_made_2_or_more_jobs"] += len(delivered | set(ids)) > 1
        tally.update(_duplicate_outcomes(record))
        if len(ids) > 1 and not any(broken for broken, _ in verdicts):
            forgotten = next((line for broken, line in verdicts if line), "")
            kind, excuse = ("forgotten", forgotten) if forgotten else \
                _split_excuse(record, ids, creators)
            tally["keys_split"] += 1
            tally[f"keys_split_{kind}"] += 1
            findings.excused.append(f"key of {record.body[:40]!r}: IDs {', '.join(ids)} "
                                    f"({_where(record)}): {excuse}")
    acknowledged = tally["keys_acknowledged"] or 1
    findings.figures.update(tally)
    findings.figures["split_rate"] = tally["keys_split"] / acknowledged
    findings.figures["extra_job_rate"] = tally["keys_with_extra_jobs"] / acknowledged
    findings.figures["broken"] = len(findings.failures)
    return findings


def _duplicate_outcomes(record: JobRecord) -> Counter[str]:
    """The ADDJOBs sent after the key got its first ID (the duplicates sent
    on purpose), by where they went and what they got."""
    outcomes: Counter[str] = Counter()
    first = next((a for a in record.attempts if a.job_id is not None), None)
    if first is None:
        return outcomes
    for attempt in record.attempts[record.attempts.index(first) + 1:]:
        where = "same_node" if attempt.node == first.node else "other_node"
        got = "same_id" if attempt.job_id == first.job_id else \
            "other_id" if attempt.job_id is not None else "no_id"
        outcomes[f"again_{where}_{got}"] += 1
    return outcomes


def _answers_known(record: JobRecord) -> list[Knowledge]:
    return [Knowledge(a.node, a.answered_at, a.job_id, "answered its ID")
            for a in record.attempts if a.job_id is not None]


def _judge_new_job(record: JobRecord, attempt: Attempt, knowledge: list[Knowledge],
                   context: CheckContext) -> tuple[bool, str]:
    """An attempt answered with a job its own node made: (True, why) if that
    node knew another job of the key before the attempt was sent; (False,
    the excuse) if it may have forgotten it since; (False, "") if it knew none."""
    for known in knowledge:
        if known.node != attempt.node or known.job_id == attempt.job_id \
                or known.at >= attempt.sent_at:
            continue
        line = (f"node{attempt.node} {known.how} {known.job_id}, then made "
                f"{attempt.job_id} for the key ({attempt.sent_at - known.at:.1f}s later)")
        if context.forgot(attempt.node, known.at):
            return False, line + ": it was killed in between, without an AOF that keeps " \
                                 "every write, and forgot the key"
        return True, f"key of {record.body[:40]!r}: {line}"
    return False, ""


def _split_excuse(record: JobRecord, ids: list[str],
                  creators: dict[str, int]) -> tuple[str, str]:
    """Why a key got two IDs without a node breaking the promise: (kind, text)."""
    second = next(a for a in record.attempts if a.job_id not in (None, ids[0]))
    creator = creators.get(second.job_id[ID_PREFIX])
    if creator == second.node:
        return "unknown_there", (f"node{second.node} did not know the key (no copy of "
                                 f"{ids[0]} there: deduplication is per node) and made "
                                 f"another job")
    return "another_try", (f"node{second.node} answered a job node{creator} made for another "
                           f"try of the key (both exist: that try's answer was lost)")


def _where(record: JobRecord) -> str:
    return ", ".join(f"node{a.node}: {a.job_id or a.answer or 'waiting'}"
                     for a in record.attempts)
