"""Reading a command's arguments: numbers the way Disque reads them, options
with a cursor that refuses leftovers.

Disque parses integers with strtoll and rejects leading spaces and trailing
garbage: "+5" and "007" are numbers, " 5" and "5s" are not, and "" reads as
0. It reads the argument as a C string, so a NUL ends it: "12\0x" is 12,
"\0..." is 0. parse_int keeps those rules, so a client gets the same error for the
same input. Job IDs are validated in bulk before anything is changed, so a
command with one bad ID does nothing at all.
"""

from __future__ import annotations

import re

# parse_int is strtoll's rule, compiled: the hot commands read numbers with it too.
from disque_py.engine import is_valid_id, parse_int
from disque_py.base.errors import BadIdError, CommandError
from disque_py.base.replies import (BADID_MESSAGE, INVALID_CURSOR, NOT_INTEGER, SYNTAX_ERROR,
                                    TIMEOUT_NEGATIVE, TIMEOUT_NOT_INTEGER)

_STRTOUL = re.compile(rb"(?:[+-]?[0-9]+)?\Z")
UINT64_LIMIT = 1 << 64


def c_string(value: bytes) -> bytes:
    """What C sees of an argument: the bytes before the first NUL."""
    nul = value.find(b"\0")
    return value if nul < 0 else value[:nul]


def int_or_error(value: bytes, message: str = NOT_INTEGER) -> int:
    number = parse_int(value)
    if number is None:
        raise CommandError(message)
    return number


def parse_timeout(value: bytes) -> int:
    """A non-negative timeout in milliseconds (0: none)."""
    timeout = parse_int(value)
    if timeout is None:
        raise CommandError(TIMEOUT_NOT_INTEGER)
    if timeout < 0:
        raise CommandError(TIMEOUT_NEGATIVE)
    return timeout


def parse_cursor(value: bytes) -> int:
    """A QSCAN/JSCAN cursor as strtoul reads it; a negative one wraps, as in C."""
    value = c_string(value)
    if not _STRTOUL.match(value):
        raise CommandError(INVALID_CURSOR)
    if not value:
        return 0
    number = int(value)
    if abs(number) >= UINT64_LIMIT:
        raise CommandError(INVALID_CURSOR)
    return number % UINT64_LIMIT


def cursor_once(args: "ArgReader", current: int | None) -> int:
    """The argument just read as an option is the cursor; it may appear once."""
    if current is not None:
        raise CommandError(SYNTAX_ERROR)
    args.pos -= 1
    return parse_cursor(args.raw())


SCAN_DEFAULT_COUNT = 100


def parse_scan_options(args: "ArgReader", options: dict) -> tuple[int, bool, int]:
    """QSCAN/JSCAN arguments: (count, busyloop, cursor).

    `options` maps each command's own valued options to a function taking
    the raw value. Anything unknown is read as the cursor, which may sit
    anywhere, once.
    """
    count, busyloop, cursor = SCAN_DEFAULT_COUNT, False, None
    while args:
        option = args.option()
        if option == b"count" and args.has_value:
            count = int_or_error(args.raw())
        elif option == b"busyloop":
            busyloop = True
        elif option in options and args.has_value:
            options[option](args.raw())
        else:
            cursor = cursor_once(args, cursor)
    return count, busyloop, cursor or 0


def check_job_ids(ids: list[bytes]) -> None:
    """Raise BADID unless every ID is well formed."""
    for job_id in ids:
        if not is_valid_id(job_id):
            raise BadIdError(BADID_MESSAGE)


def job_ids(argv: list[bytes]) -> list[bytes]:
    """The job IDs after the command name, all validated before any is used."""
    ids = argv[1:]
    check_job_ids(ids)
    return ids


class ArgReader:
    """A cursor over the options that follow a command's fixed arguments."""

    __slots__ = ("argv", "pos")

    def __init__(self, argv: list[bytes], start: int) -> None:
        self.argv = argv
        self.pos = start

    def __bool__(self) -> bool:
        return self.pos < len(self.argv)

    @property
    def has_value(self) -> bool:
        """True if another argument follows (an option may take it as value)."""
        return self.pos < len(self.argv)

    def option(self) -> bytes:
        """The next argument, lowercased, consumed."""
        arg = self.argv[self.pos]
        self.pos += 1
        return arg.lower()

    def raw(self) -> bytes:
        """The next argument, as sent, consumed."""
        arg = self.argv[self.pos]
        self.pos += 1
        return arg

    def rest(self) -> list[bytes]:
        """Every remaining argument, consumed."""
        rest = self.argv[self.pos:]
        self.pos = len(self.argv)
        return rest

    def int_value(self, message: str = NOT_INTEGER) -> int:
        return int_or_error(self.raw(), message)

    def syntax_error(self) -> CommandError:
        return CommandError(SYNTAX_ERROR)
