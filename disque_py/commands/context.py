"""Reply markers a handler returns when it cannot answer yet, or not at
all, the CLIENT REPLY flags that decide whether a reply is written, and how
the command table runs a compiled command."""

from __future__ import annotations

from disque_py.engine import HOT_COMMANDS, run_hot
from disque_py.formats.resp import Raw


class Park:
    """The client waits; the node will answer it through an Unblock effect.

    Until then the connection runs none of the client's later commands, as
    a blocked Disque client would not, with one exception: when `overlaps`
    (ADDJOB waiting for its copies), the ADDJOBs right behind it in the
    pipeline run too, so a pipelined producer waits for one replication
    round trip per batch instead of one per job. Replies keep their order.
    (A plain slotted class: one is made per replicated ADDJOB, and a
    NamedTuple's constructor costs a Python-level call more.)
    """

    __slots__ = ("waiter", "overlaps")

    def __init__(self, waiter, overlaps: bool = False) -> None:
        self.waiter = waiter
        self.overlaps = overlaps


# Nothing to write now: SHUTDOWN (answered by the runtime only if it fails),
# MONITOR sent twice (Disque stays silent).
NO_REPLY = Raw(b"")

# Session.reply_flags (CLIENT REPLY), as Disque keeps them: SKIP_NEXT is set
# by CLIENT REPLY SKIP and becomes SKIP once that command is done, so the
# reply of the command after it is dropped, whatever that command is.
REPLY_OFF = 1
REPLY_SKIP_NEXT = 2
REPLY_SKIP = 4
REPLY_MUTED = REPLY_OFF | REPLY_SKIP


def reply_flags_after_command(flags: int) -> int:
    """The flags for the next command, once one command is done."""
    if flags & REPLY_SKIP_NEXT:
        return (flags & ~REPLY_SKIP_NEXT) | REPLY_SKIP
    return flags & ~REPLY_SKIP


def compiled(name: str):
    """The handler of a hot command: the engine parses, runs and answers it
    (engine/net/hot.pxi, the code the connection's fast path runs), and parks
    the client here when it must wait. `name` is the command's table name."""
    kind = HOT_COMMANDS[name]

    def handler(server, session, argv):
        reply = run_hot(kind, server.node, session, argv)
        if type(reply) is tuple:
            return Park(*reply)
        return Raw(reply)
    handler.__name__ = name
    return handler
