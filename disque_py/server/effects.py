"""Carrying out what the node asked for: the effect interpreter.

The node (and the engine under it) never touches a socket or a file: its
methods append effects to node.effects (base/effects.py). After each batch
of commands, each timer slice and each bus read, the server drains that
outbox here: Unblock, a parked client's answer; it waits for the AOF
records noted so far like any reply (ConnectionBase.deliver), so
appendfsync always holds it until they are on disk; a client's answers of
one batch leave in one write.

(AOF records and messages to peers are not effects: the node notes records
in the engine's AofLog and encodes messages in its BusOutbox, both written
at the turn's end; a confirmation to a peer waits for the AOF like a
reply: engine/net/frames.pxi.)

after_commands also closes the clients CLIENT KILL asked to close, and
starts the shutdown SHUTDOWN asked for: a command only records such a
request (server/state.py), so that handlers stay testable without sockets.
"""

from __future__ import annotations

from typing import Callable

from disque_py.base.effects import Unblock
from disque_py.commands.queues import render_outcome


class EffectInterpreter:
    """Drains one node's outbox into the services that carry it out."""

    def __init__(self, node, server, request_shutdown: Callable[[str, object], None]) -> None:
        self.node = node
        self.server = server
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
        self._answer([effect for effect in self.node.take_effects() if type(effect) is Unblock])

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
