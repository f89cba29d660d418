"""The chaos workloads' own checks, driven with fake histories (no sockets,
no sleeps): each promise broken once and caught, each outcome the
documented promise allows excused with its reason; the ledger's
total-queue accounting of ADDJOB attempts and delays; the replay command
and the choice of workload; sanitizer reports and core dumps as crashes."""

from __future__ import annotations

import random

import click
import pytest

from disque_py.tools.chaos.faults import Event, FaultInjector, FaultPlan
from disque_py.tools.chaos.ledger import Delivery, Ledger
from disque_py.tools.chaos.nodes import NATIVE_CRASH_MARKS, Node, native_crashes_in
from disque_py.tools.chaos.report import Report, verdict_counts
from disque_py.tools.chaos.run import workload_name
from disque_py.tools.chaos.workloads import CheckContext, Findings
from disque_py.tools.chaos.workloads.dedup import Knowledge, check_keys
from disque_py.tools.chaos.workloads.maxdeliveries import LIMIT, Sighting, check_dead_letters
from disque_py.tools.chaos.workloads.qrequeue import Requeue, check_requeued
from disque_py.tools.chaos.workloads.waitjob import Answer, check_answers
from disque_py.tools.cli import replay_command

NODE_IDS = [f"{n}" * 8 + "f" * 32 for n in "abc"]      # node0 aaaaaaaa..., node1 bbbbbbbb...


def job_id(creator: int, name: str) -> str:
    """An ID made by node `creator` (its first 8 hex), as the engine writes them."""
    return f"D-{NODE_IDS[creator][:8]}-{name:<24}-0001".replace(" ", "x")


def context(events=(), durable=True, healed_at=100.0) -> CheckContext:
    injector = FaultInjector([], FaultPlan(1, 1.0), random.Random(1))
    injector.events.extend(Event(at, kind, node) for at, kind, node in events)
    return CheckContext(injector, durable, healed_at)


def add(ledger: Ledger, body: str, node: int, answer: str | None, at: float,
        queue: str = "q") -> None:
    """One ADDJOB of `body` to `node`: answered with the ID `answer`, or no answer (None)."""
    ledger.sending(body, queue, node, at)
    if answer is None:
        ledger.add_failed(body, "no answer", "timeout")
    else:
        ledger.added(body, answer, at + 0.1)


def deliver(ledger: Ledger, body: str, jid: str, at: float, queue: str = "q", node: int = 1,
            counters=None) -> None:
    ledger.delivered(body, Delivery(at, node, jid, queue, at + 0.05, counters))


# ---------------------------------------------------------------- the ledger


def test_a_body_delivered_under_another_id_is_unexpected_only_if_no_try_could_have_made_it():
    ledger = Ledger()
    add(ledger, "a", 0, job_id(0, "a1"), 1.0)
    deliver(ledger, "a", job_id(1, "other"), 2.0)           # every try answered: unexpected
    add(ledger, "b", 0, None, 1.0)                           # no answer: its job may exist
    add(ledger, "b", 1, job_id(1, "b2"), 2.0)
    deliver(ledger, "b", job_id(0, "b1"), 3.0)
    verdict = ledger.verdict()
    assert len(verdict.unexpected) == 1 and "as D-bbbbbbbb-other" in verdict.unexpected[0]
    assert ledger.add_errors() == {"no answer (then tried again)": 1}


def test_a_dead_letter_queue_is_expected_only_where_the_workload_says():
    ledger = Ledger()
    add(ledger, "a", 0, job_id(0, "a"), 1.0)
    deliver(ledger, "a", job_id(0, "a"), 2.0, queue="q:dead")
    assert len(ledger.verdict().unexpected) == 1
    assert ledger.verdict(queues_of=lambda q: {q, q + ":dead"}).unexpected == []


def test_delays_after_the_heal_and_from_the_add_leave_drain_only_queues_out():
    ledger = Ledger()
    add(ledger, "early", 0, job_id(0, "e"), 1.0)
    deliver(ledger, "early", job_id(0, "e"), 5.0)            # 3.9 s after its add
    add(ledger, "late", 0, job_id(0, "l"), 9.0)
    deliver(ledger, "late", job_id(0, "l"), 12.0)            # after the heal at 10
    add(ledger, "backlog", 0, job_id(0, "b"), 0.0, queue="backlog")
    deliver(ledger, "backlog", job_id(0, "b"), 30.0, queue="backlog")
    delays = ledger.verdict(healed_at=10.0, drain_only=("backlog",)).delays
    assert delays.after_heal_jobs == 2
    assert delays.after_heal == pytest.approx(20.05) and delays.after_heal_job == job_id(0, "b")
    assert delays.from_add == pytest.approx(3.95) and delays.from_add_job == job_id(0, "e")


# ---------------------------------------------------------------- DEDUP


def dedup_key_history(second_node: int, second_id: str, shown=()) -> tuple:
    """A key answered D1 by node0 at 1.1, then sent again to `second_node` at 5."""
    ledger = Ledger()
    add(ledger, "k", 0, job_id(0, "d1"), 1.0)
    add(ledger, "k", second_node, second_id, 5.0)
    return ledger.records(), {"k": list(shown)}


