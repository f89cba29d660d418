# The engine's calls into the node layer, declared: NodeHooks.
#
# NodeCore decides everything about one job on one node; what reaches
# beyond it (other nodes, parked clients, the memory policy) is the node
# layer's, in Python (disque_py/node/). The engine calls that layer only
# through the slots of its NodeHooks (hooks.pxd), never by looking a name
# up on itself: what it may call is written in one place, the node layer
# wires every slot when it builds a node (a missing or unknown one is a
# TypeError there, not a failure on a rare path later), and the engine is
# built and tested alone with NodeHooks.unwired(). The slots are read-only
# once built: a node's hooks are replaced whole, never one by one.
#
# When each slot is called, and what it must do:
#   wait_for_copies       ADDJOB must wait for copies: park the producer on
#                         the job (in wait-repl) and ask the peers; the
#                         producer's Waiter goes in the job's extra record
#                         (JobExtra.waiter, an engine field), where the
#                         connection's fast path and NodeCore.add_job's
#                         callers find it
#   abandon_replication   a waiting job is removed (expired, deleted): give
#                         up, answer the producer with `outcome`
#   follow_replication    a duplicate ADDJOB (DEDUP) of a job still waiting
#                         for its copies: park it until the first's outcome
#   confirm_copies        a duplicate ADDJOB of a copy whose first ADDJOB's
#                         fate is unknown here: park it until `copies`
#                         holders confirm
#   promise_progress      a holder confirmed its copy in a promise round
#   end_promise_round     a job in a promise round was acked: the
#                         duplicate ADDJOBs waiting get its ID, the round ends
#   serve_ready           queues in NodeCore.ready got jobs while clients
#                         (or peers) wait: serve them
#   block, block_pattern  GETJOB found nothing and may wait: park the
#                         client on the queues (or the pattern)
#   pattern_queues        GETJOB PATTERN: the matching queues, the next in
#                         its rotation first
#   pattern_served        ... and the queue that served it last
#   need_jobs             a queue a client reads is empty (or just ran
#                         dry): ask the peers for jobs (has_peers only)
#   job_live              a job not acknowledged was registered (only while
#                         watch_queues)
#   job_done              a job not acknowledged left the live set, with a
#                         GONE_* reason (only while watch_jobs or
#                         watch_queues)
#   job_moved             a live job changed queue (only while watch_queues)
#   free_memory           memory is above maxmemory: evict what can go;
#                         True if back under the eviction mark


class HookNotWired(RuntimeError):
    """An engine path reached a hook its node was built without."""


cdef class _Unwired:
    """A slot of NodeHooks.unwired(): calling it says which hook is missing."""

    cdef str name

    def __cinit__(self, str name):
        self.name = name

    def __call__(self, *args, **kwargs):
        raise HookNotWired("the node layer's %s hook is not wired: a node built with "
                           "NodeHooks.unwired() serves one node's non-blocking commands"
                           % self.name)


def _nothing_to_free():
    """A node without a memory policy evicts nothing."""
    return False


@cython.final
cdef class NodeHooks:
    """The node layer's reactions the engine calls (see hooks.pxi). Every
    slot is given when the hooks are built: a missing or unknown one is a
    TypeError."""

    def __init__(self, *, wait_for_copies, abandon_replication,
                 follow_replication, confirm_copies, promise_progress, end_promise_round,
                 serve_ready,
                 block, block_pattern, pattern_queues, pattern_served, need_jobs, job_live,
                 job_done, job_moved, free_memory):
        self.wait_for_copies = wait_for_copies
        self.abandon_replication = abandon_replication
        self.follow_replication = follow_replication
        self.confirm_copies = confirm_copies
        self.promise_progress = promise_progress
        self.end_promise_round = end_promise_round
        self.serve_ready = serve_ready
        self.block = block
        self.block_pattern = block_pattern
        self.pattern_queues = pattern_queues
        self.pattern_served = pattern_served
        self.need_jobs = need_jobs
        self.job_live = job_live
        self.job_done = job_done
        self.job_moved = job_moved
        self.free_memory = free_memory

    @staticmethod
    def slot_names():
        """Every hook, in the order hooks.pxd declares them."""
        return ("wait_for_copies", "abandon_replication",
                "follow_replication", "confirm_copies", "promise_progress", "end_promise_round",
                "serve_ready", "block", "block_pattern", "pattern_queues", "pattern_served",
                "need_jobs", "job_live", "job_done", "job_moved", "free_memory")

    @staticmethod
    def unwired():
        """Hooks for the engine alone: a node with no peers, no parked
        clients and no memory policy. Every slot but free_memory (nothing
        to free) raises HookNotWired if a path reaches it."""
        return NodeHooks(**{name: _nothing_to_free if name == "free_memory" else _Unwired(name)
                            for name in NodeHooks.slot_names()})
