"""The command table: every command's name, handler, arity and flags.

Arity follows Disque: N means exactly N arguments (the name included), -N
means at least N. Flags are Disque's letters, shown by COMMAND:

    w  write: may change jobs or queues        r  read-only
    m  may grow memory: refused when full      a  administrative
    l  allowed while loading                   M  not shown to MONITOR
    F  fast: O(1) or O(log N)

Unknown commands, wrong arity, missing AUTH, a full memory (for "m"
commands), a failing AOF (for "w" commands and PING, -MISCONF) and an AOF
still loading (for commands without "l", -LOADING; the loader's own
session excepted) are answered here, once, before any handler runs. A
handler gets (server, session, argv), returns a reply value (see resp.py),
a Park to answer later, or raises a DisqueError. It never touches a socket.
"""

from __future__ import annotations

from typing import Callable

from disque_py.base.errors import (CommandError, DisqueError, LoadingError, MisconfError,
                                   NoAuthError, OutOfMemoryError)
from disque_py.base.replies import (AOF_MISCONF, LOADING_MESSAGE, NOAUTH_MESSAGE, OOM_MESSAGE,
                                    UNKNOWN_COMMAND, WRONG_ARITY)
from disque_py.commands import acks, admin, cluster, deadletter, diagnostics, jobs, queues, waits
from disque_py.engine import CommandCore, HOT_COMMANDS

FLAG_NAMES = (("w", "write"), ("r", "readonly"), ("m", "denyoom"), ("a", "admin"),
              ("l", "loading"), ("M", "skip_monitor"), ("F", "fast"))
IMPLICIT_ACL_CATEGORIES = (("w", "@write"), ("r", "@read"), ("a", "@admin"), ("a", "@dangerous"))


class Command(CommandCore):
    """A table entry. Its arity, hot-command number, disk flag and INFO
    commandstats (calls, seconds) are C fields: the fast path reads them."""

    __slots__ = ("name", "handler", "flags", "denyoom", "monitored", "fast", "while_loading")

    def __init__(self, name: bytes, handler: Callable, arity: int, flags: str) -> None:
        self.name = name
        self.handler = handler
        self.arity = arity
        self.flags = flags
        self.denyoom = "m" in flags
        self.monitored = "M" not in flags
        self.fast = "F" in flags
        self.while_loading = "l" in flags
        # Refused with -MISCONF while the AOF is failing, as in Disque: every
        # write command, and PING, so that health checks see the broken disk.
        self.needs_disk = "w" in flags or handler is admin.ping
        # Compiled in the engine (engine/net/hot.pxi): the fast path runs it.
        self.hot = HOT_COMMANDS.get(name.decode(), 0)
        # INFO commandstats: commands whose handler ran, and their time.
        self.calls = 0
        self.seconds = 0.0

    @property
    def flag_names(self) -> list[str]:
        return [name for letter, name in FLAG_NAMES if letter in self.flags]

    @property
    def acl_categories(self) -> list[str]:
        """The categories Redis 6+ derives from the same flags (COMMAND
        under RESP3, whose clients read a seventh field)."""
        flags = self.flags
        return [category for letters, category in IMPLICIT_ACL_CATEGORIES
                if any(letter in flags for letter in letters)] + \
            (["@fast"] if self.fast else ["@slow"])


TABLE = (
    # server
    ("auth", admin.auth, 2, "rlF"),
    ("ping", admin.ping, -1, "rF"),
    ("info", admin.info, -1, "rl"),
    ("shutdown", admin.shutdown, -1, "arl"),
    ("monitor", admin.monitor, 1, "ar"),
    ("debug", admin.debug, -2, "a"),
    ("config", admin.config, -2, "ar"),
    ("cluster", cluster.cluster, -2, "ar"),
    ("client", admin.client, -2, "ar"),
    ("slowlog", diagnostics.slowlog, -2, "r"),
    ("time", admin.time_, 1, "rF"),
    ("command", admin.command, 0, "rl"),
    ("latency", diagnostics.latency, -2, "arl"),
    ("hello", admin.hello, -1, "rF"),
    # jobs
    ("addjob", jobs.addjob, -4, "wmF"),
    ("getjob", queues.getjob, -2, "wF"),
    ("ackjob", acks.ackjob, -1, "wF"),
    ("fastack", acks.fastack, -1, "wF"),
    ("deljob", jobs.deljob, -1, "wF"),
    ("show", jobs.show, 2, "rF"),
    # AOF
    ("loadjob", jobs.loadjob, 3, "w"),
    ("bgrewriteaof", admin.bgrewriteaof, 1, "ar"),
    # queues
    ("qlen", queues.qlen, 2, "rF"),
    ("qpeek", queues.qpeek, 3, "r"),
    ("qstat", queues.qstat, 2, "rF"),
    ("qscan", queues.qscan, -1, "r"),
    ("jscan", jobs.jscan, -1, "r"),
    ("enqueue", queues.enqueue, -1, "mwF"),
    ("nack", queues.nack, -1, "mwF"),
    ("dequeue", queues.dequeue, -1, "wF"),
    ("working", queues.working, 2, "wF"),
    ("pause", queues.pause, -3, "rF"),
    # beyond Disque: waiting for completion
    ("waitjob", waits.waitjob, -2, "rF"),
    ("qwait", waits.qwait, -2, "r"),
    # beyond Disque: dead letters
    ("qrequeue", deadletter.qrequeue, -2, "wF"),
)


