# The engine's C-level declarations, one .pxd beside each part (the
# uvloop habit: loop.pxd includes handles/*.pxd), included in the order
# the declarations need: what a part names must come before it.

cimport cython
from cpython.ref cimport PyObject
from libc.stdint cimport int8_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t

# model/: the job record and the structures that hold jobs
include "model/index.pxd"
include "model/dedup_table.pxd"
include "model/job.pxd"
include "model/options.pxd"
include "model/ids.pxd"
include "model/table.pxd"
include "model/schedule.pxd"
include "model/queue.pxd"
include "model/wire.pxd"
include "model/extra.pxd"
# net/ (first part): the argument views the node's paths take
include "net/resp.pxd"
include "net/frames.pxd"
# node/: one node's jobs, their lifecycle, and the hooks into the node layer
# aof/: the AOF's records and the records of this loop turn
include "aof/records.pxd"
include "aof/log.pxd"
include "node/hooks.pxd"
include "node/core.pxd"
include "node/parking.pxd"
include "node/addjob.pxd"
include "node/delivery.pxd"
include "node/acks.pxd"
include "node/dead_letters.pxd"
include "node/outbox.pxd"
include "node/copies.pxd"
include "node/dedup.pxd"
# aof/ (second part): loading and rewriting, which reach into the node
include "aof/load.pxd"
include "aof/rewrite.pxd"
# net/: the hot commands and a client connection's fast path
include "net/hot.pxd"
include "net/server.pxd"
include "net/conn.pxd"
include "net/link.pxd"
