"""What a new user meets first: the README's promises, the pages under docs/
it leads to, and `make run`.

No server is started here (tests/integration/test_make_targets.py runs
`make run` for real, tests/integration/test_startup_failures.py starts
servers on taken ports, tests/docs/test_snippets.py runs the pages'
snippets). `make -n` prints what `make run` would do without doing it.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
REPO_PATH = re.compile(r"`((?:docs|spark_jobs|tests|benchmarks|docker|disque_py)/[^`\s]*)`")
LINK = re.compile(r"\]\(([^)\s]+)\)")
# A front page read in a few minutes; the topics live under docs/.
README_MAX_LINES = 200


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


def test_the_readme_stays_a_front_page():
    assert len(README.splitlines()) <= README_MAX_LINES, "move the detail to a page under docs/"


def test_the_readme_points_only_inside_the_repository():
    assert "../" not in README
    linked = {target.split("#")[0] for target in LINK.findall(README)}
    pages = {f"docs/{page.name}" for page in PAGES[1:]}
    assert pages <= linked, f"pages the README does not lead to: {sorted(pages - linked)}"


def test_the_paths_the_pages_name_exist():
    for page in PAGES:
        missing = [path for path in REPO_PATH.findall(page.read_text())
                   if not (ROOT / path).exists() and not any(ROOT.glob(path))]
        assert not missing, f"{page.relative_to(ROOT)} names {missing}"


def headings(page: Path) -> set[str]:
    """The anchors GitHub makes of a page's headings (fenced code left out)."""
    anchors, fenced = set(), False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            text = line.lstrip("#").strip().lower()
            anchors.add(re.sub(r"[^\w\- ]", "", text).replace(" ", "-"))
    return anchors


def test_every_link_between_the_pages_resolves():
    broken = []
    for page in PAGES:
        for target in LINK.findall(page.read_text()):
            if re.match(r"[a-z]+:", target):
                continue   # http(s): outside the repository, not checked here
            path, _, anchor = target.partition("#")
            resolved = (page.parent / path).resolve() if path else page
            if not resolved.is_relative_to(ROOT) or not resolved.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
            elif anchor and anchor not in headings(resolved):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


def test_the_docs_say_how_to_run_the_venvs_spark_submit():
    # Checked for real in tests/spark/test_spark_submit.py.
    spark = (ROOT / "docs" / "spark.md").read_text()
    assert "PYSPARK_PYTHON=.venv/bin/python .venv/bin/spark-submit spark_jobs/" in spark
