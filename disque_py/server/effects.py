"""Carrying out what the node asked for: the effect interpreter.

The node (and the engine under it) never touches a socket or a file: its
methods append effects to node.effects (base/effects.py). After each batch
of commands, each timer slice and each bus read, the server drains that
outbox here, in order:

  * ToPeer: to the cluster service, batched into frames per peer and loop
    turn; confirmations (GOTJOB, GOTACK, DELJOB) wait for the AOF first
    (confirm);
  * Unblock: the parked client's answer; it waits for the AOF records
    noted so far like any reply (ConnectionBase.deliver), so appendfsync
    always holds it until they are on disk; a client's answers of one
    batch leave in one write.

(AOF records are not effects: the node notes them in the engine's AofLog,
written at the turn's end.)

after_commands also closes the clients CLIENT KILL asked to close, and
starts the shutdown SHUTDOWN asked for: a command only records such a
request (server/state.py), so that handlers stay testable without sockets.
"""

from __future__ import annotations

from typing import Callable

from disque_py.base.effects import ToPeer, Unblock
from disque_py.commands.queues import render_outcome
from disque_py.formats.bus import DELJOB, GOTACK, GOTJOB
from disque_py.persistence.aof import ON as AOF_ON

# Messages telling peers what this node's AOF must already hold: its copy
# (GOTJOB), its copy's ack (GOTACK), or, ending a collection, that every
# copy is acked and may go (DELJOB; also sent best effort by FASTACK and
# abandoned ADDJOBs, which lose nothing by waiting). See confirm().
CONFIRMATIONS = (GOTJOB, GOTACK, DELJOB)


class EffectInterpreter:
    """Drains one node's outbox into the services that carry it out."""

    def __init__(self, node, server, cluster, persistence,
                 request_shutdown: Callable[[str, object], None]) -> None:
        self.node = node
        self.server = server
        self.cluster = cluster
        self.persistence = persistence
        self.request_shutdown = request_shutdown

    def after_commands(self) -> None:
        """Carry out what the last batch of commands asked for."""
        server = self.server
        # The load's effects wait until the node has started (its cluster with it).
        if self.node.effects and not server.loading:
            self.apply()
        if server.kills:
            for session in server.kills:
                if session.conn is not None:
                    session.conn.close()
            server.kills.clear()
        if server.shutdown_request is not None:
            mode, session = server.shutdown_request
            server.shutdown_request = None
            self.request_shutdown(mode, session)

    def apply(self) -> None:
        post = self.cluster.post
        persistence = self.persistence
        writer = persistence.writer
        gated = writer is not None and writer.state == AOF_ON   # see confirm()
        unblocks = []
        confirmations = None
        for effect in self.node.take_effects():
            kind = type(effect)
            if kind is ToPeer:
                if gated and effect.kind in CONFIRMATIONS:
                    if confirmations is None:
                        confirmations = []
                    confirmations.append(effect)
                else:
                    post(effect)
            elif kind is Unblock:
                unblocks.append(effect)
        if confirmations is not None:
            self.confirm(writer, confirmations)
        self._answer(unblocks)

    def _answer(self, unblocks: list) -> None:
        """Parked clients' answers, in order; one write per client."""
        resumed = {}
        for effect in unblocks:
            waiter = effect.waiter
            session = waiter.client
            conn = session.conn
            if conn is not None:
                if conn.resume(waiter, render_outcome(waiter, effect.outcome)):
                    resumed[conn] = None
            else:
                session.waiting.pop(waiter, None)
        for conn in resumed:
            conn.flush_resumed()

    def confirm(self, writer, confirmations: list) -> None:
        """GOTJOB tells a producer that a copy is safe here (and the producer
        then tells its client); GOTACK tells the node collecting an ack that
        the copy here is gone for good, and DELJOB that every copy is (the
        others then forget the ack). Like a client's reply they leave only
        once the AOF records queued so far are written (appendfsync always:
        fsynced, as Disque fsyncs before it writes to any socket): a kill -9
        never takes a copy that was counted, nor brings back one whose ack
        was collected. While the AOF cannot be written none leaves: peers
        ask again, or ask another node (Disque exits on such an error under
        appendfsync always, so nothing it confirmed is undone either)."""
        post = self.cluster.post

        def send(ok: bool = True, reason: str = "") -> None:
            if ok and writer.accepting:
                for item in confirmations:
                    post(item)

        if writer.accepting and not writer.hold_reply(send):
            send()
