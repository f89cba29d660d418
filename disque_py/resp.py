"""RESP2 codec, sans I/O: client requests in, reply bytes out.

RequestReader turns a byte stream into commands (lists of bytes). Incomplete
input is a return value (no command yet), never an exception; a malformed
stream sets `error` once, and every command parsed before the fault is still
returned so that it runs and is answered, as Disque does.

Two parsers share the work:
  * the fast path hands chunks that start with '*' to hiredis (C), and
    accepts what it returns only if every command is a non-empty array of
    bulk strings whose canonical size (recomputed from the arguments) ends
    exactly where the next command starts with '*', or at the chunk's end;
  * anything else (inline commands, a shape hiredis rejects or frames
    differently, oversize headers) falls back to an incremental parser that
    follows Disque's own rules and error messages byte for byte: it reads
    the whole chunk again from its first byte.
A chunk that ends inside a command (the norm for a busy pipeline) keeps the
fast path: the commands before the cut are taken, the slow parser gets the
cut command's first bytes and completes it from the next chunk, then hands
the rest of that chunk back to hiredis.

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

import hiredis

from disque_py.errors import DisqueError, ProtocolError
from disque_py.splitargs import UnbalancedQuotes, split_line

# Limits, as in Disque (and Redis 3): beyond them the stream is refused.
INLINE_MAX_SIZE = 64 * 1024            # an inline command, or a header line
MULTIBULK_MAX_COUNT = 1024 * 1024      # arguments in one command
BULK_MAX_LENGTH = 512 * 1024 * 1024    # bytes in one argument

_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


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


def parse_strict_int(digits: bytes | bytearray) -> int | None:
    """Parse a length the way Disque's string2ll does: canonical digits only."""
    n = len(digits)
    if n == 0 or n > 20:
        return None
    if digits[0] == 45:  # '-'
        body = digits[1:]
        if not body or body[0] == 48 or not body.isdigit():
            return None
    elif not digits.isdigit() or (digits[0] == 48 and n > 1):
        return None
    value = int(digits)
    if value < _INT64_MIN or value > _INT64_MAX:
        return None
    return value


