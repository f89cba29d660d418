# Messages to peers: the job protocol's items, as ToPeer effects.
#
# The engine addresses peers by node ID and appends ToPeer effects to
# node.effects; the server layer batches them into frames and sends them,
# best effort (a node without a link misses the message, as in Disque: the
# protocol is built to survive lost messages). Nothing here knows links.

from disque_py.base.effects import ToPeer
from disque_py.formats.bus import QUEUED as MSG_QUEUED, WORKING as MSG_WORKING

# ToPeer(...) runs namedtuple's __new__, a Python function; the tuple is
# built directly instead (the same object).
cdef object _new_tuple = tuple.__new__


cdef inline object to_peer(bytes node_id, int kind, object item, int mflags):
    return _new_tuple(ToPeer, (node_id, kind, item, mflags))


cdef int send_to_peer(NodeCore node, bytes node_id, int kind, object item,
                      int mflags) except -1:
    node.effects.append(to_peer(node_id, kind, item, mflags))
    return 0


cdef int send_to_peers(NodeCore node, object nodes, int kind, object item,
                       int mflags) except -1:
    """To every node listed, except this one."""
    me = node.id
    append = node.effects.append
    for node_id in nodes:
        if node_id != me:
            append(to_peer(node_id, kind, item, mflags))
    return 0


cdef int announce_queued(NodeCore node, Job job, int mflags, int64_t delay_ms) except -1:
    """QUEUED to the other holders: the job was queued again here (or will
    be, after `delay_ms`: a NACK with a delay)."""
    return send_to_peers(node, job.delivered, MSG_QUEUED, (job.id, delay_ms), mflags)


cdef int announce_working(NodeCore node, Job job) except -1:
    """WORKING to the other holders: a consumer is still on the job."""
    return send_to_peers(node, job.delivered, MSG_WORKING, (job.id, 0), 0)