def test_a_node_that_answered_a_key_and_then_makes_a_new_job_for_it_breaks_the_promise():
    records, shown = dedup_key_history(0, job_id(0, "d2"))
    findings = check_keys(records, shown, NODE_IDS, context())
    assert len(findings.failures) == 1 and "node0 answered its ID" in findings.failures[0]
    assert findings.figures["keys_split"] == 0


def test_a_new_job_is_excused_where_the_node_was_killed_without_a_durable_aof():
    records, shown = dedup_key_history(0, job_id(0, "d2"))
    findings = check_keys(records, shown, NODE_IDS,
                          context([(3.0, "kill", 0), (4.0, "restart", 0)], durable=False))
    assert findings.failures == []
    assert findings.figures["keys_split_forgotten"] == 1
    assert "forgot the key" in findings.excused[0]


def test_a_node_that_held_a_copy_must_not_make_a_new_job_for_its_key():
    records, shown = dedup_key_history(1, job_id(1, "d2"),
                                       [Knowledge(1, 4.0, job_id(0, "d1"), "held a copy")])
    findings = check_keys(records, shown, NODE_IDS, context())
    assert len(findings.failures) == 1 and "node1 held a copy" in findings.failures[0]


def test_a_node_without_the_key_may_make_a_second_job_which_is_a_split_not_a_failure():
    records, shown = dedup_key_history(1, job_id(1, "d2"))
    findings = check_keys(records, shown, NODE_IDS, context())
    assert findings.failures == []
    assert findings.figures["keys_split_unknown_there"] == 1
    assert findings.figures["split_rate"] == 1.0
    assert findings.figures["again_other_node_other_id"] == 1
    assert "deduplication is per node" in findings.excused[0]


def test_a_node_may_answer_a_newer_job_of_the_key_that_another_node_made():
    records, shown = dedup_key_history(0, job_id(2, "d0"))
    findings = check_keys(records, shown, NODE_IDS, context())
    assert findings.failures == [] and findings.figures["keys_split_another_try"] == 1


# ---------------------------------------------------------------- MAXDELIVERIES


def dead_job(deliveries: int, nacks: int = 0, counters=None) -> Ledger:
    ledger = Ledger()
    add(ledger, "m", 0, job_id(0, "m"), 1.0)
    for n in range(deliveries):
        deliver(ledger, "m", job_id(0, "m"), 2.0 + n, counters=counters)
    for _ in range(nacks):
        ledger.nacked("m")
    return ledger


def sighting(node: int, at: float, deliveries: int = 0) -> Sighting:
    return Sighting("m", job_id(0, "m"), node, at - 0.01, at, 0, deliveries)


def test_a_job_dead_lettered_before_its_limit_is_caught_and_retry_requeues_count():
    early = dead_job(LIMIT - 1, LIMIT - 1)
    findings = check_dead_letters(early.records(), {"m": [sighting(0, 20.0)]}, {}, context())
    assert any("dead-lettered early: 2 GETJOB deliveries" in f for f in findings.failures)
    requeued = dead_job(LIMIT - 1, LIMIT - 1)
    deliver(requeued, "m", job_id(0, "m"), 30.0, queue="q:dead")
    findings = check_dead_letters(requeued.records(), {"m": [sighting(0, 20.0, 1)]}, {},
                                  context())
    assert findings.failures == [] and findings.figures["dead_lettered"] == 1


def test_a_job_seen_dead_and_never_delivered_again_is_lost():
    ledger = dead_job(LIMIT, LIMIT)
    findings = check_dead_letters(ledger.records(), {"m": [sighting(0, 20.0)]}, {}, context())
    assert findings.failures == [f"{job_id(0, 'm')} lost after it was dead-lettered: seen "
                                 f"dead, never delivered again (the drain reads the dead "
                                 f"queues)"]


def test_dead_on_two_nodes_at_once_is_counted_and_excused_by_a_fault_or_the_requeue_race():
    ledger = dead_job(LIMIT, LIMIT)
    deliver(ledger, "m", job_id(0, "m"), 40.0, queue="q:dead")
    deliver(ledger, "m", job_id(0, "m"), 40.0, queue="q:dead", node=2)
    seen = [sighting(0, 20.0), sighting(1, 20.1)]
    findings = check_dead_letters(ledger.records(), {"m": seen}, {"m": seen},
                                  context([(10.0, "pause", 1), (12.0, "resume", 1)]))
    assert findings.failures == [] and findings.figures["dead_on_two_nodes_at_once"] == 1
    assert findings.figures["dead_letter_duplicates"] == 1
    assert "node0, node1 at once: pause node1 in between" in findings.excused[0]
    findings = check_dead_letters(ledger.records(), {"m": seen}, {"m": seen}, context())
    assert findings.failures == [] and "raced the QUEUED answer" in findings.excused[0]


