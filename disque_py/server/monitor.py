"""MONITOR's feed: every command a client runs, as a line to each monitor.

A line is Disque's: "+<unix time>.<microseconds> [<client address>]" and
the command's arguments, each quoted with C-style escapes. The command
table calls feed() for each command it runs that MONITOR shows (not those
flagged M); lines go through the monitor's connection like any reply, so
they wait behind replies held for the AOF.
"""

from __future__ import annotations

import time

_ESCAPES = {0x5C: b"\\\\", 0x22: b'\\"', 10: b"\\n", 13: b"\\r", 9: b"\\t", 7: b"\\a", 8: b"\\b"}


class MonitorFeed:
    """Feeds the server's monitors (ServerState.monitors)."""

    def __init__(self, server) -> None:
        self.server = server

    def feed(self, session, argv: list[bytes]) -> None:
        now = time.time()
        line = b"+%d.%06d [%s] %b\r\n" % (
            int(now), int(now * 1_000_000) % 1_000_000, session.addr.encode(),
            b" ".join(quote(arg) for arg in argv))
        for monitor in self.server.monitors:
            if monitor.conn is not None:
                monitor.conn.send(line)


def quote(arg: bytes) -> bytes:
    """An argument as MONITOR shows it: quoted, with C-style escapes."""
    out = bytearray(b'"')
    for byte in arg:
        escape = _ESCAPES.get(byte)
        if escape is not None:
            out += escape
        elif 32 <= byte < 127:
            out.append(byte)
        else:
            out += b"\\x%02x" % byte
    out += b'"'
    return bytes(out)
