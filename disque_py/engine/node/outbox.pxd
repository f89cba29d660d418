# Messages to peers, as ToPeer effects (outbox.pxi).

cdef int send_to_peer(NodeCore node, bytes node_id, int kind, object item,
                      int mflags) except -1
cdef int send_to_peers(NodeCore node, object nodes, int kind, object item,
                       int mflags) except -1
cdef int announce_queued(NodeCore node, Job job, int mflags, int64_t delay_ms) except -1
cdef int announce_working(NodeCore node, Job job) except -1
