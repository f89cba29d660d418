"""tests/sanitized.py: a sanitizer report in any process fails the run.

A memory error is made on purpose (reading address 0 through ctypes: ASan
reports the SEGV) in the command itself and in a process it starts and
outlives, as a test outlives the servers it stopped. Needs clang's ASan
runtime (make test installs it before the suite runs)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests import sanitized

ROOT = Path(__file__).resolve().parents[2]      # where `-m tests.sanitized` is found

CRASH = "import ctypes; ctypes.string_at(0)"
IN_A_CHILD = ("import subprocess, sys; "
              f"subprocess.run([sys.executable, '-c', {CRASH!r}]); print('parent done')")


def run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tests.sanitized", "--", sys.executable, "-c",
                           code], capture_output=True, text=True, timeout=60, cwd=ROOT)


def test_a_clean_command_passes_with_its_own_status():
    assert run("print('fine')").returncode == 0
    assert run("raise SystemExit(3)").returncode == 3


def test_a_report_in_the_command_fails_the_run_and_is_shown():
    done = run(CRASH)
    assert done.returncode == 1
    assert "AddressSanitizer: SEGV" in done.stderr and "sanitizer report" in done.stderr


def test_a_report_in_a_child_process_fails_the_run_though_the_command_succeeded():
    done = run(IN_A_CHILD)
    assert "parent done" in done.stdout
    assert done.returncode == 1, done.stderr
    assert "AddressSanitizer: SEGV" in done.stderr


def test_the_environment_preloads_the_runtime_and_keeps_the_callers_options(tmp_path,
                                                                            monkeypatch):
    monkeypatch.setenv("ASAN_OPTIONS", "verbosity=1")
    env = sanitized.sanitized_environment("/runtime.so", tmp_path)
    assert env["LD_PRELOAD"].split()[0] == "/runtime.so"
    assert env["ASAN_OPTIONS"].index("detect_leaks=0") < env["ASAN_OPTIONS"].index("verbosity=1")
    assert env["ASAN_OPTIONS"].endswith(f":log_path={tmp_path / 'asan'}")
    assert env["UBSAN_OPTIONS"].endswith(f":log_path={tmp_path / 'ubsan'}")


def test_a_known_bug_of_a_debian_tool_the_tests_start_is_no_report():
    # make test-asan failed on it: the chaos checker's network faults run
    # `ip route show`, and the preloaded runtime stopped ip on iproute2's
    # own strncpy onto itself (tests/asan.supp names it).
    done = run("import subprocess; subprocess.run(['ip', '-4', 'route', 'show', 'table', 'all'], "
               "check=True, stdout=subprocess.DEVNULL)")
    assert done.returncode == 0, done.stderr[-2000:]
