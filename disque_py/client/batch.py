"""A pipeline's round trip on one blocking redis-py connection: every call
written in one send, then every reply read back, in order.

redis-py's read_response costs a few microseconds of Python per reply,
which would be most of a pipelined ADDJOB's cost. With hiredis installed,
the calls are packed by hiredis and written in slices, and the replies
are read straight from the connection's socket into one hiredis.Reader
(the connection holds no unread bytes once the pool hands it out, so
nothing is skipped), between slices as they come; without hiredis,
redis-py packs them and read_response reads each.
An error reply comes back as a ResponseError in its place; a lost
connection raises.
"""

from __future__ import annotations

import select
import socket
import ssl
from collections.abc import Sequence
from typing import Any

from redis.connection import Connection
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

try:
    import hiredis
    HAVE_HIREDIS = True
except ImportError:
    HAVE_HIREDIS = False

Args = tuple[Any, ...]
READ_CHUNK = 256 * 1024
# Commands per write: small enough that the server starts on the first ones
# while the next are packed, large enough that a write costs little each.
SLICE = 64
# hiredis answers this, not a reply, when it needs more bytes (a reply can be
# False under RESP3, so False cannot say it).
_MORE = object()


def exchange(connection: Connection, commands: Sequence[Args]) -> list[Any]:
    """Send `commands` on `connection`; their replies, errors in place."""
    sock = getattr(connection, "_sock", None)
    if not HAVE_HIREDIS or sock is None:
        return _exchange_redis_py(connection, commands)
    reader = hiredis.Reader(replyError=ResponseError, notEnoughData=_MORE)
    replies: list[Any] = []
    # On a plain TCP socket, replies already there are read between writes,
    # so the server works on one slice while the next is packed. (Not on TLS:
    # a readable socket may hold half a TLS record, and reading would block.)
    readable = None
    if len(commands) > SLICE and not isinstance(sock, ssl.SSLSocket):
        readable = select.poll()
        readable.register(sock, select.POLLIN)
    pack = hiredis.pack_command
    for start in range(0, len(commands), SLICE):
        sock.sendall(b"".join([pack(args) for args in commands[start:start + SLICE]]))
        while readable is not None and readable.poll(0):
            _read(sock, reader, replies)
    while len(replies) < len(commands):
        _read(sock, reader, replies)
    return replies


def is_quiet(connection: Connection) -> bool:
    """Whether a connected plain-TCP connection has nothing to read: no
    close from the server, no stray bytes (what redis-py's pool checks
    before it hands a connection out)."""
    sock = getattr(connection, "_sock", None)
    if sock is None or isinstance(sock, ssl.SSLSocket):
        return False
    readable = select.poll()
    readable.register(sock, select.POLLIN)
    return not readable.poll(0)


def _read(sock: socket.socket, reader: hiredis.Reader, replies: list[Any]) -> None:
    """One recv into the reader, and every reply it completes."""
    received = sock.recv(READ_CHUNK)
    if not received:
        raise RedisConnectionError("Connection closed by server.")
    reader.feed(received)
    gets, append = reader.gets, replies.append
    while (reply := gets()) is not _MORE:
        append(reply)


def _exchange_redis_py(connection: Connection, commands: Sequence[Args]) -> list[Any]:
    connection.send_packed_command(connection.pack_commands(commands))
    replies: list[Any] = []
    for _ in commands:
        try:
            replies.append(connection.read_response())
        except ResponseError as error:
            replies.append(error)
    return replies
