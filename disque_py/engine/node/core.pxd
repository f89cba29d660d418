# NodeCore (core.pxi and the parts beside it): one node's jobs and the job
# lifecycle; the hooks it calls on the node layer are declared in hooks.pxd.

cpdef enum:
    # Timers
    WILLQUEUE_ADVANCE_MS = 500     # WILLQUEUE goes out this long before a re-queue
    TIME_ERROR_MS = 500            # retry desynchronisation between nodes
    DEFAULT_TTL_S = 86400
    DEFAULT_RETRY_MAX_S = 300
    MAX_DEFAULT_REPLICATION = 3
    GC_RETRY_MIN_PERIOD_MS = 1000          # first GC retry after 1 s ...
    GC_RETRY_MAX_PERIOD_MS = 180000        # ... doubling up to 3 minutes
    GC_RETRY_COUNT_MAX = 10
    GC_JITTER_MS = 500
    # Why a job left the live set (NodeHooks.job_done's reason)
    GONE_ACKED = 1
    GONE_DELETED = 2
    GONE_EXPIRED = 3
    GONE_MOVED = 4                 # handed to another node (an at-most-once job)
    # Memory estimates (the maxmemory policy and INFO read them)
    JOB_MEMORY_OVERHEAD = 420      # bytes per job beyond its body
    QUEUE_MEMORY_OVERHEAD = 500    # bytes per queue


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
    cdef public uint64_t queues_version    # grows when a queue is made or forgotten
    cdef public int64_t used_memory
    cdef int64_t _maxmemory
    cdef public int64_t memory_warn_at
    cdef public int64_t memory_evict_at
    cdef public bint evict_jobs
    cdef public bint leaving
    cdef public bint aof_enabled           # records are noted in `aof`
    cdef public AofLog aof
    cdef public bint has_peers
    cdef public int cluster_size
    cdef public int reachable_peers        # peers not flagged failing (REPLICATE's bound)
    cdef public object known_peers         # every other node past handshake: a set of IDs
    cdef public list reachable             # the peers linked now (where copies go)
    cdef public object rng                 # random.Random: the clock's (seeded in tests)
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
    cdef public object parking             # the node layer's Parking (parking.pxi)
    cdef public dict replicating           # jobs whose producer awaits copies (node/replication.py)
    cdef public dict confirming            # jobs in a promise round (node/replication.py)
    cdef public dict heal_marks            # healing's jobs with holders to heal and ...
    cdef public dict heal_watch            # ... jobs it watches: while any, REPLJOBs go to it
    cdef public BusOutbox bus_out          # frames to peers (net/frames.pxi); None: ToPeer effects
    cdef public DedupTable dedup           # ADDJOB ... DEDUP keys (dedup.pxi)
    # The node layer: its hooks (hooks.pxi), and the switches that say when
    # a path must call them (kept by the node layer, read in C).
    cdef public NodeHooks hooks
    cdef public bint watch_jobs            # a WAITJOB is parked: job_done matters
    cdef public bint watch_queues          # a QWAIT is parked: job_live/done/moved matter
    cdef public bint pattern_waiting       # a GETJOB PATTERN is parked: every enqueue is news
    cdef public dict abandoned             # IDs of jobs whose ADDJOB failed -> until when a
                                           # REPLJOB makes no copy of them (copies.pxi)

    cdef int64_t now_ms(self) except? -1
    cdef int64_t jitter(self, int64_t spread_ms) noexcept
    cpdef Queue queue(self, bytes name)
    cdef bytes queue_name(self, bytes name)
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
    cpdef acknowledge(self, Job job)
    cpdef mark_dead(self, Job job)
    cpdef int64_t _next_gc_time(self, int64_t attempts)
    cpdef JobOptions options_of(self, Job job)
    cdef int readable_by(self, object peer)


cdef JobExtra node_extra(NodeCore node, Job job)
