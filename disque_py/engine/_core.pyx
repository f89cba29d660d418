# cython: language_level=3, embedsignature=True
#
# disque-py's engine: the job model and (as it grows) the hot command loop,
# compiled. One extension module, joined by `include` so the parts call
# each other's cdef functions without an import or a Python lookup:
#
#   job.pxi       the job record (C fields, no cyclic-GC tracking)
#   ids.pxi       job IDs: making and checking them
#   siphash.pxi   the tables' keyed hash
#   index.pxi     the tables' hash index: partitions of (hash, item) buckets
#   table.pxi     the job table by ID, partitioned for stateless scans
#   schedule.pxi  the awake schedule: every job's next timer
#   queue.pxi     queues: jobs in delivery order, and each queue's state
#   node.pxi      NodeCore: the node's jobs and the job lifecycle
#   options.pxi   job options beyond Disque (BACKOFF, MAXDELIVERIES, PRIORITY)
#   dedup_table.pxi  the table of DEDUP keys: slots, index, expiry heap
#   dedup.pxi     ADDJOB ... DEDUP: what a key means, for the node
#   wire.pxi      a job's bytes on the bus and in the AOF
#   copies.pxi    copies between nodes: REPLJOB, GOTJOB, adopting a copy
#   resp.pxi      the request parser and the reply buffer
#   hot.pxi       the hot commands: parsed, run and answered in C
#   server.pxi    the server and session state those read, as C fields
#   conn.pxi      a connection's fast path: the hot command loop
#
# Rules it keeps: no I/O (no sockets, files or event loop: calls in, values
# out); one implementation of each rule (Python reaches jobs only through
# these types); nothing here makes a reference cycle.

cimport cython
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE

include "job.pxi"
include "ids.pxi"
include "siphash.pxi"
include "index.pxi"
include "table.pxi"
include "schedule.pxi"
include "queue.pxi"
include "node.pxi"
include "options.pxi"
include "dedup_table.pxi"
include "dedup.pxi"
include "wire.pxi"
include "copies.pxi"
include "resp.pxi"
include "hot.pxi"
include "server.pxi"
include "conn.pxi"

# The C constants, for Python (core/job.py names them; they are defined
# once, in _core.pxd).
CONSTANTS = {
    "WAIT_REPL": WAIT_REPL, "ACTIVE": ACTIVE, "QUEUED": QUEUED, "ACKED": ACKED,
    "FLAG_BCAST_QUEUED": FLAG_BCAST_QUEUED, "FLAG_BCAST_WILLQUEUE": FLAG_BCAST_WILLQUEUE,
    "FLAG_DELIVERED": FLAG_DELIVERED, "JOB_ID_LEN": JOB_ID_LEN, "NODE_ID_LEN": NODE_ID_LEN,
    "BUCKET_MS": BUCKET_MS, "TABLE_PARTITIONS": TABLE_PARTITIONS,
    "PAUSED_IN": PAUSED_IN, "PAUSED_OUT": PAUSED_OUT, "PAUSED_ALL": PAUSED_ALL,
    "WILLQUEUE_ADVANCE_MS": WILLQUEUE_ADVANCE_MS, "TIME_ERROR_MS": TIME_ERROR_MS,
    "DEFAULT_TTL_S": DEFAULT_TTL_S, "DEFAULT_RETRY_MAX_S": DEFAULT_RETRY_MAX_S,
    "GC_RETRY_MIN_PERIOD_MS": GC_RETRY_MIN_PERIOD_MS,
    "GC_RETRY_MAX_PERIOD_MS": GC_RETRY_MAX_PERIOD_MS,
    "GC_RETRY_COUNT_MAX": GC_RETRY_COUNT_MAX, "GC_JITTER_MS": GC_JITTER_MS,
    "JOB_MEMORY_OVERHEAD": JOB_MEMORY_OVERHEAD, "QUEUE_MEMORY_OVERHEAD": QUEUE_MEMORY_OVERHEAD,
    "DEDUP_MEMORY_OVERHEAD": DEDUP_MEMORY_OVERHEAD,
    "INLINE_MAX_SIZE": INLINE_MAX_SIZE, "MULTIBULK_MAX_COUNT": MULTIBULK_MAX_COUNT,
    "BULK_MAX_LENGTH": BULK_MAX_LENGTH,
    "GONE_ACKED": GONE_ACKED, "GONE_DELETED": GONE_DELETED, "GONE_EXPIRED": GONE_EXPIRED,
    "GONE_MOVED": GONE_MOVED,
    "FLAG_COUNTED": FLAG_COUNTED, "FLAG_BACKED_OFF": FLAG_BACKED_OFF,
    "FLAG_PROMISED": FLAG_PROMISED, "FLAG_CONFIRMED": FLAG_CONFIRMED,
    "DEAD_NONE": DEAD_NONE, "DEAD_MAX_DELIVERIES": DEAD_MAX_DELIVERIES,
}

# Checked against the sources at import (disque_py/engine/__init__.py).
cdef extern from *:
    const char* ENGINE_SOURCE_HASH

SOURCE_HASH = ENGINE_SOURCE_HASH.decode()
