"""`disque-py chaos` end to end: real nodes, real faults, the report read back.

A short run (3 nodes, REPLICATE 2, 30 s of load with at least one kill -9
and one SIGSTOP/SIGCONT) must lose nothing, crash nothing and say so in its
JSON report and exit status; and a checker stopped with SIGTERM mid-run
must leave no node process behind. The checker runs as a subprocess, as
`make chaos` runs it. Every wait has a deadline; the checker paces itself.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Callable

import pytest

from tests.support import wait_for

DISQUE_PY_BIN = Path(sys.executable).with_name("disque-py")
RUN_TIMEOUT_S = 300


def chaos_command(tmp_path: Path, *extra: str) -> list[str]:
    return [str(DISQUE_PY_BIN), "chaos", "--nodes", "3", "--replicate", "2",
            "--dir", str(tmp_path), "--rate", "10", "--fault-interval", "2.5",
            "--node-timeout", "2000", "--retry", "3", *extra]


def processes_using(directory: Path) -> list[int]:
    """PIDs of live processes whose command line names `directory` (our nodes)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().split(") ")[-1][:1]
        except OSError:
            continue
        if str(directory) in cmdline and "chaos" not in cmdline.split()[:3] and state != "Z":
            found.append(int(entry.name))
    return found


@pytest.mark.slow
@pytest.mark.timeout(RUN_TIMEOUT_S + 30)
def test_short_run_with_kills_and_pauses_loses_nothing(tmp_path):
    report_path = tmp_path / "report.json"
    result = subprocess.run(chaos_command(tmp_path, "--duration", "30", "--seed", "7",
                                          "--json", str(report_path)),
                            capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    report = json.loads(report_path.read_text())
    assert report["passed"] and "RESULT: PASS" in result.stdout, output
    assert report["lost_count"] == 0 and report["crash_count"] == 0, output
    assert report["faults"]["kill"] >= 1 and report["faults"]["pause"] >= 1, output
    assert report["faults"]["restarts"] >= 1, output
    counts = report["counts"]
    assert counts["adds_acknowledged"] > 50, output
    assert counts["jobs_delivered"] >= counts["adds_acknowledged"], output
    assert 0 <= report["duplicate_rate"] < 1
    assert processes_using(tmp_path) == []
    assert not list(tmp_path.glob("chaos-*")), "a passing run without --keep removes its nodes"


def sigterm_mid_run(tmp_path: Path, *extra: str,
                    while_running: Callable[[str], None] = lambda output: None) -> str:
    """Start a long run, SIGTERM it once its cluster formed (after
    `while_running` looked at its output so far); check it exits non-zero
    and leaves no node running. Returns everything it printed."""
    checker = subprocess.Popen(chaos_command(tmp_path, *extra, "--duration", "300"),
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(checker.stdout), daemon=True)
    reader.start()
    try:
        wait_for(lambda: any("cluster formed" in line for line in lines), timeout=60,
                 interval=0.1, message="the chaos cluster to form")
        while_running("".join(lines))
        checker.send_signal(signal.SIGTERM)
        assert checker.wait(timeout=90) != 0
    finally:
        if checker.poll() is None:
            checker.kill()
            checker.wait()
    reader.join(timeout=5)
    output = "".join(lines)
    assert processes_using(tmp_path) == [], output
    return output


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_sigterm_mid_run_stops_every_node(tmp_path):
    def three_nodes_run(output: str) -> None:
        assert len(processes_using(tmp_path)) == 3, output

    output = sigterm_mid_run(tmp_path, while_running=three_nodes_run)
    assert "kept in" in output, output
