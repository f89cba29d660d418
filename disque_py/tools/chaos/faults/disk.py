"""Faults of a node's disk: power loss, and damaged files on one node at a time.

  powerloss  kill -9, then the AOF cut to what the node had reported
             durable (persistence/durable_report.py: the nodes run with
             DISQUE_PY_DURABLE_REPORT set) and perhaps a torn tail
             (damage.py); then a restart after KILL_DOWN_S
  corrupt    kill -9, then a truncation or one flipped bit in the AOF or in
             nodes.conf (damage.py); then a restart

Both restart through the runbook (runbook.py): a node that refuses to start
must say which file is damaged; the run then repairs as an operator would
and starts it again. A node that exits at start-up without naming a file
is counted as a crash. A node whose nodes.conf was moved away comes back
as a new node: it is met from a member, and its old ID is forgotten on
every member (membership.py's Forgetting), before the harm counts as healed.

Rules kept: files are touched only while their node is down (killed here);
only one node at a time is damaged by `corrupt` (max_down allowing, it is
taken down like any other victim, and a second one waits for it to heal).
"""

from __future__ import annotations

from pathlib import Path

from disque_py.persistence import aof_format, durable_report
from disque_py.tools.chaos.cluster import query
from disque_py.tools.chaos.faults import damage, runbook
from disque_py.tools.chaos.faults.base import RESTART, FaultKind, Harm, register
from disque_py.tools.chaos.faults.membership import Forgetting, node_id_of
from disque_py.tools.chaos.faults.process import KILL_DOWN_S, START_FAILED
from disque_py.tools.chaos.nodes import KILLED, UP, Node

DURABLE_REPORT_FILE = "durable-offset"
NODES_CONF_SHARE = 0.3          # corrupt: nodes.conf this often, else the AOF
REFUSED, REPAIR = "refused", "repair"


def start_or_repair(injector, node: Node, harm_state: dict) -> bool:
    """Start a node that is down; if it refuses, repair what its refusal
    names (False: try again later). harm_state carries what the run must
    still do for this node (an identity to forget)."""
    if node.state == UP:
        return _settle_identity(injector, node, harm_state)
    node.start()
    try:
        node.wait_ready()
    except RuntimeError:
        return _refused(injector, node, harm_state)
    injector.record(RESTART, node.index)
    return _settle_identity(injector, node, harm_state)


def _refused(injector, node: Node, harm_state: dict) -> bool:
    if node.proc.poll() is None:        # alive but silent: counted like a failed start
        injector.record(START_FAILED, node.index, "no PING answer")
        return False
    node.state = KILLED                 # a refusal with a reason is not a crash...
    kind, line = runbook.diagnose(runbook.log_tail(node))
    if kind == runbook.UNKNOWN:         # ...one without is
        node.unexpected_exits.append(node.proc.returncode)
        injector.record(START_FAILED, node.index, "exited at start-up without naming a file")
        return False
    injector.record(REFUSED, node.index, line)
    if kind == runbook.AOF:
        injector.record(REPAIR, node.index, runbook.repair_aof(node))
    else:
        moved = runbook.move_away(node.dir / runbook.NODES_CONF, node.starts)
        harm_state["rejoin"] = True
        injector.record(REPAIR, node.index, f"nodes.conf moved to {moved.name}: a new node")
    return False


def _settle_identity(injector, node: Node, harm_state: dict) -> bool:
    """A node that came back under a new ID: MEET it, forget the old one."""
    if not harm_state.get("rejoin"):
        return True
    old_id = harm_state.get("old_id")
    if "forgetting" not in harm_state:
        members = [n for n in injector.nodes if n.member and n is not node and n.state == UP]
        if not members:
            return False
        query(members[0], "CLUSTER", "MEET", node.host, node.port)
        harm_state["forgetting"] = Forgetting(old_id) if old_id else None
        injector.record("meet", node.index, f"as a new node (was {old_id})")
    forgetting = harm_state["forgetting"]
    return forgetting is None or forgetting.done(injector)


def _durable_report_path(directory: Path) -> Path:
    return Path(directory) / DURABLE_REPORT_FILE


class _DiskFault(FaultKind):
    heal_name = RESTART
    loses_data = True

    def inject(self, now: float) -> Harm | None:
        node = self.injector.pick_victim()
        if node is None:
            return None
        state = {"old_id": node_id_of(node)}
        node.kill()
        detail = self.damage(node)
        self.injector.record(self.name, node.index, detail)
        down_for = self.injector.rng.uniform(*KILL_DOWN_S)
        return Harm(self.name, (node.index,), now + down_for,
                    lambda: start_or_repair(self.injector, node, state), restarts=True)

    def damage(self, node: Node) -> str:
        raise NotImplementedError


@register
class PowerLoss(_DiskFault):
    name = "powerloss"
    needs_disque_py = ("its cut reads the durable offset the node reports "
                       "(DISQUE_PY_DURABLE_REPORT), a disque-py seam")

    @classmethod
    def launch_env(cls, directory: Path) -> dict[str, str]:
        return {durable_report.ENVIRONMENT_VARIABLE: str(_durable_report_path(directory))}

    def damage(self, node: Node) -> str:
        aof = node.dir / runbook.AOF_NAME
        data = damage.read_file(str(aof))
        report = durable_report.read(str(_durable_report_path(node.dir)))
        if data is None:
            return "no AOF: a plain kill -9"
        if report is None:
            report = (damage.inode(str(aof)), 0)          # nothing fsynced yet
        inode, durable = report
        if inode != damage.inode(str(aof)):
            return "killed inside a rewrite's rename: the AOF left whole"
        written = data[:aof_format.data_end(data)]
        cut = damage.power_cut(self.injector.rng, written, durable)
        cut.apply(str(aof))
        return cut.what


@register
class Corrupt(_DiskFault):
    name = "corrupt"
    needs_disque_py = ("its runbook needs a node that names the damaged file when it refuses "
                       "it (disque-py's nodes.conf checksum and AOF reader)")

    def inject(self, now: float) -> Harm | None:
        if any(harm.kind == self.name for harm in self.injector.harms):
            return None                 # a minority: one damaged node at a time
        return super().inject(now)

    def damage(self, node: Node) -> str:
        rng = self.injector.rng
        aof = node.dir / runbook.AOF_NAME
        conf = node.dir / runbook.NODES_CONF
        target = conf if rng.random() < NODES_CONF_SHARE or not aof.exists() else aof
        data = damage.read_file(str(target))
        if data is None:
            return f"no {target.name} to damage"
        if target == aof:
            plan = damage.aof_damage(rng, data)
        else:
            plan = damage.text_damage(rng, data, runbook.NODES_CONF)
        plan.apply(str(target))
        return plan.what
