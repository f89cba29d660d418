# The engine's C-level declarations: every cdef class's fields and cdef
# methods, so the parts included by _core.pyx call each other without a
# Python lookup. Bodies live in the .pxi files named beside each block.

cimport cython
from cpython.ref cimport PyObject
from libc.stdint cimport int8_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t


cdef enum:
    JOB_ID_LEN = 40
    NODE_ID_LEN = 40
    # Job states (job.pxi)
    WAIT_REPL = 0
    ACTIVE = 1
    QUEUED = 2
    ACKED = 3
    # Job flags
    FLAG_BCAST_QUEUED = 1
    FLAG_BCAST_WILLQUEUE = 2
    FLAG_DELIVERED = 4
    # ... local ones (never sent to a peer), for the options of options.pxi
    FLAG_COUNTED = 16              # the next re-queue was counted already (a delayed NACK)
    FLAG_BACKED_OFF = 32           # its retry timeout was pushed back once by BACKOFF
    FLAG_PROMISED = 64             # its ID answered a duplicate ADDJOB (dedup.pxi)
    FLAG_CONFIRMED = 128           # this node saw it reach its REPLICATE level
    LOCAL_FLAGS = 4 | 16 | 32 | 64 | 128
    # Job options (options.pxi)
    DEAD_NONE = 0
    DEAD_MAX_DELIVERIES = 1
    DEFAULT_PRIORITY = 5           # ADDJOB ... PRIORITY n, 0 to 9, higher first
    MAX_PRIORITY = 9
    OPTIONS_V1 = 1                 # the options block's versions (options.pxi)
    OPTIONS_V2 = 2                 # ... v1 and the priority
    OPTIONS_V3 = 3                 # ... v2 and the DEDUP key with its window
    OPTIONS_LATEST = 3
    # Job table (table.pxi)
    TABLE_PARTITIONS = 4096
    TABLE_PARTITION_BITS = 12
    # Awake schedule (schedule.pxi)
    BUCKET_MS = 10
    SCHEDULE_CACHE = 64
    # Queues (queue.pxi)
    CHUNK_CAPACITY = 512
    PAUSED_IN = 1
    PAUSED_OUT = 2
    PAUSED_ALL = 3
    # Timers (node.pxi)
    WILLQUEUE_ADVANCE_MS = 500     # WILLQUEUE goes out this long before a re-queue
    TIME_ERROR_MS = 500            # retry desynchronisation between nodes
    DEFAULT_TTL_S = 86400
    DEFAULT_RETRY_MAX_S = 300
    MAX_DEFAULT_REPLICATION = 3
    GC_RETRY_MIN_PERIOD_MS = 1000          # first GC retry after 1 s ...
    GC_RETRY_MAX_PERIOD_MS = 180000        # ... doubling up to 3 minutes
    GC_RETRY_COUNT_MAX = 10
    GC_JITTER_MS = 500
    # Why a job left the live set (node.pxi's hooks for core/waits.py)
    GONE_ACKED = 1
    GONE_DELETED = 2
    GONE_EXPIRED = 3
    GONE_MOVED = 4                 # handed to another node (an at-most-once job)
    # Memory estimates (the maxmemory policy and INFO read them)
    JOB_MEMORY_OVERHEAD = 420      # bytes per job beyond its body
    QUEUE_MEMORY_OVERHEAD = 500    # bytes per queue
    DEDUP_MEMORY_OVERHEAD = 150    # bytes per DEDUP key beyond the key: its 80-byte slot,
                                   # a 16-byte bucket an eighth to half full, a 16-byte
                                   # heap entry


# ------------------------------------------- dedup_table.pxi's records

# A (queue, key) pair naming a job until its window ends: one C block, the
# key inline. Owned by the table's heap until the window ends, and by each
# job whose key it is (refs); in the table's index while `live`.
cdef struct DedupSlot:
    uint64_t hash
    int64_t until_ms
    PyObject* queue                        # owned bytes: the ADDJOB's queue
    uint32_t refs
    uint32_t key_len
    bint live
    char id[40]
    char key[1]                            # key_len bytes (allocated to fit)


