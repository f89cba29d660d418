# A job's extra record: the state of its replication or ack collection.
#
# Most jobs never have one. The node makes it on first use (NodeCore.more)
# and drops it when the job leaves the node (NodeCore.unregister), so a
# plain job pays nothing; the node layer's replication and ack components
# (node/replication.py, node/acks.py) and copies.pxi read and fill it.


@cython.final
cdef class JobExtra:
    """The replication or ack-collection state of one job (see extra.pxd)."""

    def __repr__(self):
        return "<JobExtra confirmed=%r waiter=%r followers=%r>" % (
            self.confirmed, self.waiter, self.followers)
