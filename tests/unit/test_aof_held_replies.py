"""Replies and the AOF, driven directly on a fake transport (no sockets):
which replies the engine holds for AOF records (ConnectionBase.deliver),
and what happens to them when those records cannot be made durable.

  * A batch that noted no record (a read) is answered at once, even while
    an fsync other clients' replies wait for is pending (appendfsync
    always); a batch that noted one waits.
  * A connection whose held replies could not be made durable closes at
    once, even while it runs a command: no later reply may reach its
    client, which would read it as the answer to the command whose reply
    was dropped.
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
from tests.support import encode_command


def _server() -> ServerState:
    node = Node(NODE_ID, FakeClock(START_MS, seed=7), id_seed=ID_SEED)
    server = ServerState(node, Config.load(None, CONFIG_ARGS))
    server.call_soon = lambda callback: None         # the turn's end never comes here
    node.aof_enabled = True
    return server


def _connect(server: ServerState) -> tuple[ClientConnection, KeptTransport]:
    conn = ClientConnection(server, DroppedEffects(server.node))
    conn.transport = transport = KeptTransport()
    conn.session = server.new_session("127.0.0.1:1", "127.0.0.1:7711", -1, conn)
    return conn, transport


def test_a_read_is_answered_at_once_while_writes_wait_for_their_fsync():
    server = _server()
    log = server.node.aof
    log.written_gen, log.released_gen = 1, 0         # a batch written, its fsync pending
    writer, written = _connect(server)
    reader, read = _connect(server)
    writer.data_received(encode_command("ADDJOB", "q", "body", 0))
    reader.data_received(encode_command("QLEN", "q"))
    assert read.written == b":1\r\n", "a read waited for the AOF"
    assert written.written == b"" and writer.holding_replies


def _held_connection():
    server = _server()
    node = server.node
    conn, transport = _connect(server)
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
