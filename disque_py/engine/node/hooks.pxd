# What the engine asks of the node layer above it (hooks.pxi): one slot per
# reaction, each a callable the node layer wires in (node/node.py).

@cython.final
cdef class NodeHooks:
    # Replication (node/replication.py)
    cdef public object wait_for_copies       # (job, client, deadline_ms, extra_copies, external, now)
    cdef public object replication_achieved  # (job) -> bool: False if it left this node
    cdef public object abandon_replication   # (job, outcome, keep_promised=False)
    cdef public object follow_replication    # (job, client, deadline_ms) -> Waiter
    cdef public object confirm_copies        # (job, client, deadline_ms, copies) -> Waiter
    cdef public object promise_progress      # (job, extra)
    # Ack collection (node/acks.py)
    cdef public object try_gc                # (job)
    # Parked consumers (node/consumers.py, node/patterns.py)
    cdef public object serve_ready           # ()
    cdef public object block                 # (client, names, deadline_ms, withcounters) -> Waiter
    cdef public object block_pattern         # (client, pattern, deadline_ms, withcounters) -> Waiter
    cdef public object pattern_queues        # (pattern) -> [queue name]
    cdef public object pattern_served        # (pattern, queue name)
    # Federation (node/federation.py)
    cdef public object need_jobs             # (queue, reached_zero)
    # WAITJOB and QWAIT (node/waits.py)
    cdef public object job_live              # (job)
    cdef public object job_done              # (job, reason)
    cdef public object job_moved             # (job, old_queue)
    # The memory policy (node/memory.py)
    cdef public object free_memory           # () -> bool: back under the eviction mark