# A DEDUP key as a command, a message or a record carries it (pointers into
# the bytes it was read from, or into a slot; key NULL: none); queue NULL:
# the job's own. `hash`: the pair's, once computed (0: not yet). `earlier`:
# what NodeCore.create_job() found, the slot of a job the pair already names.
cdef struct DedupFields:
    const char* key
    Py_ssize_t key_len
    int64_t until_ms
    const char* queue
    Py_ssize_t queue_len
    uint64_t hash
    DedupSlot* earlier


# ------------------------------------------------------------------ job.pxi

cdef class Job:
    # The ID's 40 characters, inline: no bytes object per job.
    cdef char id_[40]
    # Raw, owned references (INCREF'd): a bytes queue name shared by every
    # job of the queue, and a tuple of node-ID bytes. Raw pointers keep the
    # class out of the cyclic GC (neither can lead back to a job).
    cdef PyObject* queue_
    cdef PyObject* delivered_
    # Its JobOptions (options beyond Disque), owned, or NULL: a plain job
    # pays one pointer and no lookup.
    cdef PyObject* options_
    # Its DEDUP key's slot in the key table (dedup_table.pxi), or NULL: the
    # job holds one of the slot's references (it fills the 8 bytes the
    # allocator rounded the record up to: no memory for a plain job).
    cdef DedupSlot* dedup_
    # The body, in a PyMem buffer (NULL: a dummy ack, which has none).
    cdef char* body_
    # The ID's hash once the job table (table.pxi) computed it (0: not yet):
    # a removal finds the job's bucket without hashing the ID again.
    cdef uint64_t table_hash
    # Links owned by the awake schedule (borrowed pointers; it holds its
    # own reference to the job).
    cdef PyObject* awake_prev
    cdef PyObject* awake_next
    cdef PyObject* awake_bucket
    cdef public int64_t ctime
    cdef public int64_t qtime
    cdef public uint32_t etime
    cdef uint32_t body_len
    cdef public uint32_t delay
    cdef public uint32_t retry
    cdef public uint32_t nacks
    cdef public uint32_t deliveries
    cdef public uint16_t repl
    cdef public uint8_t state
    cdef public uint8_t flags
    cdef public uint8_t gc_retry
    # Its priority - DEFAULT_PRIORITY (0 for a plain job, as allocated), the
    # queue order's first key; set only with its options (set_options).
    cdef int8_t prio_delta


# -------------------------------------------------------------- options.pxi

@cython.final
cdef class JobOptions:
    cdef public uint32_t backoff_base_ms   # 0: no BACKOFF
    cdef public uint32_t backoff_max_ms
    cdef public uint32_t max_deliveries    # 0: no limit
    cdef public uint8_t dead_reason        # DEAD_NONE until dead-lettered
    cdef public uint8_t priority           # DEFAULT_PRIORITY unless ADDJOB gave one
    cdef public object deadletter          # bytes, or None: "<queue>:dead"
    cdef public object origin              # a dead job's queue before, or None

    cdef bint dead_letter_due(self, Job job) noexcept
    cdef bytes dead_queue(self, Job job)
    cdef int64_t backoff_ms(self, Job job, int64_t random_permille) noexcept

cdef JobOptions new_job_options(uint32_t backoff_base_ms, uint32_t backoff_max_ms,
                                uint32_t max_deliveries, object deadletter, uint8_t priority)
cdef JobOptions priority_options(uint8_t priority)


# ---------------------------------------------------------------- index.pxi

cdef struct IndexBucket:
    uint64_t hash
    void* item                             # NULL: empty


cdef struct IndexPartition:
    IndexBucket* buckets                   # open addressing, linear probing
    uint32_t mask
    uint32_t count


# ---------------------------------------------------------- dedup_table.pxi

# A heap entry: a window's end, copied from its slot so that ordering the
# heap reads no slot (each would be a cache miss on a large table).
cdef struct DedupDue:
    int64_t until_ms
    DedupSlot* slot


