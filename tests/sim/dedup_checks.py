"""The checker's model of idempotent producers (ADDJOB ... DEDUP): the table
each node should hold, and what each answer to a duplicate must be.

DedupChecks is a part of the Checker (checker.py), which holds the state
it reads (jobs, the network, the log) and calls it as events arrive; the
violations it reports are (9) and (10), and the DEDUP part of (1), as
checker.py's docstring defines them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from disque_py.formats import bus as msg
from disque_py.engine import ACKED, FLAG_CONFIRMED, WAIT_REPL
from disque_py.engine.records import DEDUP_KEY_FIELD, DEDUP_QUEUE_FIELD, DEDUP_UNTIL_FIELD
from disque_py.node.waiters import Waiter
from disque_py.base.errors import NoReplError
from tests.sim.outcomes import MAX_DEFAULT_REPLICATION, NOT_ENOUGH_NODES, OK, WAITING

if TYPE_CHECKING:
    from tests.sim.checker import JobFacts


class DedupAsk(NamedTuple):
    """An ADDJOB with a DEDUP key, and what node `node` held for its pair
    just before it ran: what (10) expects of its answer."""
    node: int
    at: int
    queue: bytes
    key: bytes
    repl: int                   # the ADDJOB's REPLICATE (-1: the default)
    retry: int                  # its RETRY (0: at most once, which may be lost)
    entry: bytes | None         # the job the node's table named (None: no open entry)
    copy: object                # that job's copy on the node (a Job), or None
    case: str                   # "new", "a", "b-acked", "b-confirmed", "c" or "d" (docstring)
    copies: int                 # d: n, the confirmed copies the ID needs
    reachable: int              # the node's reachable peers then
    owed: dict                  # the model's open entries of the pair: {job ID: window end}


class ParkedDuplicate(NamedTuple):
    ask: DedupAsk
    waiter: Waiter


def record_dedup(record) -> tuple | None:
    """A job record's DEDUP pair and window end (as Job.dedup gives them
    for a job in memory), or None: its options carry no key."""
    options = record.options
    if options is None or options[DEDUP_KEY_FIELD] is None:
        return None
    return (options[DEDUP_QUEUE_FIELD] or record.queue, options[DEDUP_KEY_FIELD],
            options[DEDUP_UNTIL_FIELD])


class DedupChecks:
    """The Checker's DEDUP model and checks (a mixin: see the module)."""


    def _dedup_remember(self, i: int, job_id: bytes, queue: bytes, key: bytes,
                        until: int, record: bool = True) -> None:
        """Node i remembers (queue, key) for job_id until `until` (its model),
        and (`record`: a LOADJOB or DEDUP record carries it) its AOF will
        bring it back."""
        if until > self.net.clock.now_ms():
            self.dedup_table[i][job_id] = (queue, key, until)
            if record:
                self.dedup_disk[i][job_id] = (queue, key, until)

    def _dedup_copy(self, i: int, job, facts: JobFacts | None) -> None:
        """Node i wrote a LOADJOB record of `job` (a JobRecord: it made the
        job, received a copy, or changed its copy): it remembers the job's
        key, if it has one. (9): the copy's pair is ADDJOB's, wherever the
        job went since."""
        pair = record_dedup(job)       # (the ADDJOB's queue, key, window's end)
        if pair is None:
            return
        if facts is None:               # its producer, in the ADDJOB: added() checks it
            self._dedup_remember(i, job.id, *pair)
            return
        if pair != (facts.queue, facts.key, facts.until):
            self.violate(facts, f"(9) node {i}'s copy (in {job.queue!r}) names DEDUP pair "
                                f"{pair[:2]} until {self.net_time(pair[2])}; its ADDJOB's is "
                                f"{(facts.queue, facts.key)} until {self.net_time(facts.until)}")
        self._dedup_remember(i, job.id, facts.queue, facts.key, facts.until)

    def _dedup_undedup(self, i: int, queue: bytes, key: bytes, job_id: bytes) -> None:
        """Node i forgot a key before its window ended (UNDEDUP): (9), only
        as the producer whose ADDJOB is failing, or on its DELJOB flagged
        MSG_ABANDONED; whether that ADDJOB failed is judged at the end."""
        self.dedup_table[i].pop(job_id, None)
        self.dedup_disk[i].pop(job_id, None)
        facts = self.jobs.get(job_id)
        now = self.net.clock.now_ms()
        if facts is None:
            self.violations.append(f"(9) node {i} forgot DEDUP {key!r} of "
                                   f"{job_id!r}, a job nobody made with a key")
            return
        self.log(f"{facts.name}'s DEDUP key {key.decode()} forgotten on n{i} "
                 f"(UNDEDUP: its ADDJOB failed)", facts.id)
        self.dedup_forgotten.append((i, now, facts.id))
        frame = self.net.delivering
        abandoned = frame is not None and frame.kind == msg.DELJOB \
            and frame.mflags & msg.MSG_ABANDONED and facts.id in frame.keys \
            and frame.src == facts.node
        if not abandoned and not (i == facts.node and facts.outcome == WAITING):
            how = "handling " + (f"n{frame.src}'s {frame.name} (flags {frame.mflags})"
                                 if frame is not None else "no frame")
            self.violate(facts, f"(9) node {i} forgot its DEDUP key (UNDEDUP) at "
                                f"{self.net_time(now)}, {how}: neither its producer (n"
                                f"{facts.node}) failing its ADDJOB, nor on its DELJOB flagged "
                                f"MSG_ABANDONED")

    def _dedup_open(self, i: int, queue: bytes, key: bytes, now: int) -> dict:
        """The model's open entries of (queue, key) on node i: {job ID: window end}."""
        return {job_id: until for job_id, (q, k, until) in self.dedup_table[i].items()
                if until > now and k == key and q == queue}

    def dedup_before(self, i: int, queue: bytes, key: bytes, repl: int,
                     retry: int) -> DedupAsk:
        """An ADDJOB with a DEDUP key is about to run on node i: what the node
        holds for its pair, for (9) and (10) to judge the answer by."""
        node, now = self.net.nodes[i], self.net.clock.now_ms()
        entry = node.dedup.lookup(queue, key, now)
        copy = node.lookup(entry) if entry is not None else None
        copies = 0
        if entry is None:
            case = "new"
        elif copy is None:
            case = "a"
        elif copy.state == ACKED:
            case = "b-acked"
        elif copy.flags & FLAG_CONFIRMED:
            case = "b-confirmed"
        elif copy.state == WAIT_REPL:
            case = "c"
        else:
            case = "d"
            wanted = repl if repl >= 0 else min(node.cluster_size, MAX_DEFAULT_REPLICATION)
            copies = min(copy.repl, wanted)
        return DedupAsk(i, now, queue, key, repl, retry, entry, copy, case, copies,
                        node.reachable_peers, self._dedup_open(i, queue, key, now))

    def _dedup_made(self, i: int, facts: JobFacts, job, ask: DedupAsk | None) -> None:
        """Node i made a new job with a DEDUP key: (9)."""
        pair = job.dedup if job is not None else None
        if pair is None or pair[1:] != (facts.key, facts.until):
            got = pair[1:] if pair is not None else None
            self.violate(facts, f"(9) its DEDUP key is {got}; ADDJOB asked for {facts.key!r} "
                                f"until {facts.until}")
        if ask is not None and ask.owed:
            self.violate(facts, f"(9) node {i} made it for DEDUP {facts.key.decode()} in "
                                f"{facts.queue.decode()} while its table should name "
                                f"{self.names_of(ask.owed)} (its table named "
                                f"{self._name(ask.entry)})")
        self._dedup_remember(i, facts.id, facts.queue, facts.key, facts.until, record=False)

    def _check_dedup_table(self, i: int, when: str) -> None:
        """(9): node i's table is the model's (open windows only)."""
        node, now = self.net.nodes[i], self.net.clock.now_ms()
        table = self.dedup_table[i]
        for job_id in [job_id for job_id, entry in table.items() if entry[2] <= now]:
            del table[job_id]
        model = {(queue, key, job_id, until) for job_id, (queue, key, until) in table.items()}
        engine = {entry for entry in node.dedup.items() if entry[3] > now}
        for what, entries in (("lacks", model - engine), ("has", engine - model)):
            for queue, key, job_id, until in sorted(entries):
                if (i, job_id, what) in self._table_reported:
                    continue
                self._table_reported.add((i, job_id, what))
                text = (f"(9) node {i}'s DEDUP table {what} an entry for {self._name(job_id)} "
                        f"(DEDUP {key.decode()} in {queue.decode()}, window until "
                        f"{self.net_time(until)}) at {self.net_time(now)} ({when}): "
                        + ("it received that key and did not forget it" if what == "lacks" else
                           "it never received it (or not so), forgot it, or lost it in a "
                           "crash"))
                facts = self.jobs.get(job_id)
                if facts is not None:
                    self.violate(facts, text)
                else:
                    self.violations.append(text)
                    self.log("VIOLATION " + text)

    def duplicate(self, ask: DedupAsk, client, answer) -> None:
        """Node ask.node made no job for an ADDJOB with a DEDUP key: it
        answered an ID (bytes) or an error at once, or parked the producer
        (a Waiter). (10), and (1) for an ID answered at once."""
        i, case, entry = ask.node, ask.case, ask.entry
        what = f"ADDJOB DEDUP {ask.key.decode()} in {ask.queue.decode()} on node {i}"
        parked = type(answer) is Waiter
        named = answer if type(answer) is bytes else answer.job.id if parked else None
        if named is not None:
            self.dedup_answers += 1
        if case == "new":
            if named is not None:
                self.violations.append(f"(10) {what} answered {named!r} "
                                       f"{'(parked)' if parked else ''}; its table named no job")
                self.log(f"VIOLATION (10) {what} answered {self._name(named)}; its table "
                         f"named no job")
            return                      # refused as a new job would be
        facts = self.jobs.get(entry)
        if facts is None or facts.key is None:
            self.violations.append(f"(10) {what} answered {answer!r}: its table named "
                                   f"{entry!r}, a job nobody made with a DEDUP key")
            self.log(f"VIOLATION (10) {what} answered {answer!r}")
            return
        if (facts.queue, facts.key) != (ask.queue, ask.key):
            self.violate(facts, f"(10) {what} found it in its table; its DEDUP key is "
                                f"{facts.key!r} in {facts.queue!r}")
        latest = max(ask.owed.values()) if ask.owed else None
        if entry not in ask.owed:
            self.violate(facts, f"(10) {what} found it in its table, but node {i} never "
                                f"received that key, or forgot it, or its window ended (at "
                                f"{self.net_time(facts.until)})")
        elif ask.owed[entry] != latest:
            later = [job_id for job_id, until in ask.owed.items() if until == latest]
            self.violate(facts, f"(10) {what} found it in its table (window until "
                                f"{self.net_time(ask.owed[entry])}); the pair's window that "
                                f"ends last is {self.names_of(later)}'s "
                                f"({self.net_time(latest)})")
        # What the protocol answers in each case (the module's docstring).
        if case == "c":
            expected = "parks"
        elif case == "d" and ask.copies > 1:
            expected = "NOREPL" if ask.copies - 1 > ask.reachable else "parks"
        else:
            expected = "the ID"
        got = "parks" if parked and answer.job.id == entry else \
            "the ID" if named == entry else \
            "NOREPL" if isinstance(answer, NoReplError) and NOT_ENOUGH_NODES in str(answer) \
            else repr(answer)
        how = f"case {case}" + (f", n {ask.copies}, {ask.reachable} peers reachable"
                                if case == "d" else "")
        self.log(f"{what} ({how}) -> {got}", entry)
        if got != expected:
            self.violate(facts, f"(10) {what} ({how}) was answered {got}; the protocol "
                                f"says {expected}")
            return
        if parked:
            if case == "d" and answer.copies != ask.copies:
                self.violate(facts, f"(10) {what} ({how}) parked for {answer.copies} copies")
            self.parked[client] = ParkedDuplicate(ask, answer)
        elif named is not None:
            self._id_earned(facts, ask, "answered at once")

    def _id_earned(self, facts: JobFacts, ask: DedupAsk, when: str) -> None:
        """(1): an ID answered to a duplicate is earned (the docstring's
        (10)); the job is owed from then on at the level it stood for."""
        now = self.net.clock.now_ms()
        holders = self.holders(facts.id)
        copies = len(holders | facts.losses)
        case = ask.case
        if case == "a":
            earned = facts.acked or facts.outcome == OK or facts.level >= 1 \
                or now >= facts.expires
            need = "acked, its ADDJOB answered with the ID, or an earlier answer"
        elif case == "b-acked":
            earned = facts.acked
            need = "acked by a consumer (its copy there is)"
        elif case == "b-confirmed":
            # A promise round that reached the job's level flags it too (its
            # duplicates may have asked for fewer): as many holders flagged
            # promised, counting those lost since.
            promised = self.promised_holders(facts)
            earned = facts.acked or facts.outcome == OK or facts.level >= facts.repl \
                or len(promised | facts.losses) >= facts.repl
            need = f"acked, its ADDJOB answered with the ID, or REPLICATE {facts.repl} copies " \
                   f"confirmed by an earlier answer or a promise round (it is flagged " \
                   f"confirmed there; promised on {sorted(promised)})"
        elif case == "c":
            earned = facts.outcome == OK
            need = "its ADDJOB answered with the ID first"
        elif when == "answered at once":        # d, n <= 1: this node's copy
            earned = copies >= ask.copies
            need = f"{ask.copies} copies"
        else:                                   # d: a promise round
            promised = self.promised_holders(facts)
            copies = len(promised | facts.losses)
            earned = copies >= ask.copies or facts.acked
            need = f"{ask.copies} copies flagged promised (on {sorted(promised)})"
        if case[0] == "d" and copies >= ask.copies and ask.retry:   # at most once: may be lost
            facts.level = max(facts.level, ask.copies)
        self.log(f"{facts.name}'s ID answered to a duplicate ADDJOB on n{ask.node} ({when}, "
                 f"case {case}); its own ADDJOB is {facts.outcome}; copies on "
                 f"{sorted(holders)}, lost on {sorted(facts.losses)}", facts.id)
        if not earned:
            self.violate(facts, f"(1) a duplicate ADDJOB (DEDUP {ask.key.decode()}) on node "
                                f"{ask.node} was answered with its ID ({when}, case {case}), "
                                f"which needs {need}; copies on {sorted(holders)} (lost on "
                                f"{sorted(facts.losses)}), REPLICATE {facts.repl}, "
                                f"{'acked' if facts.acked else 'not acked'}; its own ADDJOB on "
                                f"node {facts.node} is {facts.outcome}")

    def _parked_answered(self, i: int, client, outcome) -> None:
        """(10): a parked duplicate's answer (c: its first ADDJOB's; d: its
        promise round's), and (1) for an ID."""
        parked = self.parked.pop(client, None)
        if parked is None:
            return
        ask, waiter = parked
        facts = self.jobs[ask.entry]
        now = self.net.clock.now_ms()
        timed_out = waiter.deadline and now >= waiter.deadline
        what = f"a duplicate ADDJOB parked on node {i} (case {ask.case}" + \
            (f", n {ask.copies})" if ask.case == "d" else ")")
        if type(outcome) is bytes:
            if outcome != facts.id:
                self.violate(facts, f"(10) {what} was answered {outcome!r}")
                return
            self.log(f"{client} (a duplicate of {facts.name}) answered with the ID", facts.id)
            if ask.case == "c" and facts.outcome != OK:
                self.violate(facts, f"(10) {what} was answered with its ID; its own ADDJOB "
                                    f"is {facts.outcome} ({facts.answer})")
                return
            self._id_earned(facts, ask, "once parked")
            return
        self.log(f"{client} (a duplicate of {facts.name}) answered {outcome}", facts.id)
        if timed_out:
            return
        if ask.case == "c":
            if facts.outcome == WAITING or str(outcome) != str(facts.answer):
                self.violate(facts, f"(10) {what} was answered {outcome} before its deadline;"
                                    f" its own ADDJOB is {facts.outcome} ({facts.answer})")
        elif self.net.nodes[i].lookup(facts.id) is waiter.job:
            self.violate(facts, f"(10) {what} was answered {outcome} before its deadline, "
                                f"its copy still there")

    def _judge_dedup(self) -> None:
        """(9), now that every ADDJOB's fate is known: no key forgotten early
        (UNDEDUP) for a job whose ADDJOB succeeded."""
        for i, at, job_id in self.dedup_forgotten:
            facts = self.jobs[job_id]
            if facts.outcome == OK:
                self.violate(facts, f"(9) node {i} forgot its DEDUP key at {self.net_time(at)} "
                                    f"(UNDEDUP), its window open until "
                                    f"{self.net_time(facts.until)}; its ADDJOB succeeded")
