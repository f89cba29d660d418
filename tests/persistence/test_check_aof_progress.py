"""`disque-py check-aof` shows its progress on stderr: click's bar on a
terminal (run here under a pseudo-terminal, python's pty module), plain
lines otherwise; stdout stays the one-line report scripts read.

The AOF of 50,000 jobs (about 11 MB) is reported on every 10,000 records
read, whatever the machine's speed: the plain lines are counted exactly.
"""

from __future__ import annotations

import os
import pty
import re
import subprocess
from pathlib import Path

import pytest

from tests.persistence.helpers import check_aof, check_aof_command, parse_records
from disque_py.tools.large_aof import write_large_aof

JOBS = 50_000
PLAIN_LINE = re.compile(r"^check-aof: (\d+\.\d\d)% \((\d+\.\d) of (\d+\.\d) MB\), "
                        r"(\d+) records, (\d+) records/s, (\d+) s left$")
RUN_TIMEOUT_S = 120


@pytest.fixture(scope="module")
def large_aof(tmp_path_factory) -> tuple[Path, int]:
    path = tmp_path_factory.mktemp("check") / "disque.aof"
    return path, write_large_aof(path, JOBS)


def valid_report(records: int, size: int) -> str:
    return f"AOF is valid: {records} records, {size} bytes of data\n"


def run_on_terminal(path: Path) -> tuple[int, str, str]:
    """check-aof with stderr on a pseudo-terminal and stdout on a pipe:
    (exit status, what the terminal showed, stdout)."""
    controller, terminal = pty.openpty()
    try:
        proc = subprocess.Popen(check_aof_command(path), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=terminal)
    finally:
        os.close(terminal)
    shown = b""
    try:
        while True:
            try:
                chunk = os.read(controller, 65536)
            except OSError:          # EIO: the child closed the terminal
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(controller)
    stdout = proc.stdout.read()
    proc.stdout.close()
    return proc.wait(RUN_TIMEOUT_S), shown.decode(errors="replace"), stdout.decode()


def test_without_a_terminal_progress_is_plain_lines_on_stderr(large_aof):
    path, size = large_aof
    done = check_aof(path)
    assert done.returncode == 0
    assert done.stdout == valid_report(JOBS + 1, size)
    lines = done.stderr.splitlines()
    matches = [PLAIN_LINE.match(line) for line in lines]
    assert all(matches), lines
    assert "\r" not in done.stderr and "\x1b" not in done.stderr
    # A report each 10,000 records and one at the end; a line for each that
    # passes a 10% step (the one at 50,000 records is at 99.99%).
    percents = [float(m[1]) for m in matches]
    records = [int(m[4]) for m in matches]
    assert records == [10_000, 20_000, 30_000, 40_000, 50_000, JOBS + 1]
    assert percents == sorted(percents) and percents[-1] == 100.0
    assert all(float(m[3]) == round(size / 1024 / 1024, 1) for m in matches)


def test_on_a_terminal_progress_is_a_bar_on_stderr_and_stdout_is_unchanged(large_aof):
    path, size = large_aof
    status, shown, stdout = run_on_terminal(path)
    assert status == 0
    assert stdout == valid_report(JOBS + 1, size)
    assert "Checking disque.aof" in shown
    assert re.search(r"\[#+ *\]", shown), shown          # click's bar
    assert "100%" in shown and f"{JOBS + 1} records" in shown
    assert "\r" in shown                                 # redrawn in place
    assert "check-aof:" not in shown                     # not the plain lines


def test_plain_lines_stop_where_the_damage_is_and_the_report_is_unchanged(tmp_path, large_aof):
    source, size = large_aof
    path = tmp_path / "disque.aof"
    data = bytearray(source.read_bytes())
    middle = next(r.offset for r in parse_records(bytes(data)) if r.offset >= size // 2)
    data[middle] = ord("#")                    # a record of no known kind, mid-file
    path.write_bytes(bytes(data))
    done = check_aof(path)
    assert done.returncode == 1
    assert done.stdout.startswith(
        f"AOF is not valid: corruption: unknown record kind at byte offset {middle} (")
    percents = [float(PLAIN_LINE.match(line)[1]) for line in done.stderr.splitlines()]
    assert percents and max(percents) <= middle * 100 / size


def test_a_small_file_shows_no_progress(tmp_path):
    path = tmp_path / "disque.aof"
    size = write_large_aof(path, 1000)               # about 230 KB
    done = check_aof(path)
    assert (done.returncode, done.stdout, done.stderr) == \
        (0, valid_report(1001, size), "")
    status, shown, stdout = run_on_terminal(path)
    assert (status, shown, stdout) == (0, "", valid_report(1001, size))
