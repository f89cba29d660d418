"""The chaos run's faults: the kinds (`--faults` names them) and the injector.

  base.py      what a kind of fault is (FaultKind, Harm, Event) and the registry
  process.py   kill, pause, rewrite: the node's process
  network.py   partition, netem: the packets between nodes (in namespaces)
  shapes.py    the shapes of a partition
  injector.py  draws faults from the run's kinds, undoes them, keeps the record

Importing this package registers every kind.
"""

from disque_py.tools.chaos.faults.base import KINDS, Event
from disque_py.tools.chaos.faults.injector import FaultInjector, FaultPlan
from disque_py.tools.chaos.faults.network import Netem, Partition
from disque_py.tools.chaos.faults.process import Kill, Pause, Rewrite

DEFAULT_KINDS = (Kill.name, Pause.name)

__all__ = ["DEFAULT_KINDS", "KINDS", "Event", "FaultInjector", "FaultPlan",
           "Kill", "Netem", "Partition", "Pause", "Rewrite"]