@cython.final
cdef class DedupTable:
    cdef IndexPartition* _parts            # items: DedupSlot*
    cdef Py_ssize_t _len
    cdef DedupDue* _heap                   # a min-heap by until_ms (one reference each)
    cdef Py_ssize_t _heap_len
    cdef Py_ssize_t _heap_cap
    cdef public Py_ssize_t max_keys
    cdef readonly int64_t memory
    cdef public int64_t hits           # ADDJOBs answered with an earlier job's ID
    cdef public int64_t refused        # ... refused: the table was full
    cdef public int64_t dropped        # keys of copies not kept: the table was full

    cdef int64_t unlink(self, DedupSlot* slot) noexcept
    cdef DedupSlot* _find_job(self, object queue, const char* key, Py_ssize_t key_len,
                              uint64_t h, const char* job_id) noexcept
    cdef DedupSlot* _heap_pop(self) noexcept
    cdef void _compact_heap(self) noexcept
    cdef void _release(self) noexcept


cdef Job make_job(const char* job_id, object queue, const char* body, Py_ssize_t body_len,
                  bint has_body, int state, int repl, uint32_t delay, uint32_t retry,
                  int64_t ctime, int64_t etime, tuple delivered)
cdef bint id_is_valid(const char* data, Py_ssize_t size) noexcept
cdef void set_job_queue(Job job, bytes name) noexcept


# ------------------------------------------------------------------ ids.pxi

cdef class IdGenerator:
    cdef bytes _prefix
    cdef bytes _seed
    cdef uint64_t _counter
    cdef bytes _spare          # IDS_PER_REFILL random parts, 24 characters each
    cdef Py_ssize_t _left      # parts not handed out yet, taken from the end
    cdef int64_t _suffix_key   # the TTL suffix cached for (ttl, at-least-once)
    cdef char _suffix[5]

    cdef void fill(self, char* out, int64_t ttl_s, int64_t retry_s) except *
    cdef void _refill(self) except *


# ---------------------------------------------------------------- table.pxi

cdef class JobTable:
    cdef IndexPartition* _parts            # items: Job (one reference each)
    cdef Py_ssize_t _len
    cdef Py_ssize_t _released      # partitions freed so far by release_some()
    cdef readonly Py_ssize_t acked # jobs in the acked state (NodeCore.acknowledge counts too)

    cdef Job find(self, const char* job_id)
    cdef bint insert(self, Job job) except -1
    cdef bint remove(self, Job job) except -1


# ------------------------------------------------------------- schedule.pxi

cdef class Bucket:
    cdef int64_t due
    cdef PyObject* first
    cdef PyObject* last
    cdef Py_ssize_t count


cdef class AwakeSchedule:
    cdef dict _buckets             # slot (ms) -> Bucket
    cdef list _heap                # slots, a heapq
    cdef PyObject* _cache[64]      # SCHEDULE_CACHE buckets by slot, borrowed from _buckets
    cdef Py_ssize_t _len

    cpdef schedule(self, Job job, int64_t at_ms)
    cpdef unschedule(self, Job job)
    cdef Bucket _bucket_for(self, int64_t slot)
    cdef void _drop_bucket(self, int64_t slot) except *
    cdef void _drop_all(self) noexcept


# ---------------------------------------------------------------- queue.pxi

cdef struct Chunk:
    Py_ssize_t head
    Py_ssize_t tail
    PyObject* items[512]          # CHUNK_CAPACITY


cdef class JobQueue:
    cdef Chunk** chunks
    cdef Py_ssize_t nchunks
    cdef Py_ssize_t capacity
    cdef readonly Py_ssize_t count

    cdef int add(self, Job job) except -1
    cdef Job pop_first(self)
    cdef bint discard(self, Job job) except -1
    cdef Chunk* _append_chunk(self) except NULL
    cdef void _drop_chunk(self, Py_ssize_t index) noexcept
    cdef Py_ssize_t _chunk_for(self, Job job) noexcept
    cdef PyObject** _position(self, Chunk* chunk, Job job) noexcept
    cdef PyObject** _find(self, Job job, Py_ssize_t* chunk_index) noexcept
    cdef int _insert(self, Job job) except -1
    cdef int _split(self, Py_ssize_t index) except -1
    cdef void _release(self) noexcept


