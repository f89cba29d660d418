"""Membership changes under load: a node joins, one leaves, one is forgotten.

The run keeps spare node slots (not started, not members). Each injection
is one of:

  join     a spare starts empty (a new ID: its directory is wiped when it
           stops being a member) and is met by CLUSTER MEET from a member;
  leave    a member says CLUSTER LEAVING yes: it takes no new copies, and
           clients are turned away (-LEAVING) while its queued jobs drain
           to the others; once it holds no job (or after LEAVE_DRAIN_S) it
           is stopped, and CLUSTER FORGET of its ID is sent to every member
           (Disque's documented way out); a node removed before it was
           drained loses the copies it still held, as a node forgotten dead;
  forget   a member is killed -9 and forgotten at once (an operator removing
           a dead machine): its copies are gone for good, and healing copies
           its jobs again from the survivors (docs/healing.md: a forgotten
           holder counts as lost) while the load goes on.

A leaving or forgotten node counts as down (max_down) until it is gone
from every member's table; it then becomes a spare. Membership stays
between `replicate` members (never fewer, so REPLICATE can be met) and the
run's nodes plus spares. CLUSTER FORGET is sent to every member, again
until all of them are up at once and have had it (Forgetting): a member
that was down when it was first sent would otherwise gossip the forgotten
node back once the others' 60 s blacklist ends.

Rules kept: clients only ever use the run's first `nodes` addresses (a
spare may sit on one of them once it joins), and the promise checked is
unchanged: no acknowledged job is lost.
"""

from __future__ import annotations

import time

from disque_py.tools.chaos.cluster import query, text
from disque_py.tools.chaos.faults.base import FaultKind, Harm, register
from disque_py.tools.chaos.link import LinkError
from disque_py.tools.chaos.nodes import UP, Node

LEAVE_DRAIN_S = 30.0
LEAVE_POLL_S = 1.0
FORGET_SETTLE_S = 5.0           # a forgotten node counts as down this long at least
STATE_FILES = ("nodes.conf*", "disque.aof*", "durable-offset")   # what makes it the old node
JOIN, LEAVE, FORGET = "join", "leave", "forget"


def node_id_of(node: Node) -> str | None:
    try:
        return text(query(node, "CLUSTER", "MYID"))
    except LinkError:
        return None


def members(injector) -> list[Node]:
    return [node for node in injector.nodes if node.member]


def wipe(node: Node) -> None:
    """The node's state (not its logs, nor its clock file): the slot starts
    as a new node next time."""
    for pattern in STATE_FILES:
        for path in node.dir.glob(pattern):
            path.unlink(missing_ok=True)


class Forgetting:
    """CLUSTER FORGET of one ID on every member, until one pass reached them all."""

    def __init__(self, node_id: str) -> None:
        self.node_id = node_id

    def done(self, injector) -> bool:
        reached = True
        for node in members(injector):
            if node.state != UP:
                reached = False
                continue
            try:
                query(node, "CLUSTER", "FORGET", self.node_id)
            except LinkError as error:
                if "unknown" not in str(error).lower() and "myself" not in str(error).lower():
                    reached = False
        return reached


@register
class Membership(FaultKind):
    name = "membership"
    needs_disque_py = ("a forgotten holder's jobs are copied again by disque-py's "
                       "rereplicate, which Disque C has not")
    heal_name = "removed"

    def inject(self, now: float) -> Harm | None:
        injector = self.injector
        count = len(members(injector))
        touched = {index for harm in injector.harms for index in harm.nodes}
        spares = [node for node in injector.nodes
                  if not node.member and node.state != UP and node.index not in touched]
        choices = []
        if spares:
            choices.append(JOIN)
        if count - 1 >= injector.plan.replicate and injector.pick_victim() is not None:
            choices += [LEAVE, FORGET]
        if not choices:
            return None
        action = injector.rng.choice(choices)
        if action == JOIN:
            return self._join(injector.rng.choice(spares))
        node = injector.pick_victim()
        return self._leave(node, now) if action == LEAVE else self._forget(node, now)

    def _join(self, node: Node) -> None:
        wipe(node)
        node.start()
        try:
            node.wait_ready()
        except RuntimeError:
            self.injector.notice_crashes()
            return None
        sponsor = next(n for n in members(self.injector) if n.state == UP)
        query(sponsor, "CLUSTER", "MEET", node.host, node.port)
        node.member = True
        self.injector.record(JOIN, node.index, f"met by {sponsor.name}")
        return None

    def _leave(self, node: Node, now: float) -> Harm | None:
        node_id = node_id_of(node)
        if node_id is None:
            return None
        query(node, "CLUSTER", "LEAVING", "yes")
        self.injector.record(self.name, node.index, LEAVE)
        state = {"id": node_id, "until": now + LEAVE_DRAIN_S}
        return Harm(LEAVE, (node.index,), now + LEAVE_POLL_S,
                    lambda: self._remove_when_drained(node, state), restarts=False)

    def _remove_when_drained(self, node: Node, state: dict) -> bool:
        if "forgetting" not in state:
            held = _jobs_held(node)
            if held and time.monotonic() < state["until"]:
                return False
            node.stop()
            node.member = False
            state["forgetting"] = Forgetting(state["id"])
            self.injector.record("stopped", node.index,
                                 f"left holding {held} jobs" if held else "drained")
        return self._forgotten(node, state["forgetting"])

    def _forget(self, node: Node, now: float) -> Harm | None:
        node_id = node_id_of(node)
        if node_id is None:
            return None
        node.kill()
        node.member = False
        forgetting = Forgetting(node_id)
        forgetting.done(self.injector)
        self.injector.record(self.name, node.index, f"{FORGET} {node_id[:8]}")
        return Harm(FORGET, (node.index,), now + FORGET_SETTLE_S,
                    lambda: self._forgotten(node, forgetting))

    def _forgotten(self, node: Node, forgetting: Forgetting) -> bool:
        if not forgetting.done(self.injector):
            return False
        self.injector.record(self.heal_name, node.index)
        return True


def _jobs_held(node: Node) -> int | None:
    try:
        info = text(query(node, "INFO", "jobs"))
        return int(info.split("registered_jobs:")[1].split()[0])
    except (LinkError, IndexError, ValueError):
        return None
