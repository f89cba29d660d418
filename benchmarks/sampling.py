"""py-spy samples of a process during a load, read back per function.

    with Sampler(py_spy_binary(None), pid, Path("worker.txt"), pinning.server_prefix()):
        ...the load...
    print_samples(Path("worker.txt"), jobs, "async worker: ...")

Used by bench_client.py --profile. py-spy is not a dependency of the
package: `pip install py-spy`, or give its path.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from common import print_table

SAMPLE_RATE = 1000           # py-spy's samples per second
SAMPLER_ATTACH_S = 1.0       # py-spy's time to attach before the load starts
STOP_TIMEOUT_S = 30.0
PROFILE_LINES = 25
LINE_NUMBER = re.compile(r":\d+\)$")


class Sampler:
    """py-spy sampling a process into a raw file of stacks and their counts.

    Only samples of a thread holding the GIL count (`--gil`): Python code
    and the C it runs with the GIL (uvloop's callbacks, hiredis), not the
    waits for a reply nor most system calls, which release it; so the
    samples add up to the process's user-space CPU, about. The sampled
    process is not stopped (`--nonblocking`), and py-spy runs on the
    node's CPU (`prefix`): on the sampled process's own CPU it would only
    look while that process is off the CPU."""

    def __init__(self, binary: str, pid: int, out: Path, prefix: list[str]) -> None:
        self.cmd = prefix + [binary, "record", "--pid", str(pid), "--rate", str(SAMPLE_RATE),
                             "--gil", "--nonblocking", "--format", "raw", "-o", str(out)]

    def __enter__(self) -> "Sampler":
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        time.sleep(SAMPLER_ATTACH_S)
        return self

    def __exit__(self, *exc) -> None:
        self.proc.send_signal(signal.SIGINT)         # py-spy writes its file and exits
        self.proc.wait(STOP_TIMEOUT_S)


def py_spy_binary(given: str | None) -> str:
    for candidate in (given, shutil.which("py-spy"), Path(sys.executable).with_name("py-spy")):
        if candidate and os.access(candidate, os.X_OK):
            return str(candidate)
    sys.exit("--profile needs py-spy: pip install py-spy, or --py-spy PATH")


def read_samples(path: Path) -> tuple[Counter[str], Counter[str], int]:
    """Samples per function (file, no line): its own, and its stacks'."""
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = [LINE_NUMBER.sub(")", frame) for frame in stack.split(";")
                  if frame and not frame.startswith("thread (")] or ["(no Python frame)"]
        total += int(count)
        own[frames[-1]] += int(count)
        for frame in set(frames):
            inclusive[frame] += int(count)
    return own, inclusive, total


def print_samples(path: Path, jobs: int, title: str) -> None:
    """The functions that took most samples, as microseconds per job; the
    title is followed by the sampled microseconds per job."""
    own, inclusive, total = read_samples(path)
    us_per_job = 1e6 / SAMPLE_RATE / jobs
    print_table(["function (own time)", "us/job", "share"],
                [[name, count * us_per_job, f"{100 * count / total:.1f}%"]
                 for name, count in own.most_common(PROFILE_LINES)],
                title=f"{title}; {total * us_per_job:.2f} us per job sampled holding the "
                      f"GIL ({path})")
    outermost = max(inclusive.values())             # runpy, click, the event loop's run
    print_table(["function (with what it calls)", "us/job", "share"],
                [[name, count * us_per_job, f"{100 * count / total:.1f}%"]
                 for name, count in inclusive.most_common()
                 if count < 0.95 * outermost][:PROFILE_LINES])
