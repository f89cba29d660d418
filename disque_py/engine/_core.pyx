# cython: language_level=3, embedsignature=True
#
# disque-py's engine: the job model, one node's job lifecycle, and the hot
# command loop, compiled. One extension module, joined by `include` so the
# parts call each other's cdef functions without an import or a Python
# lookup (and gcc sees one unit to inline across), in three folders:
#
# model/   the job and what holds jobs
#   job.pxi          the job record (C fields, no cyclic-GC tracking)
#   ids.pxi          job IDs: making and checking them
#   siphash.pxi      the tables' keyed hash
#   index.pxi        the tables' hash index: partitions of (hash, item) buckets
#   table.pxi        the job table by ID, partitioned for stateless scans
#   schedule.pxi     the awake schedule: every job's next timer
#   queue.pxi        queues: jobs in delivery order, and each queue's state
#   options.pxi      job options beyond Disque (BACKOFF, MAXDELIVERIES, PRIORITY)
#   dedup_table.pxi  the table of DEDUP keys: slots, index, expiry heap
#   wire.pxi         a job's bytes on the bus and in the AOF
#   extra.pxi        a job's replication or ack-collection record
# node/    one node's jobs and their lifecycle
#   hooks.pxi        NodeHooks: every call the engine makes into the node layer
#   core.pxi         NodeCore: the state and the lifecycle every path shares
#   addjob.pxi       ADDJOB
#   delivery.pxi     GETJOB's take, ENQUEUE, DEQUEUE, NACK, WORKING
#   acks.pxi         ACKJOB, FASTACK, DELJOB, dummy acks
#   dead_letters.pxi dead letters, QREQUEUE, BACKOFF
#   outbox.pxi       messages to peers: into the BusOutbox, or as effects
#   parking.pxi      parked clients: Waiter, Deadlines, Parking
#   copies.pxi       copies between nodes: REPLJOB, GOTJOB, adopting a copy
#   dedup.pxi        ADDJOB ... DEDUP: what a key means, for the node
# aof/     the append-only file's records
#   records.pxi      the record format (version 2): one writer, one reader
#   log.pxi          AofLog: the records of this loop turn, and the batches
#                    replies wait for
#   load.pxi         AofLoader: a file's records replayed into the node, in
#                    slices; the rule that loads a job's record
#   rewrite.pxi      RewriteWalk: the rewrite's records of the live jobs and
#                    the DEDUP keys
# net/     a client's bytes and the hot commands
#   resp.pxi         the request parser and the reply buffer
#   frames.pxi       BusOutbox: job messages to peers, encoded as bus frames
#   hot.pxi          the hot commands: parsed, run and answered in C
#   server.pxi       the server and session state those read, as C fields
#   conn.pxi         a connection's fast path: the hot command loop
#   link.pxi         a cluster bus link's fast path: REPLJOB and GOTJOB in C
#
# Each part's C declarations are in the .pxd beside it (_core.pxd includes
# them all).
#
# Rules it keeps:
#   * model/ and node/ do no I/O: calls in, values and effects out
#     (node.effects); net/ takes the bytes a connection read and writes
#     replies through the transport the server layer gives it, and never
#     opens, reads or closes a socket or touches the event loop itself;
#   * it imports only the layers below it (disque_py.base, .formats), and
#     calls the layers above only through declared hooks: NodeHooks
#     (node/hooks.pxd), ConnectionBase's and ServerCore's cpdef hooks
#     (net/conn.pxd, net/server.pxd);
#   * one implementation of each rule (Python reaches jobs only through
#     these types); nothing here makes a reference cycle through a job.

cimport cython
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE

include "model/job.pxi"
include "model/ids.pxi"
include "model/siphash.pxi"
include "model/index.pxi"
include "model/table.pxi"
include "model/schedule.pxi"
include "model/queue.pxi"
include "model/options.pxi"
include "model/dedup_table.pxi"
include "model/wire.pxi"
include "model/extra.pxi"
include "node/hooks.pxi"
include "node/core.pxi"
include "node/addjob.pxi"
include "node/delivery.pxi"
include "node/acks.pxi"
include "node/dead_letters.pxi"
include "node/outbox.pxi"
include "node/parking.pxi"
include "node/copies.pxi"
include "node/dedup.pxi"
include "aof/records.pxi"
include "aof/log.pxi"
include "aof/load.pxi"
include "aof/rewrite.pxi"
include "net/resp.pxi"
include "net/frames.pxi"
include "net/hot.pxi"
include "net/server.pxi"
include "net/conn.pxi"
include "net/link.pxi"

# Checked against the sources at import (disque_py/engine/__init__.py).
cdef extern from *:
    const char* ENGINE_SOURCE_HASH

SOURCE_HASH = ENGINE_SOURCE_HASH.decode()
