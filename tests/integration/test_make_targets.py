"""`make run` and the Makefile's install targets, run for real.

`make run PORT=N` is started in the checkout as a new user starts it: the
node's files (nodes.conf; the AOF once CONFIG SET turns it on) land in
run/N/, which git ignores, and nothing new lands at the top of the
checkout. The install targets run with a PATH holding only the commands
a test says are there and an apt-get that writes down what it is asked:
each installs the Debian packages of the missing commands and no other,
with --no-upgrade, and runs no apt-get at all when nothing is missing
(an installed package named to apt-get install gets upgraded).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from tests.support import HOST, free_port, wait_for

ROOT = Path(__file__).resolve().parents[2]
MAKE = shutil.which("make")
MAKE_RUN_START_S = 60          # the first `make run` may reinstall a stale venv
STOP_TIMEOUT_S = 20
APT_INSTALL = "install -y -qq --no-install-recommends --no-upgrade"

# What `make test` needs on a fresh machine: each command and its package.
TEST_PACKAGES = {"redis-cli": "redis-tools", "nc": "netcat-openbsd", "openssl": "openssl",
                 "ip": "iproute2", "nft": "nftables", "java": "openjdk-17-jre-headless", "node": "nodejs",
                 "npm": "npm", "chromium": "chromium", "chromedriver": "chromium-driver"}


# ------------------------------------------------------------- make run

def top_level_files() -> dict[str, int]:
    return {path.name: path.stat().st_mtime_ns for path in ROOT.iterdir() if path.is_file()}


@pytest.fixture
def make_run(tmp_path):
    """`make run PORT=N` in its own process group (its output in `output`,
    the checkout's top-level files before it in `files_before`), ended with
    SIGTERM; the run directory it made is removed afterwards."""
    assert MAKE, "make is needed (the README's first command)"
    port = free_port()
    run_root_existed = (ROOT / "run").exists()
    files_before = top_level_files()
    output = tmp_path / "make-run.out"
    with output.open("wb") as sink:
        started = subprocess.Popen([MAKE, "--no-print-directory", "run", f"PORT={port}"],
                                   cwd=ROOT, stdout=sink, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    started.port, started.output, started.files_before = port, output, files_before
    try:
        yield started
    finally:
        if started.poll() is None:
            os.killpg(started.pid, signal.SIGTERM)
            started.wait(STOP_TIMEOUT_S)
        shutil.rmtree(ROOT / "run" / str(port), ignore_errors=True)
        if not run_root_existed:
            shutil.rmtree(ROOT / "run", ignore_errors=True)


def test_make_run_keeps_the_nodes_files_in_run_port(make_run):
    before = make_run.files_before
    run_dir = ROOT / "run" / str(make_run.port)
    client = redis.Redis(HOST, make_run.port)

    def answers() -> bool:
        assert make_run.poll() is None, make_run.output.read_text(errors="replace")
        return client.ping()

    wait_for(answers, MAKE_RUN_START_S, interval=0.1, message="`make run` answering PING")
    wait_for(lambda: (run_dir / "nodes.conf").is_file(), message="run/PORT/nodes.conf")
    client.config_set("appendonly", "yes")
    wait_for(lambda: (run_dir / "disque.aof").is_file(), message="run/PORT/disque.aof")
    client.execute_command("ADDJOB", "q", "kept", 0)
    # Taken before the node moved to run/PORT/, as Disque takes it.
    assert Path(client.info("server")["executable"]) == ROOT / ".venv/bin/disque-server"
    client.close()
    after = top_level_files()
    assert set(after) == set(before), set(after) ^ set(before)
    changed = [name for name in after if after[name] != before[name]]
    assert not changed, changed
    files = [f"run/{make_run.port}/nodes.conf", f"run/{make_run.port}/disque.aof"]
    ignored = subprocess.run(["git", "-C", str(ROOT), "check-ignore", *files],
                             capture_output=True, text=True)
    assert ignored.stdout.split() == files, ignored


# ------------------------------------------------------- install targets

def run_target(tmp_path: Path, target: str, present, *variables: str) -> list[str]:
    """Run `make target` with only `present` (and apt-get) on PATH; the
    argument lines apt-get was called with."""
    assert MAKE, "make is needed (the README's first command)"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True)
    for command in present:
        (bin_dir / command).write_text("#!/bin/sh\n")
        (bin_dir / command).chmod(0o755)
    (bin_dir / "id").symlink_to(shutil.which("id"))      # the Makefile's sudo test
    calls = tmp_path / "apt-get.calls"
    (bin_dir / "apt-get").write_text(f'#!/bin/sh\necho "$*" >> {calls}\n')
    (bin_dir / "apt-get").chmod(0o755)
    result = subprocess.run([MAKE, "--no-print-directory", target, "SUDO=", *variables],
                            cwd=ROOT, env={"PATH": str(bin_dir)}, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    return calls.read_text().splitlines() if calls.exists() else []


def installed(calls: list[str]) -> list[str]:
    """The packages of the apt-get install calls, checking they cannot upgrade."""
    packages = []
    for call in calls:
        if call.startswith("install"):
            assert call.startswith(APT_INSTALL + " "), call
            packages += call[len(APT_INSTALL):].split()
    return packages


def test_only_the_packages_of_missing_commands_are_installed(tmp_path):
    missing = ("nc", "java", "chromium")
    present = [command for command in TEST_PACKAGES if command not in missing]
    calls = run_target(tmp_path, "test-commands", present)
    assert calls[0] == "update -qq", calls
    assert installed(calls) == [TEST_PACKAGES[command] for command in missing]


def test_nothing_is_installed_when_every_command_is_there(tmp_path):
    assert run_target(tmp_path, "test-commands", TEST_PACKAGES) == []


def test_make_run_installs_redis_tools_only_without_redis_cli(tmp_path):
    assert installed(run_target(tmp_path / "none", "redis-cli-deps", [])) == ["redis-tools"]
    assert run_target(tmp_path / "there", "redis-cli-deps", ["redis-cli"]) == []


def test_build_deps_installs_only_the_compiler_when_only_it_is_missing(tmp_path):
    # This interpreter has venv and its headers (the engine was built with them).
    python = f"PYTHON={sys.executable}"
    assert installed(run_target(tmp_path / "no-cc", "build-deps", [], python)) == ["gcc"]
    assert run_target(tmp_path / "cc", "build-deps", ["cc"], python) == []
