"""Fuzz target: a client connection's bytes, through every layer that
reads them, without a socket.

A fresh node and server (a fake clock, a seeded ID generator) and one
ClientConnection (server/protocol.py) over the engine's fast path
(engine/net/conn.pxi, hot.pxi) take the bytes in one or a few reads, as
data_received gets them from the event loop; replies go to a transport
that keeps them. The commands that reach the process, its files, the
event loop or the services the runtime attaches (SHUTDOWN, DEBUG, CONFIG,
CLUSTER, CLIENT, MONITOR, BGREWRITEAOF) are renamed away, as rename-command
does: this driver has none of those. The node's effects are dropped.

The contract: data_received raises nothing; what was written is whole
RESP replies, each error with a code the server answers with; a protocol
error is the last reply and closes the connection, unless a QUIT before it
closed the connection first (as in Disque, nothing after a QUIT is read:
its +OK is the last reply); and when every command
is a hot one, the replies do not depend on how the bytes were cut into
reads (the fast path runs a read's commands, the Python loop what follows
a cut inside a command: both must answer the same).
"""

from __future__ import annotations

import random
import zlib

import hiredis

from disque_py.base.clock import FakeClock
from disque_py.base.errors import DisqueError
from disque_py.config import Config
from disque_py.engine import HOT_COMMANDS, RequestParser
from disque_py.node.node import Node
from disque_py.server.protocol import ClientConnection
from disque_py.server.state import ServerState

NODE_ID = b"9bfa56e329abf3577408e45419d642cac8154459"
START_MS = 1_700_000_000_000
ID_SEED = b"fuzz-connection"
DISABLED = ("shutdown", "debug", "config", "cluster", "client", "monitor", "bgrewriteaof")
MAX_READS = 4
OK = b"+OK\r\n"


def _error_codes() -> set[bytes]:
    codes, classes = set(), [DisqueError]
    while classes:
        cls = classes.pop()
        codes.add(cls.prefix)
        classes += cls.__subclasses__()
    return codes


ERROR_CODES = _error_codes()
CONFIG_ARGS = [arg for name in DISABLED for arg in ("--rename-command", name, "")]


class KeptTransport:
    """What the connection wrote, and whether it closed."""

    def __init__(self) -> None:
        self.written = bytearray()
        self.closed = False

    def write(self, data: bytes) -> None:
        assert not self.closed, "written after close"
        self.written += data

    def close(self) -> None:
        self.closed = True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0


class DroppedEffects:
    """The effects interpreter's place: the node's effects, dropped."""

    def __init__(self, node: Node) -> None:
        self.node = node

    def after_commands(self) -> None:
        self.node.take_effects()



def connect() -> tuple[ClientConnection, KeptTransport]:
    node = Node(NODE_ID, FakeClock(START_MS, seed=7), id_seed=ID_SEED)
    server = ServerState(node, Config.load(None, CONFIG_ARGS))
    server.call_soon = lambda callback: callback()
    conn = ClientConnection(server, DroppedEffects(node))
    conn.transport = transport = KeptTransport()
    conn.session = server.new_session("127.0.0.1:1", "127.0.0.1:7711", -1, conn)
    return conn, transport


def serve(reads: list[bytes]) -> tuple[ClientConnection, bytes]:
    """A new connection given these reads: it, and the bytes it wrote."""
    conn, transport = connect()
    for data in reads:
        if conn.closing:
            break
        conn.data_received(data)
    if conn.unflushed_bytes():
        conn.server.flush_replies()          # the end of the loop turn
    return conn, bytes(transport.written)


def replies(written: bytes) -> list:
    """The replies in `written`, which must be whole RESP."""
    reader = hiredis.Reader()
    reader.feed(written)
    found = []
    while (reply := reader.gets()) is not False:
        found.append(reply)
    assert not reader.has_data(), f"a reply cut short: {written[-80:]!r}"
    return found


def check_errors(found: list) -> None:
    for reply in found:
        if isinstance(reply, hiredis.ReplyError):
            code = str(reply).split(" ", 1)[0].encode()
            assert code in ERROR_CODES, f"unknown error reply {reply}"
        elif isinstance(reply, list):
            check_errors(reply)


def all_hot(commands: list) -> bool:
    return bool(commands) and all(command[0].lower().decode("latin-1") in HOT_COMMANDS
                                  for command in commands)


def check(data: bytes) -> None:
    conn, written = serve([data])
    check_errors(replies(written))
    commands = RequestParser().feed(data)
    error = conn.reader.error
    if error is not None and not conn.session.waiting:
        last = OK if any(command[0].lower() == b"quit" for command in commands) else error.wire()
        assert written.endswith(last), "the protocol error (or QUIT's +OK) is not the last reply"
        assert conn.closing, "a protocol error must close the connection"
    if all_hot(commands):
        rng = random.Random(zlib.crc32(data))
        cuts = sorted(rng.randrange(len(data) + 1) for _ in range(rng.randrange(1, MAX_READS)))
        reads = [data[a:b] for a, b in zip([0] + cuts, cuts + [len(data)])]
        assert serve(reads)[1] == written, "the reads' boundaries changed the replies"