# ---------------------------------------------------------------- WAITJOB


def test_waitjob_settling_a_job_no_ackjob_was_sent_for_is_caught():
    ledger = Ledger()
    for body in "abc":
        add(ledger, body, 0, job_id(0, body), 1.0)
    ledger.acking("a", 3.0)                  # sent before the answer: fine without its reply
    ledger.acking("c", 9.0)                  # sent after the answer
    answers = [Answer("a", job_id(0, "a"), 0, 2.0, 4.0, "acked"),
               Answer("b", job_id(0, "b"), 0, 2.0, 4.0, "deleted"),
               Answer("c", job_id(0, "c"), 0, 2.0, 4.0, "acked"),
               Answer("b", job_id(0, "b"), 1, 2.0, 4.0, "unknown"),
               Answer("b", job_id(0, "b"), 0, 2.0, 4.0, "pending")]
    findings = check_answers(ledger.records(), answers)
    assert len(findings.failures) == 2
    assert "answered deleted" in findings.failures[0] and "was sent never" in findings.failures[0]
    assert "5.00s after the answer" in findings.failures[1]
    assert findings.figures["waitjob_unknown"] == 1 and findings.figures["waitjob_acked"] == 2


# ---------------------------------------------------------------- QREQUEUE


def test_a_job_seen_dead_comes_back_or_is_lost():
    ledger = dead_job(2, 2)
    back = dead_job(2, 2)
    deliver(back, "m", job_id(0, "m"), 21.0)               # from its own queue again
    requeues = [Requeue(0, 20.5, "q", 1)]
    findings = check_requeued(back.records(), [sighting(0, 20.0)], requeues)
    assert findings.failures == [] and findings.figures["came_back"] == 1
    assert findings.figures["jobs_moved"] == 1
    findings = check_requeued(ledger.records(), [sighting(0, 20.0)], requeues)
    assert findings.figures["lost_after_dead"] == 1


def test_a_job_acknowledged_before_it_was_seen_dead_is_owed_nothing():
    ledger = dead_job(2, 1)
    ledger.acked("m", 0, 10.0)
    assert check_requeued(ledger.records(), [sighting(0, 20.0)], []).failures == []


# ---------------------------------------------------------------- the run


def test_the_report_fails_on_a_workload_promise_and_prints_the_replay():
    verdict = Ledger().verdict()
    report = Report(9, {}, "/tmp/x", {}, verdict_counts(verdict, {}), {}, [], [], [], [],
                    workload="waitjob", findings=Findings(failures=["acked, never acked"]),
                    replay="disque-py chaos --seed 9")
    assert report.exit_status == 1
    lines = report.lines()
    assert "  waitjob FAILED: acked, never acked" in lines
    assert lines[-1].startswith("replay (") and lines[-1].endswith("disque-py chaos --seed 9")


def test_the_workload_is_named_or_picked_by_a_backlog_size():
    assert workload_name(None, 0) == "plain"
    assert workload_name(None, 500) == "backlog"
    assert workload_name("dedup", 0) == "dedup"
    with pytest.raises(ValueError, match="unknown workload 'bogus'; known: backlog, dedup"):
        workload_name("bogus", 0)
    with pytest.raises(ValueError, match="--backlog is the backlog workload's size"):
        workload_name("dedup", 10)


def test_the_replay_command_names_every_option_but_where_the_run_writes():
    @click.command()
    @click.option("--seed", type=int)
    @click.option("--appendonly/--no-appendonly", default=True)
    @click.option("--max-down", type=int)
    @click.option("--faults", "fault_names", default="kill,pause")
    @click.option("--keep", is_flag=True)
    @click.option("--dir", "directory")
    def chaos(**_):
        pass

    context = chaos.make_context("chaos", ["--no-appendonly", "--dir", "/x", "--keep"])
    assert replay_command(context, 1234) == \
        "disque-py chaos --seed 1234 --no-appendonly --faults kill,pause"


def test_sanitizer_reports_segfaults_and_core_dumps_are_crashes(tmp_path):
    log = tmp_path / "stderr.log"
    log.write_text("starting\n"
                   "==12==ERROR: AddressSanitizer: heap-use-after-free on address 0x1\n"
                   "    #0 0x7f in job_free engine.c:10\n"
                   "engine.c:42:7: runtime error: signed integer overflow\n"
                   "Fatal Python error: Segmentation fault\n"
                   "==12==ERROR: LeakSanitizer: detected memory leaks\n")
    crashes = native_crashes_in("node1", log, NATIVE_CRASH_MARKS)
    assert [c.where for c in crashes] == ["stderr.log:2", "stderr.log:4", "stderr.log:5",
                                          "stderr.log:6"]
    assert crashes[0].summary.startswith("==12==ERROR: AddressSanitizer: heap-use-after-free")
    assert "#0 0x7f in job_free" in crashes[0].text
    node = Node(0, tmp_path / "node0", [])
    (node.dir / "core").write_bytes(b"\x7fELF")
    assert [c.summary for c in node.crashes()] == ["a core dump"]