class RequestReader:
    """Incremental request parser for one client connection."""

    __slots__ = ("_hiredis", "_buf", "_argv", "_args_left", "_bulk_len", "error")

    def __init__(self) -> None:
        self._hiredis = hiredis.Reader()
        self._buf: bytearray | None = None   # set while the slow path owns the stream
        self._argv: list[bytes] = []         # arguments of a half-read command
        self._args_left = 0                  # arguments still expected
        self._bulk_len = -1                  # length of the bulk being read
        self.error: ProtocolError | None = None

    @property
    def buffered(self) -> int:
        """Bytes received but not yet turned into commands."""
        return len(self._buf) if self._buf is not None else 0

    def feed(self, data: bytes) -> list[list[bytes]]:
        """Consume bytes; return the commands they complete, in order."""
        if self.error is not None or not data:
            return []
        if self._buf is None:
            if data[0] == 42:  # '*'
                return self._feed_fast(data)
            self._buf = bytearray(data)
        else:
            self._buf += data
        return self._parse_slow([], handoff=True)

    def _feed_fast(self, data: bytes) -> list[list[bytes]]:
        # hiredis is clean on entry, so every byte it holds comes from `data`.
        reader = self._hiredis
        reader.feed(data)
        commands: list[list[bytes]] = []
        total, consumed = len(data), 0
        try:
            while True:
                command = reader.gets()
                if command is False:            # the chunk ends inside a command
                    if consumed < total and data[consumed] == 42:
                        return self._take_cut_command(data, consumed, commands)
                    break
                if type(command) is not list or not command:
                    break
                argc = len(command)
                if argc > MULTIBULK_MAX_COUNT:
                    break
                size = 4 if argc < 10 else 3 + len(str(argc))
                for arg in command:
                    if type(arg) is not bytes:
                        break
                    n = len(arg)
                    size += n + (6 if n < 10 else 7 if n < 100 else 5 + len(str(n)))
                else:
                    commands.append(command)
                    consumed += size
                    if consumed == total:
                        return commands
                    if consumed < total and data[consumed] == 42:
                        continue
                break
        except Exception:  # hiredis refuses some shapes with errors of its own
            pass
        self._hiredis = hiredis.Reader()
        self._buf = bytearray(data)
        return self._parse_slow([], handoff=False)

    def _take_cut_command(self, data: bytes, start: int, commands: list) -> list:
        """Keep the commands before the cut; the slow parser holds the rest."""
        self._hiredis = hiredis.Reader()
        self._buf = bytearray(memoryview(data)[start:])
        return self._parse_slow(commands, handoff=False)

    def _parse_slow(self, commands: list[list[bytes]], handoff: bool) -> list[list[bytes]]:
        buf = self._buf
        pos = 0
        try:
            while pos < len(buf):
                if self._args_left == 0 and buf[pos] != 42:
                    pos, command = self._parse_inline(buf, pos)
                else:
                    pos, command = self._parse_multibulk(buf, pos)
                if command is None:
                    break
                if command:
                    commands.append(command)
                if handoff and self._args_left == 0 and pos < len(buf) and buf[pos] == 42:
                    rest = bytes(memoryview(buf)[pos:])
                    self._buf = None             # hiredis takes over at a command start
                    commands.extend(self._feed_fast(rest))
                    return commands
        except ProtocolError as exc:
            self.error = exc.as_reply()
            self._buf = None
            return commands
        if pos >= len(buf) and self._args_left == 0:
            self._buf = None  # drained: the fast path may take over again
        elif pos:
            del buf[:pos]
        return commands

    def _parse_inline(self, buf: bytearray, pos: int):
        newline = buf.find(b"\n", pos)
        if newline < 0:
            if len(buf) - pos > INLINE_MAX_SIZE:
                raise ProtocolError("too big inline request")
            return pos, None
        end = newline - 1 if newline > pos and buf[newline - 1] == 13 else newline
        line = bytes(buf[pos:end])
        nul = line.find(b"\0")
        if nul >= 0:          # Disque reads the line as a C string
            line = line[:nul]
        try:
            args = split_line(line)
        except UnbalancedQuotes:
            raise ProtocolError("unbalanced quotes in request") from None
        return newline + 1, [arg for arg in args if arg]

    def _parse_multibulk(self, buf: bytearray, pos: int):
        if self._args_left == 0:
            newline = buf.find(b"\r", pos)
            if newline < 0:
                if len(buf) - pos > INLINE_MAX_SIZE:
                    raise ProtocolError("too big mbulk count string")
                return pos, None
            if newline + 1 >= len(buf):
                return pos, None
            count = parse_strict_int(buf[pos + 1:newline])
            if count is None or count > MULTIBULK_MAX_COUNT:
                raise ProtocolError("invalid multibulk length")
            pos = newline + 2
            if count <= 0:
                return pos, []
            self._args_left = count
            self._argv = []
        argv = self._argv
        while self._args_left:
            if self._bulk_len < 0:
                newline = buf.find(b"\r", pos)
                if newline < 0:
                    if len(buf) - pos > INLINE_MAX_SIZE:
                        raise ProtocolError("too big bulk count string")
                    return pos, None
                if newline + 1 >= len(buf):
                    return pos, None
                if buf[pos] != 36:  # '$'
                    raise ProtocolError("expected '$', got '%s'" % chr(buf[pos]))
                length = parse_strict_int(buf[pos + 1:newline])
                if length is None or length < 0 or length > BULK_MAX_LENGTH:
                    raise ProtocolError("invalid bulk length")
                pos = newline + 2
                self._bulk_len = length
            if len(buf) - pos < self._bulk_len + 2:
                return pos, None
            argv.append(bytes(buf[pos:pos + self._bulk_len]))
            pos += self._bulk_len + 2
            self._bulk_len = -1
            self._args_left -= 1
        self._argv = []
        return pos, argv


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
