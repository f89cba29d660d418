# Messages to peers: the job protocol's items.
#
# The engine addresses peers by node ID. A node in a server has a
# BusOutbox (net/frames.pxi): each item is encoded into that peer's frames
# at once, and the server writes them at the turn's end; a node alone (the
# simulation, unit tests) appends ToPeer effects to node.effects instead,
# which its owner carries. Either way best effort (a node without a link
# misses the message, as in Disque: the protocol is built to survive lost
# messages). Confirmations (GOTJOB, GOTACK, DELJOB) wait for the AOF
# records noted before them (frames.pxi). Nothing here knows links.

from disque_py.base.effects import ToPeer
from disque_py.formats.bus import (DELJOB as MSG_DELJOB, GOTACK as MSG_GOTACK,
                                   GOTJOB as MSG_GOTJOB, QUEUED as MSG_QUEUED,
                                   WORKING as MSG_WORKING)

# ToPeer(...) runs namedtuple's __new__, a Python function; the tuple is
# built directly instead (the same object).
cdef object _new_tuple = tuple.__new__


cdef inline object to_peer(bytes node_id, int kind, object item, int mflags):
    return _new_tuple(ToPeer, (node_id, kind, item, mflags))


cdef inline bint is_confirmation(int kind) noexcept:
    return kind == MSG_GOTJOB or kind == MSG_GOTACK or kind == MSG_DELJOB


cdef int send_to_peer(NodeCore node, bytes node_id, int kind, object item,
                      int mflags) except -1:
    cdef uint64_t gen = 0
    if node.bus_out is None:
        node.effects.append(to_peer(node_id, kind, item, mflags))
        return 0
    if node.aof_enabled and is_confirmation(kind):
        if node.aof.refusing:
            return 0          # not on disk, so not confirmed: the peer asks again
        gen = node.aof.reply_gen()
    return node.bus_out.add(node_id, kind, item, mflags, gen)


cdef int send_to_peers(NodeCore node, object nodes, int kind, object item,
                       int mflags) except -1:
    """To every node listed, except this one; returns how many."""
    cdef int sent = 0
    me = node.id
    for node_id in nodes:
        if node_id != me:
            send_to_peer(node, node_id, kind, item, mflags)
            sent += 1
    return sent


cdef int announce_queued(NodeCore node, Job job, int mflags, int64_t delay_ms) except -1:
    """QUEUED to the other holders: the job was queued again here (or will
    be, after `delay_ms`: a NACK with a delay)."""
    return send_to_peers(node, job.delivered, MSG_QUEUED, (job.id, delay_ms), mflags)


cdef int announce_working(NodeCore node, Job job) except -1:
    """WORKING to the other holders: a consumer is still on the job."""
    return send_to_peers(node, job.delivered, MSG_WORKING, (job.id, 0), 0)
