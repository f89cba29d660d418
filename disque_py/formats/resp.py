"""RESP reply encoding, sans I/O: reply values in, bytes out.

(Requests are parsed by the engine's RequestParser, engine/net/resp.pxi, and
the hot commands encode their own replies there.)

Encoders turn reply values into bytes, for RESP2 or for RESP3 (a
connection after HELLO 3). The value model is small on purpose:

    bytes -> bulk string         str -> status           int -> integer
    list/tuple -> array          Raw -> already encoded  DisqueError -> error
    None -> null bulk (RESP2 $-1, RESP3 _)
    NULL_ARRAY -> null array (RESP2 *-1, RESP3 _)
    Map -> flat array of key, value (RESP2) or map (RESP3 %)
    SetReply -> array (RESP2) or set (RESP3 ~)
    Verbatim -> bulk string (RESP2) or verbatim text (RESP3 =...txt:)

A Raw reply is the same bytes under both protocols, so it must never hold
a null, a map or a set: those are built from the values above. The RESP2
path is the hot one; the extra kinds are tested after the common ones.
"""

from __future__ import annotations

from disque_py.base.errors import DisqueError


class Raw(bytes):
    """A reply that is already RESP-encoded."""

    __slots__ = ()


class Map(list):
    """A key/value reply, kept flat: [key1, value1, key2, value2, ...]."""

    __slots__ = ()


class SetReply(list):
    """An unordered collection (COMMAND's flags, as Redis 6+ types them)."""

    __slots__ = ()


class Verbatim(bytes):
    """Text meant for humans (INFO, CLIENT LIST, LATENCY DOCTOR...)."""

    __slots__ = ()


class _NullArray:
    """The null array: GETJOB NOHANG with nothing to give, QSTAT of no queue."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NULL_ARRAY"


OK = Raw(b"+OK\r\n")
PONG = Raw(b"+PONG\r\n")
NULL_ARRAY = _NullArray()
EMPTY_ARRAY = Raw(b"*0\r\n")
NULL_BULK = b"$-1\r\n"
NULL_ARRAY_RESP2 = b"*-1\r\n"
NULL_RESP3 = b"_\r\n"
VERBATIM_FORMAT = b"txt:"


# ----------------------------------------------------------------- encoders

def encode_bulk(value: bytes) -> bytes:
    return b"$%d\r\n%b\r\n" % (len(value), value)


def encode_into(parts: list, value, resp3: bool = False) -> None:
    """Append the encoding of `value` to `parts` (joined by the caller)."""
    kind = type(value)
    if kind is bytes:
        parts.append(b"$%d\r\n%b\r\n" % (len(value), value))
    elif kind is Raw:
        parts.append(value)
    elif kind is int:
        parts.append(b":%d\r\n" % value)
    elif kind is list or kind is tuple:
        parts.append(b"*%d\r\n" % len(value))
        for item in value:
            encode_into(parts, item, resp3)
    elif kind is str:
        parts.append(b"+%b\r\n" % value.encode())
    elif value is None:
        parts.append(NULL_RESP3 if resp3 else NULL_BULK)
    elif value is NULL_ARRAY:
        parts.append(NULL_RESP3 if resp3 else NULL_ARRAY_RESP2)
    elif isinstance(value, DisqueError):
        parts.append(value.wire())
    else:
        _encode_typed(parts, value, kind, resp3)


def _encode_typed(parts: list, value, kind, resp3: bool) -> None:
    """The kinds whose RESP3 form differs in type, and loose Python types."""
    if kind is Map:
        parts.append(b"%%%d\r\n" % (len(value) // 2) if resp3 else b"*%d\r\n" % len(value))
        for item in value:
            encode_into(parts, item, resp3)
    elif kind is SetReply:
        parts.append(b"~%d\r\n" % len(value) if resp3 else b"*%d\r\n" % len(value))
        for item in value:
            encode_into(parts, item, resp3)
    elif kind is Verbatim:
        if resp3:
            parts.append(b"=%d\r\n%b%b\r\n" % (len(value) + 4, VERBATIM_FORMAT, value))
        else:
            parts.append(b"$%d\r\n%b\r\n" % (len(value), value))
    elif isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        parts.append(b"$%d\r\n%b\r\n" % (len(data), data))
    elif isinstance(value, int):      # bool, and int subclasses
        parts.append(b":%d\r\n" % int(value))
    else:
        raise TypeError(f"cannot encode reply of type {kind.__name__}")


def encode(value, resp3: bool = False) -> bytes:
    """The encoding of one reply value."""
    kind = type(value)
    if kind is Raw:
        return value
    if kind is bytes:
        return b"$%d\r\n%b\r\n" % (len(value), value)
    if kind is int:
        return b":%d\r\n" % value
    parts: list = []
    encode_into(parts, value, resp3)
    return b"".join(parts)


def encode_command(*args) -> bytes:
    """A request in multibulk form (used by tools and tests, not the server)."""
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        if isinstance(arg, str):
            arg = arg.encode()
        elif isinstance(arg, int):
            arg = b"%d" % arg
        parts.append(b"$%d\r\n%b\r\n" % (len(arg), arg))
    return b"".join(parts)