cdef class Queue:
    cdef readonly bytes name
    cdef readonly JobQueue jobs
    cdef public int64_t ctime
    cdef public int64_t atime
    cdef public int flags
    cdef public object waiters             # dict (waiter -> None, FIFO) or None
    cdef public int64_t jobs_in
    cdef public int64_t jobs_out
    cdef public object responders          # node id -> last import (s), or None
    cdef public object interested          # node id -> (until ms, count), or None
    cdef public int64_t needjobs_bcast_time
    cdef public int64_t needjobs_bcast_attempt
    cdef public int64_t needjobs_adhoc_time
    cdef public int64_t needjobs_adhoc_attempt
    cdef public int64_t import_current_time
    cdef public int64_t import_current_count
    cdef public int64_t import_prev_time
    cdef public int64_t import_prev_count
    cdef public bint live                  # False once the node forgot the queue


# ----------------------------------------------------------------- node.pxi

cdef class NodeCore:
    cdef public bytes id
    cdef public tuple _only_me
    cdef public object clock
    cdef public list effects
    cdef public JobTable jobs
    cdef public object queues              # ScanTable of Queue, by name
    cdef public AwakeSchedule schedule
    cdef public IdGenerator ids
    cdef public dict extras                # Job -> JobExtra (replication, ack GC)
    cdef public dict ready                 # queues that got jobs while clients wait
    cdef public dict replicating           # jobs whose producer awaits copies
    cdef public dict waiting_queues        # queues with parked consumers
    cdef public object pattern_waiters     # parked GETJOB PATTERNs (core/patterns.py), or None
    cdef public uint64_t queues_version    # grows when a queue is made or forgotten
    cdef public int64_t used_memory
    cdef int64_t _maxmemory
    cdef public int64_t memory_warn_at
    cdef public int64_t memory_evict_at
    cdef public bint evict_jobs
    cdef public bint leaving
    cdef public bint aof_enabled
    cdef public bint has_peers
    cdef public int cluster_size
    cdef public int reachable_peers
    cdef public int blocked_clients
    cdef public int64_t stats_jobs_created
    cdef public int64_t stats_dead_lettered
    # Job events, read by /metrics at scrape time (one C increment each):
    cdef public int64_t stats_delivered    # jobs taken from a queue here for a consumer
    cdef public int64_t stats_acked        # jobs ACKJOB or FASTACK acknowledged here
    cdef public int64_t stats_nacked       # NACKs applied here (queued again now or later)
    cdef public int64_t stats_requeued     # jobs queued again here, not by a NACK (RETRY)
    cdef public int64_t stats_expired      # jobs whose TTL ended here
    cdef public int64_t _last_ctime
    cdef bint _real_clock
    cdef uint64_t _rng_state
    cdef public dict node_ids              # every known node ID -> the one shared object
    cdef public double repl_rtt_ms         # recent REPLJOB -> GOTJOB round trip
    cdef public dict repl_rtt_by_peer      # ... the same, of each peer's GOTJOBs (/metrics)
    cdef bytes _holders_seen               # copies.pxi's last holder list, as wire bytes ...
    cdef object _holders_seen_in           # ... resolved against this node_ids ...
    cdef tuple _holders_known              # ... to these IDs
    cdef public dict options_readers       # peer -> the older options block it reads
    cdef public DedupTable dedup           # ADDJOB ... DEDUP keys (dedup.pxi)
    cdef public dict job_waits             # WAITJOB: job ID -> its waiters (core/waits.py)
    cdef public dict queue_waits           # QWAIT: queue name -> its wait (core/waits.py)

    cdef int64_t now_ms(self) except? -1
    cdef int64_t jitter(self, int64_t spread_ms) noexcept
    cpdef Queue queue(self, bytes name)
    cpdef int64_t next_ctime(self, int64_t now_ms)
    cpdef bint register(self, Job job) except -1
    cpdef bint unregister(self, Job job, int reason=*) except -1
    cpdef update_awake(self, Job job, int64_t gc_at=*)
    cpdef persist_job(self, Job job)
    cpdef set_requeue_time(self, Job job, int64_t qtime)
    cpdef int64_t retry_time(self, Job job, int64_t now_ms)
    cpdef bint enqueue(self, Job job, bint nack=*, int64_t now=*, Queue q=*) except -1
    cpdef bint dequeue(self, Job job) except -1
    cpdef Job fetch(self, Queue q, bint delivery=*)
    cpdef set_paused(self, Queue q, int flags)
    cdef Job create_job(self, bytes queue, Queue q, const char* body, Py_ssize_t body_len,
                        int64_t repl, int64_t delay, int64_t retry, int64_t ttl,
                        int64_t maxlen, bint async_, object client, int64_t timeout_ms,
                        JobOptions options, int64_t now, DedupFields* dedup)
    cdef _refuse_replication(self, int64_t extra_copies, bint external)
    cdef list take_jobs(self, list names, list queues, Py_ssize_t count)
    cdef Job take_one(self, Queue q)
    cpdef acknowledge(self, Job job)
    cpdef int64_t _next_gc_time(self, int64_t attempts)
    cpdef JobOptions options_of(self, Job job)
    cdef int readable_by(self, object peer)
    cdef int _dead_letter(self, Job job, JobOptions options) except -1
    cdef int _delay_requeue(self, Job job, int64_t delay_ms) except -1
    cdef int _nack_one(self, const char* job_id, int64_t delay_ms) except -1
    cdef int64_t _nack_views(self, ArgView* ids, Py_ssize_t count, int64_t delay_ms) except -1
    cdef int64_t _enqueue_views(self, ArgView* ids, Py_ssize_t count, bint nack) except -1
    cdef int64_t _dequeue_views(self, ArgView* ids, Py_ssize_t count) except -1
    cdef int _enqueue_one(self, const char* job_id, bint nack) except -1
    cdef int _dequeue_one(self, const char* job_id) except -1
    cdef int64_t _ack_views(self, ArgView* ids, Py_ssize_t count) except -1
    cdef int _ack_one(self, const char* job_id) except -1
    cdef int64_t _fast_ack_views(self, ArgView* ids, Py_ssize_t count) except -1
    cdef int _fast_ack_one(self, const char* job_id) except -1



