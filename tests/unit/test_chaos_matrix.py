"""The chaos matrix without running it: which rows, the command each seed
runs, and the table made from JSON reports (fakes of report.py's to_json)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from disque_py.tools.chaos import matrix
from disque_py.tools.chaos.faults import KINDS
from disque_py.tools.chaos.table import NOT_RUN, Outcome, RowResult, markdown
from disque_py.tools.chaos.workloads import WORKLOADS
from disque_py.tools.cli import main


def fake_report(passed=True, acknowledged=100, lost=0, excused=0, delivered=100, duplicated=2,
                after_heal=3.5, figures=None, failures=(), replay="disque-py chaos --seed 1"):
    return {"passed": passed, "lost_count": lost, "excused_lost_count": excused,
            "unexpected_count": 0, "crash_count": 0,
            "counts": {"adds_acknowledged": acknowledged, "jobs_delivered": delivered,
                       "duplicated_jobs": duplicated},
            "delays": {"after_heal": after_heal},
            "findings": {"figures": figures or {}, "failures": list(failures), "excused": []},
            "faults": {"kill": 3, "pause": 0}, "measures": {}, "elapsed_s": {"faults": 120.0},
            "replay": replay, "directory": "/tmp/chaos-1-x"}


def test_every_row_names_known_faults_and_workloads_and_disque_c_rows_only_what_it_can_run():
    assert len({row.name for row in matrix.ROWS}) == len(matrix.ROWS)
    for row in matrix.ROWS:
        assert all(kind in KINDS for kind in row.faults.split(",")), row
        assert row.workload in WORKLOADS, row
        if row.disque_c:
            assert not WORKLOADS[row.workload].needs_disque_py, row
            assert not any(KINDS[kind].needs_disque_py for kind in row.faults.split(",")), row


def test_the_default_matrix_fits_its_budget():
    """About 70 minutes at 2 x 120 s: make chaos says so in the Makefile."""
    assert 55 <= matrix.estimate_minutes(list(matrix.ROWS), 2, 120) <= 75


def test_rows_are_picked_by_name_in_the_matrix_order():
    assert [row.name for row in matrix.pick_rows("c-kp,kp-plain")] == ["kp-plain", "c-kp"]
    assert matrix.pick_rows("") == list(matrix.ROWS)
    with pytest.raises(ValueError, match="unknown row.*nope.*known: kp-plain"):
        matrix.pick_rows("kp-plain,nope")


def test_each_seed_is_a_chaos_run_of_its_own_with_the_rows_options(tmp_path):
    row = matrix.pick_rows("powerloss-everysec")[0]
    command = matrix.chaos_command(row, 2, 120, tmp_path / "r.json", tmp_path / "runs", None)
    assert command[1:4] == ["-m", "disque_py.tools.cli", "chaos"]
    words = " ".join(command[4:])
    assert "--duration 120 --seed 2 --faults powerloss --workload plain" in words
    assert "--appendfsync everysec" in words and "--disque-c" not in words
    c_row = matrix.pick_rows("c-kp")[0]
    assert matrix.chaos_command(c_row, 1, 60, tmp_path / "r.json", tmp_path, "/bin/dq")[-2:] == \
        ["--disque-c", "/bin/dq"]


def test_a_row_sums_its_seeds_and_recomputes_the_duplicate_rate():
    row = matrix.pick_rows("kp-dedup")[0]
    result = RowResult(row, [
        Outcome(1, fake_report(figures={"split_rate": 0.05, "keys": 9}), 0, Path("a.log")),
        Outcome(2, fake_report(acknowledged=50, excused=1, delivered=300, duplicated=2,
                               after_heal=None, figures={"split_rate": 0.1}), 0, Path("b.log"))])
    cells = dict(zip(("set", "workload", "server", "nodes", "seeds", "acked", "lost", "unexpected",
                      "dup", "delay", "crashes", "findings", "result"), result.cells()))
    assert cells["seeds"] == "1, 2" and cells["acked"] == "150" and cells["lost"] == "0 / 1"
    assert cells["dup"] == "1.000%"                 # 4 duplicated of 400 delivered
    assert cells["delay"] == "3.5 s"
    assert cells["findings"] == "split rate 5.00%/10.00%; 0 broken, 0 excused"
    assert cells["result"] == "PASS" and result.passed


def test_a_failed_seed_or_one_without_a_report_fails_the_row_and_says_how_to_replay():
    row = matrix.pick_rows("kp-plain")[0]
    failed = RowResult(row, [Outcome(1, fake_report(passed=False, lost=2), 1, Path("a.log")),
                             Outcome(2, None, -1, Path("b.log"))])
    assert not failed.passed
    assert failed.result() == "**FAIL** (1 run(s) without a report)"
    details = "\n".join(failed.details())
    assert "replay: `disque-py chaos --seed 1`" in details and "exit -1, no report" in details


def test_rows_not_run_are_listed_as_such_and_do_not_fail_the_table():
    row = matrix.pick_rows("c-kp")[0]
    text = markdown([RowResult(row)], 120, "disque-py chaos-matrix")
    assert "| kill,pause | plain | Disque C | 5 | - |" in text and NOT_RUN in text


def test_the_list_shows_every_row_and_the_command_refuses_unknown_rows():
    listed = CliRunner().invoke(main, ["chaos-matrix", "--list"])
    assert listed.exit_code == 0
    assert len(listed.output.splitlines()) == len(matrix.ROWS)
    refused = CliRunner().invoke(main, ["chaos-matrix", "--rows", "nope"])
    assert refused.exit_code == 2 and "unknown row" in refused.output

