"""The venv's spark-submit, run as docs/spark.md says, without activating the
venv: PYSPARK_PYTHON names the venv's Python (the one with pyspark and
disque_py), for the driver and the workers. A real JVM runs the job."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent


def _without_the_venv() -> dict[str, str]:
    """This environment as a shell that never activated the venv has it."""
    env = {name: value for name, value in os.environ.items()
           if name not in ("VIRTUAL_ENV", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON",
                           "SPARK_HOME", "PYTHONPATH")}
    env["PATH"] = os.pathsep.join(entry for entry in env.get("PATH", "").split(os.pathsep)
                                  if entry and Path(entry).resolve() != VENV_BIN.resolve())
    return env


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_venvs_spark_submit_runs_a_job_with_pyspark_python_set(tmp_path):
    env = _without_the_venv()
    env["PYSPARK_PYTHON"] = str(VENV_BIN / "python")
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    out = tmp_path / "rows"
    result = subprocess.run(
        [str(VENV_BIN / "spark-submit"), "--master", "local[2]",
         "spark_jobs/generate_rows.py", "--rows", "50", "--format", "json", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=280)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert (out / "_SUCCESS").exists()
    rows = [line for part in out.glob("part-*.json") for line in part.read_text().splitlines()]
    assert len(rows) == 50
