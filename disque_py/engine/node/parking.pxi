# Clients parked inside the node, and the deadlines that release them:
# Waiter, Deadlines and Parking, compiled so that the bus's fast path can
# answer a producer whose copies are made (copies.pxi) without a Python
# call, and every other path shares the same bookkeeping.
#
# A Waiter is a client that asked for something the node cannot give yet:
# GETJOB on empty queues (node/consumers.py), (with the cluster) ADDJOB
# waiting for its copies (or a duplicate ADDJOB, same DEDUP key, waiting
# for the first one's outcome: node/replication.py), or WAITJOB and QWAIT
# waiting for jobs to finish (node/waits.py). The node owns waiters
# because their presence is domain state: a queue with waiters is never
# evicted, QSTAT counts them, federation asks peers for jobs on their
# behalf. The `client` field is opaque to the node; the server layer uses
# it to find the connection to answer.
#
# Parking keeps what every waiter shares (the count INFO shows, the
# deadlines, the Unblock effect that answers it); each kind of waiter
# belongs to the component named above, which tells Parking how to take
# one of its waiters off its own structures (owns), and, for a waiting
# ADDJOB, what to do when its client goes away. node/waiters.py lists the
# outcomes an Unblock hands back.

import heapq

from disque_py.base.effects import Unblock


cdef class Waiter:

    def __init__(self, client, int kind, int64_t deadline_ms):
        self.client = client
        self.kind = kind
        self.queues = ()
        self.deadline = deadline_ms
        self.active = True


cdef class Deadlines:
    """Deadlines of parked clients, earliest first.

    Entries of released waiters are skipped lazily; the heap is rebuilt when
    they outnumber the live ones, so long timeouts served early cannot pile up."""

    def __cinit__(self):
        self._heap = []

    cpdef add(self, Waiter waiter):
        if not waiter.deadline:
            return
        self._seq += 1
        waiter.seq = self._seq
        heapq.heappush(self._heap, (waiter.deadline, waiter.seq, waiter))
        self._live += 1

    cpdef discard(self, Waiter waiter):
        if waiter.deadline and waiter.seq:
            waiter.seq = 0
            self._live -= 1
            if len(self._heap) > 2 * self._live + 64:
                self._heap = [entry for entry in self._heap
                              if (<Waiter>entry[2]).seq == entry[1]]
                heapq.heapify(self._heap)

    def next_due(self):
        heap = self._heap
        while heap and (<Waiter>heap[0][2]).seq != heap[0][1]:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def pop_expired(self, int64_t now_ms):
        cdef Waiter waiter
        expired = []
        heap = self._heap
        while heap and heap[0][0] <= now_ms:
            _, seq, waiter = heapq.heappop(heap)
            if waiter.seq == seq:
                waiter.seq = 0
                self._live -= 1
                expired.append(waiter)
        return expired


cdef class Parking:
    """Every parked client's shared bookkeeping, on one node."""

    def __init__(self, NodeCore core):
        self.core = core
        self.deadlines = Deadlines()
        self._forgetters = {}
        self._cancellers = {}

    def owns(self, int kind, forget, cancel=None):
        """A component owns the waiters of `kind`: forget(waiter) takes one
        off its structures (None: it keeps none); cancel(waiter), if
        given, replaces forgetting when the client goes away."""
        self._forgetters[kind] = forget
        if cancel is not None:
            self._cancellers[kind] = cancel

    cpdef start(self, Waiter waiter):
        """Count a parked client and arm its deadline; forget undoes both."""
        self.deadlines.add(waiter)
        self.blocked_clients += 1

    cpdef forget(self, Waiter waiter):
        """Take a waiter off every structure that knows it (idempotent)."""
        if not waiter.active:
            return
        waiter.active = False
        self.blocked_clients -= 1
        self.deadlines.discard(waiter)
        forget = self._forgetters[waiter.kind]
        if forget is not None:
            forget(waiter)

    cpdef release(self, Waiter waiter, outcome):
        """Unpark a client with an outcome (node/waiters.py lists them)."""
        if not waiter.active:
            return
        self.forget(waiter)
        self.core.effects.append(_new_tuple(Unblock, (waiter, outcome)))

    def cancel(self, Waiter waiter):
        """The parked client went away: drop its wait without answering."""
        cancel = self._cancellers.get(waiter.kind)
        if cancel is not None and waiter.active:
            cancel(waiter)
        else:
            self.forget(waiter)
