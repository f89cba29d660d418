"""`disque-py chaos` end to end with the node faults of tools/chaos/faults/:
clock (libfaketime), powerloss and corrupt (files cut and flipped, repaired
by the runbook), membership (a spare joins, members leave or are
forgotten). One short run per family (3 nodes, REPLICATE 2), each must lose
no acknowledged job, crash nothing, and show its faults in the JSON report.
The checker runs as a subprocess, as `make chaos` runs it.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.cluster.test_chaos import RUN_TIMEOUT_S, chaos_command, processes_using

DURATION = "25"


def run_chaos(tmp_path, *extra: str) -> dict:
    report_path = tmp_path / "report.json"
    result = subprocess.run(chaos_command(tmp_path, "--duration", DURATION,
                                          "--json", str(report_path), *extra),
                            capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    report = json.loads(report_path.read_text())
    assert report["passed"] and report["lost_count"] == 0, output
    assert report["crash_count"] == 0 and report["counts"]["adds_acknowledged"] > 50, output
    assert processes_using(tmp_path) == []
    report["output"] = output
    return report


@pytest.mark.slow
@pytest.mark.timeout(RUN_TIMEOUT_S + 30)
def test_clock_jumps_and_drifts_lose_nothing_and_are_measured(tmp_path):
    report = run_chaos(tmp_path, "--faults", "clock", "--seed", "21")
    faults, measures = report["faults"], report["measures"]
    assert faults["clock"] >= 2 and faults["clock-fixed"] == faults["clock"], report["output"]
    assert measures["clock_probes"] >= 1, report["output"]


@pytest.mark.slow
@pytest.mark.timeout(RUN_TIMEOUT_S + 30)
def test_power_loss_and_damaged_files_under_everysec_lose_nothing(tmp_path):
    report = run_chaos(tmp_path, "--faults", "powerloss,corrupt", "--appendfsync", "everysec",
                       "--seed", "22")
    faults = report["faults"]
    assert faults["powerloss"] >= 1 and faults["corrupt"] >= 1, report["output"]
    assert faults.get("start-failed", 0) == 0, report["output"]


@pytest.mark.slow
@pytest.mark.timeout(RUN_TIMEOUT_S + 30)
def test_joins_leaves_and_forgets_under_load_lose_nothing(tmp_path):
    report = run_chaos(tmp_path, "--faults", "membership", "--seed", "23")
    faults = report["faults"]
    assert faults.get("join", 0) >= 1 and faults["membership"] >= 1, report["output"]
