"""The chaos run's faults: the kinds (`--faults` names them) and the injector.

  base.py      what a kind of fault is (FaultKind, Harm, Event) and the registry
  process.py   kill, pause, rewrite: the node's process
  clock.py     clock: the node's wall clock jumps or drifts (libfaketime)
  disk.py      powerloss, corrupt: what the node's disk keeps (damage.py
               plans it, runbook.py repairs what a node refuses to load)
  membership.py  membership: a spare joins, a member leaves or is forgotten
  network.py   partition, netem: the packets between nodes (in namespaces)
  shapes.py    the shapes of a partition
  injector.py  draws faults from the run's kinds, undoes them, keeps the record

Importing this package registers every kind.
"""

from disque_py.tools.chaos.faults.base import KINDS, Event
from disque_py.tools.chaos.faults.injector import FaultInjector, FaultPlan
from disque_py.tools.chaos.faults.clock import Clock
from disque_py.tools.chaos.faults.disk import Corrupt, PowerLoss
from disque_py.tools.chaos.faults.membership import Membership
from disque_py.tools.chaos.faults.network import Netem, Partition
from disque_py.tools.chaos.faults.process import Kill, Pause, Rewrite

DEFAULT_KINDS = (Kill.name, Pause.name)

__all__ = ["DEFAULT_KINDS", "KINDS", "Clock", "Corrupt", "Event", "FaultInjector", "FaultPlan",
           "Kill", "Membership", "Netem", "Partition", "Pause", "PowerLoss", "Rewrite"]
