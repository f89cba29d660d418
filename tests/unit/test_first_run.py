"""What a new user meets first: the README's promises and `make run`.

No server is started here (tests/integration/test_make_targets.py runs
`make run` for real, tests/integration/test_startup_failures.py starts
servers on taken ports). `make -n` prints what `make run` would do without
doing it.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
REPO_PATH = re.compile(r"`((?:docs|spark_jobs|tests|benchmarks|docker|disque_py)/[^`\s]*)`")


def make_run_plan() -> str:
    assert shutil.which("make"), "make is needed (the README's first command)"
    plan = subprocess.run(["make", "-n", "run", "PORT=7799"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert plan.returncode == 0, plan.stderr
    return plan.stdout


def test_make_run_installs_redis_cli_before_it_starts_the_node():
    text = make_run_plan()
    assert "redis-cli=redis-tools" in text, text
    assert text.index("redis-tools") < text.index("disque-server --port 7799"), text


def test_make_run_keeps_the_nodes_files_in_run_port():
    text = make_run_plan()
    assert "mkdir -p run/7799\n" in text, text
    assert text.index("mkdir -p run/7799") < text.index("disque-server --port 7799"), text
    assert "disque-server --port 7799 --bind 127.0.0.1 --dir run/7799\n" in text, text


def test_the_readme_says_how_to_pick_another_port():
    assert "make run PORT=" in README
    assert "the client port + 10000" in README


def test_the_readme_points_only_inside_the_repository():
    assert "../" not in README
    named = REPO_PATH.findall(README)
    assert "docs/ARCHITECTURE.md" in named
    missing = [path for path in named if not (ROOT / path).exists()]
    assert not missing, missing


def test_the_readme_says_how_to_run_the_venvs_spark_submit():
    # Checked for real in tests/spark/test_spark_submit.py.
    assert "PYSPARK_PYTHON=.venv/bin/python .venv/bin/spark-submit spark_jobs/" in README
