"""Chaos runs against Disque C's own server (`--disque-c BINARY`), for comparison.

Owns what such a run may ask for. The nodes run the disque-server binary
given (built from antirez/disque, never part of this repository) with the
options both servers share (--port, --bind, --dir, --logfile,
--cluster-node-timeout, --appendonly, --appendfsync); everything else of
the run (the clients, the faults, the checks) is unchanged. Refused, with
the reason: a workload or a kind of fault that needs something only
disque-py has (their `needs_disque_py`), and `--rereplicate` (Disque C does
not copy jobs again when holders are lost: its runs are checked as
`--no-rereplicate` ones, where a job every holder of which was killed
without an AOF is an excused loss).
"""

from __future__ import annotations

import os
from typing import Protocol

from disque_py.tools.chaos.faults import KINDS
from disque_py.tools.chaos.workloads import WORKLOADS

SERVER_NAME = "Disque C"
OURS = "disque-py"


class ChaosOptions(Protocol):
    """What this module reads of run.py's ChaosOptions (run.py imports this one)."""

    disque_c: str | None
    faults: tuple[str, ...]
    workload: str
    rereplicate: bool | None


def refusals(options: ChaosOptions) -> list[str]:
    """Why Disque C's server cannot run these options; [] when it can."""
    binary = options.disque_c
    problems = []
    if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
        problems.append(f"{binary} is not an executable file (build it with make in "
                        "Disque's src/)")
    for kind in options.faults:
        if KINDS[kind].needs_disque_py:
            problems.append(f"--faults {kind}: {KINDS[kind].needs_disque_py}")
    workload = WORKLOADS[options.workload]
    if workload.needs_disque_py:
        problems.append(f"--workload {workload.name}: {workload.needs_disque_py}")
    if options.rereplicate:
        problems.append("--rereplicate: Disque C has no rereplicate directive (it does not "
                        "copy jobs again when holders are lost)")
    return problems


def check(options: ChaosOptions) -> None:
    """ValueError naming every reason Disque C cannot run these options."""
    if options.disque_c is None:
        return
    problems = refusals(options)
    if problems:
        raise ValueError(f"{SERVER_NAME} cannot run this: " + "; ".join(problems))


def server_name(options: ChaosOptions) -> str:
    return OURS if options.disque_c is None else SERVER_NAME