# ----------------------------------------------------------------- resp.pxi

cdef struct ArgSpan:
    Py_ssize_t offset             # from the command's first byte
    Py_ssize_t size


cdef struct ArgView:
    const char* data
    Py_ssize_t size


cdef class RequestParser:
    cdef char* buf
    cdef Py_ssize_t size               # bytes in buf
    cdef Py_ssize_t capacity
    cdef Py_ssize_t start              # the next unconsumed command
    cdef Py_ssize_t pos                # where parsing continues
    cdef Py_ssize_t cmd_start          # the command being read
    cdef Py_ssize_t args_left          # arguments of it still expected
    cdef int64_t bulk_len              # length of the argument being read, or -1
    cdef ArgSpan* args
    cdef Py_ssize_t args_capacity
    cdef readonly Py_ssize_t argc
    cdef bint ready                    # a complete command waits for consume()
    cdef object inline_argv            # the ready command, when it was inline
    cdef readonly object error         # ProtocolError, once the stream is malformed

    cdef int append(self, const char* data, Py_ssize_t length) except -1
    cdef int next_command(self) except? -2
    cdef void consume(self) noexcept
    cdef int _fail(self, str detail) except -1
    cdef int _parse_inline(self) except? -2
    cdef inline bint _short_header(self, int64_t* value, char expected) noexcept
    cdef int _header(self, int64_t* value, bint* valid, char expected,
                     const char* too_big) except? -2
    cdef int _parse_multibulk(self) except? -2
    cdef int _reserve(self, Py_ssize_t count) except -1
    cdef const char* arg(self, Py_ssize_t index) noexcept
    cdef Py_ssize_t arg_size(self, Py_ssize_t index) noexcept
    cdef list argv(self)
    cdef list take_all(self)


cdef class WriteBuffer:
    cdef char* data
    cdef readonly Py_ssize_t size
    cdef Py_ssize_t capacity

    cdef int _grow(self, Py_ssize_t extra) except -1
    cdef int write(self, const char* data, Py_ssize_t length) except -1
    cdef int write_bytes(self, bytes data) except -1
    cdef int write_number(self, char kind, int64_t value) except -1
    cdef int write_bulk(self, const char* data, Py_ssize_t length) except -1
    cdef bytes take(self)


