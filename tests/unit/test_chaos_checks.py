"""The chaos checker's judgement, without processes: the ledger's verdict
(lost, duplicates, deliveries after an ack, unexpected deliveries), the
traceback scan of node logs, the fault record, and the report's pass/fail."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import time

import pytest
from click.testing import CliRunner

from disque_py.tools.chaos.explain import Explainer
from disque_py.tools.chaos.faults import Event, FaultInjector, FaultPlan
from disque_py.tools.chaos.ledger import Delivery, JobRecord, Ledger, job_body
from disque_py.tools.chaos.nodes import EXITED, KILLED, PAUSED, UP, tracebacks_in
from disque_py.tools.chaos.report import LostJob, Report, verdict_counts
from disque_py.tools.chaos.run import ChaosOptions, Run, fault_kinds

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def added(ledger: Ledger, body: str, job_id: str, at: float = 1.0, queue: str = "q") -> None:
    ledger.sending(body, queue, 0, at)
    ledger.added(body, job_id, at + 0.1)


def deliver(ledger: Ledger, body: str, job_id: str, at: float, node: int = 1,
            queue: str = "q") -> None:
    ledger.delivered(body, Delivery(at, node, job_id, queue))


def test_bodies_are_unique_and_padded():
    bodies = {job_body(1, producer, n, 64) for producer in range(3) for n in range(100)}
    assert len(bodies) == 300 and all(len(body) == 64 for body in bodies)


def test_an_acknowledged_add_never_delivered_is_lost():
    ledger = Ledger()
    added(ledger, "a", "D-a")
    added(ledger, "b", "D-b")
    deliver(ledger, "b", "D-b", 2.0)
    ledger.sending("c", "q", 0, 1.0)
    ledger.add_failed("c", "NOREPL", "NOREPL Timeout")
    verdict = ledger.verdict()
    assert [record.body for record in verdict.lost] == ["a"]
    assert verdict.failed
    assert verdict.counts["adds_failed"] == 1 and ledger.undelivered() == 1


def test_a_nacked_job_never_delivered_again_is_lost():
    ledger = Ledger()
    for body in "abcd":
        added(ledger, body, "D-" + body)
        deliver(ledger, body, "D-" + body, 2.0)
        ledger.nacked(body)
    deliver(ledger, "b", "D-b", 3.0)            # handed back, delivered again
    deliver(ledger, "c", "D-c", 2.5)            # a duplicate, acknowledged
    ledger.acked("c", 1, 2.6)
    deliver(ledger, "d", "D-d", 4.0)
    ledger.nacked("d")                          # its redelivery NACKed too
    verdict = ledger.verdict()
    assert [record.body for record in verdict.lost] == ["a", "d"]
    assert verdict.failed and ledger.undelivered() == 2


def test_nacked_redeliveries_are_not_duplicates_but_others_are():
    ledger = Ledger()
    added(ledger, "a", "D-a")
    deliver(ledger, "a", "D-a", 2.0)
    ledger.nacked("a")
    deliver(ledger, "a", "D-a", 3.0)
    added(ledger, "b", "D-b")
    deliver(ledger, "b", "D-b", 2.0)
    deliver(ledger, "b", "D-b", 9.0)
    deliver(ledger, "b", "D-b", 19.0)
    counts = ledger.verdict().counts
    assert counts["delivered_more_than_once"] == 2
    assert counts["duplicated_jobs"] == 1 and counts["duplicate_deliveries"] == 2


def test_a_delivery_asked_for_after_the_ack_is_reported_not_failed():
    ledger = Ledger()
    added(ledger, "a", "D-a")
    deliver(ledger, "a", "D-a", 2.0)
    ledger.acked("a", 1, 3.0)
    deliver(ledger, "a", "D-a", 2.5)     # GETJOB sent before the ack returned: fine
    deliver(ledger, "a", "D-a", 8.0, node=2)
    verdict = ledger.verdict()
    assert [(record.body, delivery.node) for record, delivery in verdict.after_ack] \
        == [("a", 2)]
    assert not verdict.failed


def test_an_unexpected_id_queue_or_unknown_body_fails():
    ledger = Ledger()
    added(ledger, "a", "D-a")
    deliver(ledger, "a", "D-other", 2.0)
    deliver(ledger, "a", "D-a", 2.0, queue="elsewhere")
    deliver(ledger, "nobody-sent-this", "D-x", 2.0)
    verdict = ledger.verdict()
    assert len(verdict.unexpected) == 3 and verdict.failed


def test_tracebacks_in_a_log_are_found_with_their_error_line(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("1:P 21 Nov 10:00:00.000 * Server started\n"
                   "1:P 21 Nov 10:00:01.000 # Unexpected error: Exception in callback\n"
                   "Traceback (most recent call last):\n"
                   '  File "x.py", line 1, in f\n'
                   "    boom()\n"
                   "KeyError: b'D-1'\n"
                   "1:P 21 Nov 10:00:02.000 * still running\n")
    [crash] = tracebacks_in("node3", log)
    assert crash.node == "node3" and crash.where == "server.log:3"
    assert crash.summary == "KeyError: b'D-1'"
    assert tracebacks_in("node3", tmp_path / "missing.log") == []


def test_the_report_fails_on_lost_jobs_but_not_on_excused_or_after_ack_ones():
    ledger = Ledger()
    added(ledger, "a", "D-a")
    deliver(ledger, "a", "D-a", 2.0)
    verdict = ledger.verdict()

    def report(lost, after_ack=()):
        return Report(1, {}, "/tmp/x", {"faults": 1.0}, verdict_counts(verdict, {}),
                      {"kill": 1}, lost, list(after_ack), [], [])

    excused = LostJob("D-b", "b", "q", 1.0, "no AOF, 2 nodes killed", "")
    unexcused = LostJob("D-c", "c", "q", 1.0, "", "node0: -")
    assert report([excused], ["D-a by node1"]).exit_status == 0
    failing = report([excused, unexcused])
    assert failing.exit_status == 1
    assert json.loads(failing.to_json())["lost_count"] == 1
    assert any(line.startswith("LOST acknowledged jobs: 1") for line in failing.lines())


def test_the_fault_record_says_which_nodes_were_down_at_a_moment():
    injector = FaultInjector([], FaultPlan(2, 1.0), random.Random(1))
    for at, kind, node in [(1, "kill", 0), (2, "pause", 1), (3, "resume", 1),
                           (4, "restart", 0), (5, "kill", 1)]:
        injector.events.append(Event(at, kind, node))
    assert injector.down_at(0.5) == {}
    assert injector.down_at(2.5) == {0: "kill", 1: "pause"}
    assert injector.down_at(3.5) == {0: "kill"}
    assert injector.down_at(9) == {1: "kill"}
    assert injector.losses_after(1.5) == {1}
    assert injector.most_lost_at_once(0) == 1       # node0 back before node1 was killed


class FakeNode:
    """What the injector asks of a node, with no process behind it."""

    def __init__(self, index: int) -> None:
        self.index, self.name, self.state, self.exits = index, f"node{index}", UP, []
        self.starts = 1

    def kill(self) -> None:
        self.state = KILLED

    def pause(self) -> None:
        self.state = PAUSED

    def resume(self) -> None:
        self.state = UP

    def start(self) -> None:
        self.state, self.starts = UP, self.starts + 1

    def wait_ready(self) -> None:
        pass

    def check_exit(self):
        """An exit queued by the test, once, as the real node reports it."""
        if not self.exits:
            return None
        self.state = EXITED
        return self.exits.pop()


def test_each_kind_is_drawn_first_then_max_down_bounds_what_is_down_at_once():
    nodes = [FakeNode(i) for i in range(4)]
    injector = FaultInjector(nodes, FaultPlan(2, 1.0, ("kill", "pause")), random.Random(3))
    injector.inject(0.0)
    injector.inject(0.0)
    assert [event.kind for event in injector.events] == ["kill", "pause"]
    for _ in range(20):
        injector.inject(0.0)
    assert len(injector.down()) == 2 == sum(node.state != UP for node in nodes)
    injector.recover_all(timeout=5)
    assert not injector.harms and all(node.state == UP for node in nodes)
    assert injector.count("restart") == 1 and injector.count("resume") == 1


def test_a_node_that_exits_by_itself_is_recorded_as_a_crash_and_restarted():
    node = FakeNode(0)
    injector = FaultInjector([node], FaultPlan(1, 1.0), random.Random(1))
    node.exits.append(1)
    injector.recover_due(0.0)
    assert injector.count("crash") == 1
    injector.recover_due(time.monotonic())
    assert injector.count("restart") == 1 and not injector.harms


def test_fault_kinds_are_checked_against_the_known_ones():
    assert fault_kinds("kill, pause,kill") == ("kill", "pause")
    with pytest.raises(ValueError, match="unknown fault kind.*bogus.*known:.* kill, .*pause"):
        fault_kinds("kill,bogus")
    with pytest.raises(ValueError):
        fault_kinds(",")


def test_cleanup_after_a_stop_signal_before_the_injector_started_still_kills_the_nodes(
        tmp_path):
    """SIGTERM can land between the injector's creation and its start: the
    cleanup must not fail joining it, and must kill the nodes."""
    chaos = Run(ChaosOptions(directory=str(tmp_path)), echo=lambda line: None)
    killed = []
    chaos.fleet = type("Fleet", (), {"force_kill": lambda self: killed.append(True)})()
    chaos.threads = [FaultInjector([], FaultPlan(1, 4.0), random.Random(1))]
    chaos.cleanup(keep=False)
    assert killed == [True]


def _passing_report(seed: int) -> Report:
    verdict = Ledger().verdict()
    return Report(seed, {}, "/tmp/x", {"faults": 1.0}, verdict_counts(verdict, {}), {}, [],
                  [], [], [])


def _git_ignores(relative_path: str) -> bool:
    """Whether the checkout's .gitignore rules ignore this path (git
    check-ignore; without a git checkout, the rules are read directly)."""
    if shutil.which("git") and os.path.isdir(os.path.join(REPO, ".git")):
        return subprocess.run(["git", "check-ignore", "-q", "--no-index", relative_path],
                              cwd=REPO).returncode == 0
    with open(os.path.join(REPO, ".gitignore")) as handle:
        patterns = [line.strip() for line in handle]
    return any(relative_path.startswith(p.lstrip("/")) for p in patterns if p.endswith("/"))


@pytest.mark.parametrize("given", [None, "out/run.json"])
def test_chaos_json_lands_where_git_ignores_it_unless_a_file_is_named(
        tmp_path, monkeypatch, given):
    """`disque-py chaos --json` run from the checkout writes its report
    under chaos-reports/, which git ignores; `--json FILE` writes FILE
    (its directory made if missing)."""
    import disque_py.tools.chaos.run as chaos_run
    from disque_py.tools.cli import main
    monkeypatch.setattr(chaos_run, "run", lambda options, echo: _passing_report(42))
    monkeypatch.chdir(tmp_path)
    args = ["chaos", "--json"] + ([given] if given else []) + ["--seed", "42"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    written = [str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.json")]
    assert len(written) == 1, written
    assert json.loads((tmp_path / written[0]).read_text())["seed"] == 42
    assert f"JSON report: {written[0]}" in result.output
    if given:
        assert written == [given]
    else:
        assert written[0].startswith("chaos-reports/chaos-42-")
        assert _git_ignores(written[0])
        assert not _git_ignores("report.json")     # the check can say no


def test_a_delivery_after_the_ack_of_a_job_whose_addjob_got_no_answer_is_explained():
    """A job whose ADDJOB got no ID (no answer: yet the node had queued it)
    can be delivered, acked, and delivered again: the report explains it
    from when the ADDJOB was sent (a matrix run's report crashed on it)."""
    start = 1000.0
    injector = FaultInjector([], FaultPlan(1, 4.0), random.Random(1))
    explain = Explainer(ChaosOptions(), injector, fleet=None, started=start)
    record = JobRecord("body", "q", sent_at=start + 1.0, node=2)
    record.deliveries = [Delivery(start + 5.0, 0, "D-1", "q"),
                         Delivery(start + 9.0, 1, "D-1", "q")]
    record.acked_at, record.acked_on, record.acks = start + 6.0, 0, {"D-1": start + 6.0}
    line = explain.after_ack_line(record, record.deliveries[1])
    assert line.startswith("D-1 ADDJOB sent to node2 @1.0s without an answer, first "
                           "delivered by node0 @5.0s, ACKJOB answered by node0 @6.0s")
