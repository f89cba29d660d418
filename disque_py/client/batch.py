"""A pipeline's round trip on one blocking redis-py connection: every call
written in one send, then every reply read back, in order.

redis-py's read_response costs a few microseconds of Python per reply,
which would be most of a pipelined ADDJOB's cost. With hiredis installed,
the replies are read straight from the connection's socket into one
hiredis.Reader (the connection holds no unread bytes once the pool hands
it out, so nothing is skipped); without hiredis, read_response reads each.
An error reply comes back as a ResponseError in its place; a lost
connection raises.
"""

from __future__ import annotations

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

Args = Sequence[Any]
READ_CHUNK = 256 * 1024
# hiredis answers this, not a reply, when it needs more bytes (a reply can be
# False under RESP3, so False cannot say it).
_MORE = object()


def exchange(connection: Connection, commands: Sequence[Args]) -> list[Any]:
    """Send `commands` on `connection`; their replies, errors in place."""
    sock = getattr(connection, "_sock", None)
    if not HAVE_HIREDIS or sock is None:
        return _exchange_redis_py(connection, commands)
    sock.sendall(b"".join([hiredis.pack_command(tuple(args)) for args in commands]))
    reader = hiredis.Reader(notEnoughData=_MORE)
    replies: list[Any] = []
    wanted = len(commands)
    while len(replies) < wanted:
        reply = reader.gets()
        if reply is _MORE:
            received = sock.recv(READ_CHUNK)
            if not received:
                raise RedisConnectionError("Connection closed by server.")
            reader.feed(received)
        elif isinstance(reply, hiredis.ReplyError):
            replies.append(ResponseError(str(reply)))
        else:
            replies.append(reply)
    return replies


def _exchange_redis_py(connection: Connection, commands: Sequence[Args]) -> list[Any]:
    connection.send_packed_command(connection.pack_commands(commands))
    replies: list[Any] = []
    for _ in commands:
        try:
            replies.append(connection.read_response())
        except ResponseError as error:
            replies.append(error)
    return replies
