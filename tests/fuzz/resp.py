"""Fuzz target: the engine's request parser (engine/net/resp.pxi).

The contract, for any bytes: feeding them returns commands (non-empty
lists of bytes), and the stream either waits for more bytes or ends in one
of the protocol errors Disque answers with; nothing is raised. The outcome
does not depend on how the bytes were cut into reads (whole, byte by byte,
at cuts drawn from the data's checksum), and the commands, encoded again
as multibulk requests, parse back to themselves.
"""

from __future__ import annotations

import random
import re
import zlib

from disque_py.base.errors import ProtocolError
from disque_py.engine import RequestParser
from disque_py.formats.resp import encode_command

# Every protocol error the parser may set (Disque's wording).
PROTOCOL_ERROR = re.compile(
    r"Protocol error: (too big inline request|unbalanced quotes in request|"
    r"too big mbulk count string|too big bulk count string|invalid multibulk length|"
    r"invalid bulk length|expected '\$', got '.')\Z", re.DOTALL)
BYTEWISE_UP_TO = 1024          # longer inputs are cut at random points only
MAX_CUTS = 8


def parse(reads) -> tuple[list, str | None]:
    """The commands a new parser returns for these reads, and its error."""
    parser = RequestParser()
    commands = []
    for data in reads:
        commands += parser.feed(data)
    error = parser.error
    assert error is None or isinstance(error, ProtocolError), repr(error)
    if error is not None:
        assert parser.feed(encode_command(b"PING")) == [], "input read after a protocol error"
    return commands, None if error is None else error.message


def cut(data: bytes, rng: random.Random) -> list[bytes]:
    points = sorted(rng.randrange(len(data) + 1) for _ in range(rng.randrange(MAX_CUTS)))
    return [data[start:end] for start, end in zip([0] + points, points + [len(data)])]


def check(data: bytes) -> None:
    commands, error = parse([data])
    for command in commands:
        assert type(command) is list and command, command
        assert all(type(arg) is bytes for arg in command), command
    assert error is None or PROTOCOL_ERROR.match(error), error
    rng = random.Random(zlib.crc32(data))
    assert parse(cut(data, rng)) == (commands, error), "the reads' boundaries changed the outcome"
    if len(data) <= BYTEWISE_UP_TO:
        assert parse([data[i:i + 1] for i in range(len(data))]) == (commands, error), \
            "byte by byte differs from whole"
    encoded = b"".join(encode_command(*command) for command in commands)
    assert parse([encoded]) == (commands, None), "commands do not survive their encoding"
