# cython: language_level=3, embedsignature=True
#
# disque-py's engine: the job model and (as it grows) the hot command loop,
# compiled. One extension module, joined by `include` so the parts call
# each other's cdef functions without an import or a Python lookup:
#
#   job.pxi       the job record (C fields, no cyclic-GC tracking)
#   ids.pxi       job IDs: making and checking them
#   table.pxi     the job table by ID, partitioned for stateless scans
#   schedule.pxi  the awake schedule: every job's next timer
#
# Rules it keeps: no I/O (no sockets, files or event loop: calls in, values
# out); one implementation of each rule (Python reaches jobs only through
# these types); nothing here makes a reference cycle.

cimport cython
from cpython.tuple cimport PyTuple_GET_SIZE

include "job.pxi"
include "ids.pxi"
include "table.pxi"
include "schedule.pxi"

# The C constants, for Python (core/job.py names them; they are defined
# once, in _core.pxd).
CONSTANTS = {
    "WAIT_REPL": WAIT_REPL, "ACTIVE": ACTIVE, "QUEUED": QUEUED, "ACKED": ACKED,
    "FLAG_BCAST_QUEUED": FLAG_BCAST_QUEUED, "FLAG_BCAST_WILLQUEUE": FLAG_BCAST_WILLQUEUE,
    "FLAG_DELIVERED": FLAG_DELIVERED, "JOB_ID_LEN": JOB_ID_LEN, "NODE_ID_LEN": NODE_ID_LEN,
    "BUCKET_MS": BUCKET_MS, "TABLE_PARTITIONS": TABLE_PARTITIONS,
}

# Checked against the sources at import (disque_py/engine/__init__.py).
cdef extern from *:
    const char* ENGINE_SOURCE_HASH

SOURCE_HASH = ENGINE_SOURCE_HASH.decode()
