"""`disque-py chaos --workload NAME` end to end, one short run per workload
beyond the plain one (tests/cluster/test_chaos.py runs that): 3 nodes,
REPLICATE 2, 20 s of load under kill -9 and SIGSTOP, the report read back.
Each must pass (nothing lost, nothing unexpected, no crash, no promise of
its own broken) and show that its feature was exercised: duplicates sent
for DEDUP, jobs dead-lettered and drained for MAXDELIVERIES, WAITJOB
answers, jobs sent back by QREQUEUE, a backlog loaded. The checker runs as
a subprocess, as `make chaos` runs it; it paces itself.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.cluster.test_chaos import RUN_TIMEOUT_S, chaos_command, processes_using


def _dedup(figures: dict) -> bool:
    return sum(n for name, n in figures.items() if name.startswith("again_")) > 0 \
        and figures["broken"] == 0


EXERCISED = {
    "backlog": lambda report: report["counts"]["adds_acknowledged"] > 300,
    "dedup": lambda report: _dedup(report["findings"]["figures"]),
    "maxdeliveries": lambda report: report["findings"]["figures"]["dead_deliveries"] > 0,
    "waitjob": lambda report: report["findings"]["figures"].get("waitjob_acked", 0) > 0,
    "qrequeue": lambda report: report["findings"]["figures"]["came_back"] > 0,
}


@pytest.mark.slow
@pytest.mark.timeout(RUN_TIMEOUT_S + 30)
@pytest.mark.parametrize("workload", sorted(EXERCISED))
def test_a_short_run_of_each_workload_keeps_its_promises(tmp_path, workload):
    report_path = tmp_path / "report.json"
    extra = ["--backlog", "300"] if workload == "backlog" else []
    result = subprocess.run(chaos_command(tmp_path, "--duration", "20", "--seed", "11",
                                          "--workload", workload, *extra,
                                          "--json", str(report_path)),
                            capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    report = json.loads(report_path.read_text())
    assert report["passed"] and report["workload"] == workload, output
    assert report["lost_count"] == 0 and report["unexpected_count"] == 0, output
    assert report["crash_count"] == 0 and report["workload_failure_count"] == 0, output
    assert report["faults"]["kill"] + report["faults"]["pause"] >= 2, output
    assert EXERCISED[workload](report), output
    assert report["delays"]["from_add"] is not None, output
    assert processes_using(tmp_path) == []
