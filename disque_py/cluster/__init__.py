"""The cluster layer: who the other nodes are, and the links to them.

    nodes.py       a known node (ClusterNode), its flags, the header bits
                   that say what its version understands
    membership.py  the node table: handshakes, gossip, PFAIL and FAIL,
                   start epochs; pure state, effects out
    auth.py        the bus's shared-secret handshake (cluster-secret)
    nodes_conf.py  nodes.conf, read and written
    bus.py         the transport on the client port + 10000: the only
                   code of this layer that touches sockets

The jobs' messages (REPLJOB, GOTJOB, SETACK...) are not this layer's: the
node layer answers them; server/cluster_service.py runs this layer and
routes each frame.
"""
