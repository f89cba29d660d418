"""What an operator does when a node refuses to start on a damaged file.

Owns the decisions (diagnose: which file the node's refusal names) and the
repairs, each the documented step (docs/checking.md, "Damaged files"):

  AOF        `disque-py check-aof --fix FILE` cuts it at its first bad
             record. When what it cut was corruption (whole records may
             have followed it), the node lost copies it had confirmed: the
             `vars` line of its nodes.conf goes too, so that it starts with
             a new start epoch and its peers copy those jobs back to it
             (docs/healing.md); a torn last record was never confirmed and
             needs nothing more. A file with nothing readable (a damaged
             header) is moved away whole: the node starts empty, with a new
             epoch.
  nodes.conf moved away: the node starts as a new node (a new ID; its AOF's
             jobs are kept); the run then MEETs it from a member and sends
             CLUSTER FORGET of its old ID to every other node.

A refusal the runbook does not recognise is not repaired: the node stays
down and the run reports it (a node that exits at start-up without saying
why is a bug). Rules kept: only files of the node's own directory are
touched, and every step is returned as text for the run's fault record.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from disque_py.tools.chaos.nodes import SERVER_LOG, STDERR_LOG, Node

AOF_NAME = "disque.aof"
NODES_CONF = "nodes.conf"
AOF, NODES_CONF_KIND, UNKNOWN = "aof", "nodes.conf", "unknown"
AOF_REFUSALS = ("append only file", "in the AOF")
NODES_CONF_REFUSAL = "corrupted cluster config"
CHECK_AOF_TIMEOUT_S = 60.0
LOG_TAIL_LINES = 20
MOVED_SUFFIX = ".damaged-%d"


def diagnose(log_tail: str) -> tuple[str, str]:
    """(which file the refusal names: AOF, NODES_CONF_KIND or UNKNOWN, the line saying so)."""
    for line in reversed(log_tail.splitlines()):
        if NODES_CONF_REFUSAL in line:
            return NODES_CONF_KIND, line.strip()
        if any(mark in line for mark in AOF_REFUSALS):
            return AOF, line.strip()
    return UNKNOWN, ""


def log_tail(node: Node) -> str:
    lines = []
    for name in (SERVER_LOG, STDERR_LOG):
        try:
            lines += (node.dir / name).read_text(errors="replace").splitlines()[-LOG_TAIL_LINES:]
        except FileNotFoundError:
            pass
    return "\n".join(lines)


def check_aof_command(path: Path) -> list[str]:
    """`disque-py check-aof --fix PATH`, by this interpreter (no PATH lookup)."""
    return [sys.executable, "-c", "from disque_py.tools.cli import main; main()",
            "check-aof", "--fix", str(path)]


def fix_decision(check_output: str, exit_status: int) -> str:
    """What the check-aof --fix run calls for next: 'done' (a torn tail cut,
    or nothing wrong), 'new-epoch' (corruption cut: confirmed records may be
    gone) or 'move-away' (nothing readable to keep)."""
    if "Nothing readable to keep" in check_output:
        return "move-away"
    if exit_status != 0:
        return "move-away"
    if "AOF is not valid: corruption" in check_output:
        return "new-epoch"
    return "done"


def repair_aof(node: Node) -> str:
    path = node.dir / AOF_NAME
    result = subprocess.run(check_aof_command(path), capture_output=True, text=True,
                            timeout=CHECK_AOF_TIMEOUT_S, cwd=node.dir)
    output = result.stdout + result.stderr
    decision = fix_decision(output, result.returncode)
    said = output.strip().splitlines()[0] if output.strip() else "(no output)"
    if decision == "move-away":
        moved = move_away(path, node.starts)
        return f"check-aof --fix: {said}; AOF moved to {moved.name}"
    if decision == "new-epoch":
        drop_vars_line(node.dir / NODES_CONF)
        return f"check-aof --fix: {said}; nodes.conf vars line dropped (new start epoch)"
    return f"check-aof --fix: {said}"


def drop_vars_line(path: Path) -> None:
    """nodes.conf without its `vars` line (start epoch and checksum): the
    node takes a new start epoch; the file is then read unchecked, as a
    file Disque wrote."""
    try:
        lines = path.read_text(errors="replace").splitlines(keepends=True)
    except FileNotFoundError:
        return
    path.write_text("".join(line for line in lines if not line.startswith("vars ")))


def move_away(path: Path, number: int) -> Path:
    moved = path.with_name(path.name + MOVED_SUFFIX % number)
    path.rename(moved)
    return moved
