"""`disque-py chaos --disque-c BINARY` end to end: Disque C's own server under
the same clients, kills and pauses, for the comparison rows of `make chaos`.

A short run (3 nodes, REPLICATE 2, 25 s of kill -9 and SIGSTOP) on Disque
C's disque-server must lose nothing, crash nothing and leave no process.
Disque C is not part of this repository and nothing here builds it: the
test runs where its binary is found (DISQUE_C_SERVER, else a Disque
checkout built beside this one, ../disque-c/src/disque-server) and is
skipped elsewhere, as in CI; tests/unit/test_chaos_disque_c.py speaks for
the option's checks everywhere.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.cluster.test_chaos import RUN_TIMEOUT_S, chaos_command, processes_using

CHECKOUT_BESIDE = Path(__file__).resolve().parents[2].parent / "disque-c/src/disque-server"


def disque_c_server() -> str | None:
    path = os.environ.get("DISQUE_C_SERVER") or str(CHECKOUT_BESIDE)
    return path if os.path.isfile(path) and os.access(path, os.X_OK) else None


DISQUE_C = disque_c_server()


@pytest.mark.slow
@pytest.mark.timeout(RUN_TIMEOUT_S + 30)
@pytest.mark.skipif(DISQUE_C is None,
                    reason="no Disque C disque-server (set DISQUE_C_SERVER, or build Disque in "
                           "../disque-c): it is not part of this repository, and CI has none")
def test_short_run_on_disque_c_with_kills_and_pauses_loses_nothing(tmp_path):
    report_path = tmp_path / "report.json"
    result = subprocess.run(chaos_command(tmp_path, "--disque-c", DISQUE_C, "--duration", "25",
                                          "--seed", "11", "--json", str(report_path)),
                            capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    report = json.loads(report_path.read_text())
    assert report["settings"]["server"] == "Disque C" and "server Disque C" in result.stdout
    assert report["settings"]["rereplicate"] == "no"
    assert report["passed"] and report["lost_count"] == 0 and report["crash_count"] == 0, output
    assert report["faults"]["kill"] >= 1 and report["faults"]["pause"] >= 1, output
    assert report["counts"]["adds_acknowledged"] > 30, output
    assert processes_using(tmp_path) == []
