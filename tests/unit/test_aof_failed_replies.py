"""A connection whose held replies could not be made durable closes at
once, even while it runs a command: no later reply may reach its client,
which would read it as the answer to the command whose reply was dropped.

Driven directly: the engine's ServerCore holds the reply (deliver), the
persistence service's failure callback drops it (take_failed) and closes
the connection, on a fake transport, no sockets.
"""

from __future__ import annotations

from disque_py.base.clock import FakeClock
from disque_py.config import Config
from disque_py.node.node import Node
from disque_py.server.persistence_service import PersistenceService
from disque_py.server.protocol import ClientConnection
from disque_py.server.state import ServerState
from tests.fuzz.connection import (CONFIG_ARGS, ID_SEED, NODE_ID, START_MS, DroppedEffects,
                                   KeptTransport)


def _held_connection():
    node = Node(NODE_ID, FakeClock(START_MS, seed=7), id_seed=ID_SEED)
    server = ServerState(node, Config.load(None, CONFIG_ARGS))
    server.call_soon = lambda callback: None         # the turn's end never comes here
    node.aof_enabled = True
    conn = ClientConnection(server, DroppedEffects(node))
    conn.transport = transport = KeptTransport()
    conn.session = server.new_session("127.0.0.1:1", "127.0.0.1:7711", -1, conn)
    node.add_job(b"q", b"body", 1, 0, 5, 3600, 0, False)   # a record of this turn
    conn.deliver(b"+D-job-id\r\n")                       # held for it
    service = PersistenceService(node, Config(), server, lambda: False)
    return conn, transport, service, node.aof.reply_gen()


def test_a_failed_batch_closes_a_running_connection_and_nothing_more_is_written():
    conn, transport, service, gen = _held_connection()
    assert conn.holding_replies and transport.written == b""
    conn._running = True                                 # inside its next command
    service._fail_replies(1, gen, "Input/output error")
    conn.write_out(b"+OK\r\n")                           # that command's reply
    assert transport.closed
    assert transport.written == b"", "a reply reached the client after its ADDJOB's was dropped"


def test_a_failed_batch_closes_an_idle_connection_without_its_reply():
    conn, transport, service, gen = _held_connection()
    service._fail_replies(1, gen, "Input/output error")
    assert transport.closed and transport.written == b""