# ------------------------------------------------------------------ hot.pxi

cdef enum HotKind:
    HOT_NONE = 0
    HOT_PING = 1
    HOT_ADDJOB = 2
    HOT_GETJOB = 3
    HOT_ACKJOB = 4
    HOT_FASTACK = 5
    HOT_NACK = 6
    HOT_ENQUEUE = 7
    HOT_DEQUEUE = 8
    HOT_WORKING = 9
    HOT_QLEN = 10

cdef enum HotStatus:
    HOT_DONE = 0           # the reply is in the buffer
    HOT_PARKED = 1         # the client waits on `waiter`


cdef class HotCall:
    cdef NodeCore node
    cdef object session
    cdef WriteBuffer out
    cdef bint resp3
    cdef object waiter
    cdef bint overlaps
    cdef Queue recent_queue
    cdef Queue found               # the queue queue_name() found, or None
    cdef ArgView* views
    cdef Py_ssize_t views_capacity

    cdef int _reserve(self, Py_ssize_t count) except -1
    cdef bytes arg_bytes(self, ArgView arg)
    cdef Queue known_queue(self, ArgView name)
    cdef bytes queue_name(self, ArgView name)
    cdef int run(self, int kind, ArgView* argv, Py_ssize_t argc) except -1


# --------------------------------------------------------------- server.pxi

cdef enum:
    MAX_HOT_NAMES = 16


cdef struct HotName:
    const char* name
    Py_ssize_t size
    PyObject* command             # borrowed: _hot_names keeps it


cdef class StatsCore:
    cdef public int64_t connections_received
    cdef public int64_t commands_processed
    cdef public int64_t net_input_bytes
    cdef public int64_t net_output_bytes
    cdef public int64_t rejected_connections


cdef class SessionCore:
    cdef public bint authenticated
    cdef public bint resp3
    cdef public bint kill_requested
    cdef public int reply_flags
    cdef public double last_interaction
    cdef public object last_command


cdef class CommandCore:
    cdef public int arity
    cdef public int hot                # HotKind, or HOT_NONE
    cdef public bint needs_disk
    cdef public int64_t calls
    cdef public double seconds


cdef class ConnectionBase             # conn.pxi, below


cdef class ServerCore:
    cdef public NodeCore node
    cdef public StatsCore stats
    cdef public object persistence
    cdef public list monitors
    cdef public list kills
    cdef public object shutdown_request
    cdef public double paused_until
    cdef public double slow_after
    cdef public bytes _requirepass
    cdef public object timing_clock       # None: CLOCK_MONOTONIC, read in C
    cdef public object call_soon          # the event loop's call_soon (the runtime sets it)
    cdef list _unflushed                  # connections with replies of this loop turn
    cdef bint _flush_scheduled
    cdef bint _batching                   # the last flush wrote to several connections
    cdef void* _last_writer               # the connection written to last (identity only)
    cdef list _hot_names
    cdef HotName _hot[16]         # MAX_HOT_NAMES
    cdef Py_ssize_t _hot_count

    cdef CommandCore hot_command(self, const char* name, Py_ssize_t size)
    cdef bint disk_accepts(self) except -1
    cdef double now(self) except? -1
    cdef int want_flush(self, ConnectionBase conn) except -1


# ----------------------------------------------------------------- conn.pxi

cdef class ConnectionBase:
    cdef public ServerCore server
    cdef public SessionCore session
    cdef public object runtime
    cdef object _transport
    cdef object _transport_write           # its bound write method
    cdef public RequestParser reader
    cdef public object pending             # deque of commands waiting, or None
    cdef public object pending_error
    cdef public object _order              # replies behind a parked command, or None
    cdef public object _held               # replies waiting for an AOF fsync, or None
    cdef public bint closing
    cdef public bint draining              # closing once the replies held for the AOF left
    cdef public bint _running
    cdef HotCall call
    cdef list _out                         # replies not written yet (this turn), or None

    cdef int _run_fast(self, double started) except -1
    cdef int _finish_fast(self, bint pipelined) except -1
    cpdef write_out(self, bytes payload, bint pipelined=*)
    cpdef flush_out(self)