def _disk_refusal(server) -> MisconfError | None:
    """-MISCONF while the AOF cannot take records (a full or failing disk)."""
    persistence = server.persistence
    if persistence is not None and not persistence.accepting:
        return MisconfError(AOF_MISCONF % persistence.writer.last_error)
    return None




def _refused(session, argv: list[bytes], error: DisqueError) -> DisqueError:
    """A command answered before its handler ran: marked so that its timing
    is not logged (Disque times only the commands it calls)."""
    session.refused = argv
    return error


# Commands a client may send before AUTH: AUTH itself, and HELLO, which can
# carry the password (HELLO 3 AUTH user pass) and checks auth on its own.
_BEFORE_AUTH = (admin.auth, admin.hello)


class CommandTable:
    """The commands one server answers (rename-command applied)."""

    def __init__(self, renames: list[tuple[str, str]] = ()) -> None:
        commands = {name.encode(): Command(name.encode(), handler, arity, flags)
                    for name, handler, arity, flags in TABLE}
        for old, new in renames:
            command = commands.pop(old.lower().encode(), None)
            if command is not None and new:
                commands[new.lower().encode()] = command
        self.commands = commands
        # Clients send upper or lower case; both are looked up without lower().
        self._by_name = dict(commands)
        self._by_name.update((name.upper(), cmd) for name, cmd in commands.items())

    def hot_entries(self) -> list[tuple[bytes, Command]]:
        """(name, command) of the compiled commands, under their names here."""
        return [(name, command) for name, command in self.commands.items() if command.hot]

    def lookup(self, name: bytes) -> Command | None:
        command = self._by_name.get(name)
        if command is None:
            command = self._by_name.get(name.lower())
        return command

    def reset_stats(self) -> None:
        """CONFIG RESETSTAT: commandstats start again from zero."""
        for command in self.commands.values():
            command.calls = 0
            command.seconds = 0.0

    def overlaps_parked(self, name: bytes) -> bool:
        """True for ADDJOB: it may run while the same client's earlier
        ADDJOBs wait for their copies (see Park)."""
        command = self.lookup(name)
        return command is not None and command.handler is jobs.addjob

    def dispatch(self, server, session, argv: list[bytes]):
        """Run one command; returns its reply value (or a Park)."""
        name = argv[0]
        command = self._by_name.get(name)
        if command is None:
            command = self._by_name.get(name.lower())
            if command is None:
                return _refused(session, argv, CommandError(
                    UNKNOWN_COMMAND % name.decode("latin-1")))
        arity = command.arity
        argc = len(argv)
        if (arity > 0 and arity != argc) or argc < -arity:
            return _refused(session, argv, CommandError(
                WRONG_ARITY % command.name.decode()))
        if server.requirepass and not session.authenticated \
                and command.handler not in _BEFORE_AUTH:
            return _refused(session, argv, NoAuthError(NOAUTH_MESSAGE))
        node = server.node
        # Above 95% of maxmemory every command first tries to free memory
        # (Disque's freeMemoryIfNeeded); those that grow it need success.
        memory_fits = node.used_memory <= node.memory_evict_at or server.free_memory()
        if command.denyoom and not memory_fits:
            return _refused(session, argv, OutOfMemoryError(OOM_MESSAGE))
        if command.needs_disk:
            refused = _disk_refusal(server)
            if refused is not None:
                return _refused(session, argv, refused)
        if server.loading and not command.while_loading and not session.aof_loader:
            return _refused(session, argv, LoadingError(LOADING_MESSAGE))
        session.last_command = command
        if server.monitors and command.monitored:
            server.feed_monitors(session, argv)
        try:
            return command.handler(server, session, argv)
        except DisqueError as error:
            return error.as_reply()
