# What the engine asks of the node layer above it (hooks.pxi): one slot per
# reaction, each a callable the node layer wires in (node/node.py).

@cython.final
cdef class NodeHooks:
    # Replication (node/replication.py)
    cdef readonly object wait_for_copies       # (job, client, deadline_ms, extra_copies, external, now);
                                             # leaves the producer's Waiter in JobExtra.waiter
    cdef readonly object abandon_replication   # (job, outcome, keep_promised=False)
    cdef readonly object follow_replication    # (job, client, deadline_ms) -> Waiter
    cdef readonly object confirm_copies        # (job, client, deadline_ms, copies) -> Waiter
    cdef readonly object promise_progress      # (job, extra)
    cdef readonly object end_promise_round     # (job, extra)
    # Parked consumers (node/consumers.py)
    cdef readonly object serve_ready           # ()
    cdef readonly object block                 # (client, names, deadline_ms, withcounters) -> Waiter
    cdef readonly object block_pattern         # (client, pattern, deadline_ms, withcounters) -> Waiter
    cdef readonly object pattern_queues        # (pattern) -> [queue name]
    cdef readonly object pattern_served        # (pattern, queue name)
    # Federation (node/federation.py)
    cdef readonly object need_jobs             # (queue, reached_zero)
    # WAITJOB and QWAIT (node/waits.py)
    cdef readonly object job_live              # (job)
    cdef readonly object job_done              # (job, reason)
    cdef readonly object job_moved             # (job, old_queue)
    # The memory policy (node/memory.py)
    cdef readonly object free_memory           # () -> bool: back under the eviction mark
