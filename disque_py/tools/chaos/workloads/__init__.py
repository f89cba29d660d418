"""The chaos run's workloads (`--workload NAME`): the load, and the promises of its own.

  base.py           what a workload is (Workload, Setup, CheckContext, Findings), the registry
  clients.py        the client threads they share: producers, consumers
  plain.py          plain (the default) and backlog
  dedup.py          ADDJOB ... DEDUP: one job ID per key where a node knows the key
  maxdeliveries.py  MAXDELIVERIES: dead letters never early, on one node, never lost
  waitjob.py        WAITJOB settles only jobs that were acknowledged
  qrequeue.py       QREQUEUE: dead letters sent back to work lose nothing

Importing this package registers every workload.
"""

from disque_py.tools.chaos.workloads.base import (DEFAULT_WORKLOAD, WORKLOADS, CheckContext,
                                                  Findings, Setup, Workload)
from disque_py.tools.chaos.workloads.dedup import Dedup
from disque_py.tools.chaos.workloads.maxdeliveries import MaxDeliveries
from disque_py.tools.chaos.workloads.plain import Backlog, Plain
from disque_py.tools.chaos.workloads.qrequeue import QRequeue
from disque_py.tools.chaos.workloads.waitjob import Waitjob

__all__ = ["DEFAULT_WORKLOAD", "WORKLOADS", "Backlog", "CheckContext", "Dedup", "Findings",
           "MaxDeliveries", "Plain", "QRequeue", "Setup", "Waitjob", "Workload"]
