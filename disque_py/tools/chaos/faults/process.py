"""Faults of the node process: kill -9, SIGSTOP, and an AOF rewrite to land them in.

  kill     SIGKILL, then a restart on the same port and directory (the node
           loads its AOF) after KILL_DOWN_S; a restart that fails is retried
  pause    SIGSTOP, then SIGCONT after PAUSE_S: the node's peers time it out
           while its sockets stay open
  rewrite  BGREWRITEAOF on a running node (with the AOF on), so that kills
           land during rewrites too; nothing to undo
"""

from __future__ import annotations

from disque_py.tools.chaos.faults.base import RESTART, FaultKind, Harm, Injector, register
from disque_py.tools.chaos.link import Link, LinkError
from disque_py.tools.chaos.nodes import PAUSED, UP, Node

KILL_DOWN_S = (2.0, 10.0)
PAUSE_S = (1.0, 6.0)
REWRITE_TIMEOUT_S = 2.0
START_FAILED = "start-failed"


def restart(injector: Injector, node: Node) -> bool:
    """Start a node that is down again; False (recorded) if it does not come up."""
    if node.state == UP:
        return True
    node.start()
    try:
        node.wait_ready()
    except RuntimeError:
        injector.record(START_FAILED, node.index)   # its exit is counted as a crash too
        injector.notice_crashes()
        return False
    injector.record(RESTART, node.index)
    return True


@register
class Kill(FaultKind):
    name = "kill"
    heal_name = RESTART
    loses_data = True             # what the node had not written (no AOF: everything)

    def inject(self, now: float) -> Harm | None:
        node = self.injector.pick_victim()
        if node is None:
            return None
        node.kill()
        self.injector.record(self.name, node.index)
        down_for = self.injector.rng.uniform(*KILL_DOWN_S)
        return Harm(self.name, (node.index,), now + down_for,
                    lambda: restart(self.injector, node), restarts=True)


@register
class Pause(FaultKind):
    name = "pause"
    heal_name = "resume"

    def inject(self, now: float) -> Harm | None:
        node = self.injector.pick_victim()
        if node is None:
            return None
        node.pause()
        self.injector.record(self.name, node.index)
        return Harm(self.name, (node.index,), now + self.injector.rng.uniform(*PAUSE_S),
                    lambda: self._resume(node))

    def _resume(self, node: Node) -> bool:
        if node.state == PAUSED:
            node.resume()
            self.injector.record(self.heal_name, node.index)
        return True


@register
class Rewrite(FaultKind):
    name = "rewrite"
    takes_down = False
    weight = 0.2

    def inject(self, now: float) -> Harm | None:
        running = self.injector.running()
        if not running:
            return None
        node = self.injector.rng.choice(running)
        link = Link(node.host, node.port, REWRITE_TIMEOUT_S)
        try:
            link.call("BGREWRITEAOF")
            self.injector.record(self.name, node.index)
        except LinkError:
            pass     # a rewrite already running, or the node busy: not a fault injected
        finally:
            link.close()
        return None
