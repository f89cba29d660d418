"""How the job core talks to the other nodes: outgoing items and the
dispatch of incoming ones.

The core never sees links or frames. It addresses peers by node ID and
emits ToPeer effects; the cluster service batches and sends them, best
effort (a node without a link just misses the message, as in Disque: the
protocol is built to survive lost messages). Incoming job messages arrive
here already decoded and from a known sender; every handler tolerates
duplicates, reordering, unknown jobs and jobs in any state.
"""

from __future__ import annotations

from disque_py.formats import bus as msg
from disque_py.base.effects import ToPeer

# ToPeer(...) runs namedtuple's __new__, a Python function; the hot paths
# build the tuple directly: new_tuple(ToPeer, (node_id, kind, item, mflags)).
new_tuple = tuple.__new__


class PeersMixin:
    def set_cluster_view(self, size: int, known: set[bytes], reachable: int,
                         linked: list[bytes], leaving: bool, failed=None, epochs=None) -> None:
        """The membership layer's view, pushed after every change.

        `reachable` counts peers not flagged failing (what ADDJOB checks its
        REPLICATE against, as Disque does); `linked` are those we can send
        to right now (where copies are asked for). `failed` (the peers
        flagged FAIL) and `epochs` ({peer: start epoch}) tell healing.py
        which holders were lost; None from a caller that does not know."""
        self.cluster_size = size
        self.known_peers = known
        self.has_peers = bool(known)
        self.index_node_ids()
        self.reachable = linked
        self.reachable_peers = reachable
        was_leaving, self.leaving = self.leaving, leaving
        if leaving and not was_leaving:
            self.release_all_waiters_leaving()
        self.heal_view(failed, epochs)

    def index_node_ids(self) -> None:
        """node_ids: each known node's ID and this node's, ID -> the same
        object, so that the holders of the jobs copied here share them."""
        node_ids = self.node_ids = {node_id: node_id for node_id in self.known_peers}
        node_ids[self.id] = self.id

    def on_peer_message(self, sender: bytes, kind: int, mflags: int, body) -> None:
        """A job-protocol message from a known node."""
        handler = self._PEER_HANDLERS.get(kind)
        if handler is None:
            return
        if kind in (msg.REPLJOB, msg.YOURJOBS):
            handler(self, sender, mflags, body.jobs)
        elif kind in (msg.NEEDJOBS, msg.PAUSE):
            handler(self, sender, body.queue, body.aux)
        else:
            for job_id, aux in body.items:
                handler(self, sender, mflags, job_id, aux)
        if self.ready:
            self.serve_ready()
