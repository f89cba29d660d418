"""The kinds of configuration values: how each is parsed, shown and written.

One Kind instance per directive (in config.DIRECTIVES) carries that
directive's validation rules; loading a file, CONFIG SET, CONFIG GET and
CONFIG REWRITE all go through it, so a value is checked the same way
wherever it comes from.
"""

from __future__ import annotations

import os
from typing import Any, NamedTuple

from disque_py.config.parse import (_OCTAL, BAD_YES_NO, CLIENT_CLASSES, NO, YES, BadValue,
                                    ascii_lower, bare_or_quoted, decode, encode, format_memory,
                                    parse_file_integer, parse_memory, parse_set_integer, quote)

def _not_a_number(text: str) -> str:
    return f"Invalid numeric argument '{text}'"


class Kind:
    """How one directive's value is read, shown and written back.

    parse: file/command-line arguments -> value (BadValue with the message
    the operator sees). parse_set: a CONFIG SET value -> value (BadValue,
    whose message is replaced by Disque's generic one). show: the CONFIG GET
    text. render: the arguments CONFIG REWRITE writes, or None for "leave the
    directive out of the file".
    """

    min_args, max_args = 1, 1   # arguments after the name; max None is unbounded
    keep_original = True   # rewrite may keep a line that already says the same value
    always_write = False   # rewrite writes it even when at its default

    def parse(self, args: list[str]) -> Any:
        raise NotImplementedError

    def parse_set(self, raw: bytes, current: Any) -> Any:
        raise BadValue("")

    def merge(self, old: Any, new: Any) -> Any:
        """The value after one more line of this directive (usually the last wins)."""
        return new

    def show(self, value: Any) -> bytes:
        return encode(str(value))

    def render(self, value: Any) -> list[bytes] | None:
        return [self.show(value)]

    def describe(self, value: Any) -> str:
        """value as it would be written in disque.conf, for documentation."""
        rendered = self.render(value)
        return "(none)" if rendered is None else decode(b" ".join(rendered))


class Int(Kind):

    def __init__(self, lo: int | None = None, hi: int | None = None, error: str | None = None,
                 clamp: tuple[int, int] | None = None) -> None:
        self.lo, self.hi, self.error, self.clamp = lo, hi, error, clamp

    def _check(self, value: int) -> int | None:
        if (self.lo is not None and value < self.lo) or (self.hi is not None and value > self.hi):
            return None
        if self.clamp:
            value = min(max(value, self.clamp[0]), self.clamp[1])
        return value

    def parse(self, args: list[str]) -> int:
        error = self.error or _not_a_number(args[0])
        value = self._check(parse_file_integer(args[0], error))
        if value is None:
            raise BadValue(error)
        return value

    def parse_set(self, raw: bytes, current: Any) -> int:
        value = parse_set_integer(raw)
        if value is None or value < 0:  # CONFIG SET never takes a negative number
            raise BadValue("")
        value = self._check(value)
        if value is None:
            raise BadValue("")
        return value


class KeepAlive(Int):
    """tcp-keepalive: seconds in the file, but yes/no for CONFIG GET and SET,
    as Disque 1.0 has it (SET yes means 1 second)."""

    def parse_set(self, raw: bytes, current: Any) -> int:
        return int(Bool().parse_set(raw, current))

    def show(self, value: int) -> bytes:
        return b"yes" if value else b"no"

    def render(self, value: int) -> list[bytes]:
        return [b"%d" % value]


class Bool(Kind):

    def parse(self, args: list[str]) -> bool:
        word = ascii_lower(args[0])
        if word not in (YES, NO):
            raise BadValue(BAD_YES_NO)
        return word == YES

    def parse_set(self, raw: bytes, current: Any) -> bool:
        return self.parse([decode(raw)])

    def show(self, value: bool) -> bytes:
        return b"yes" if value else b"no"


class Enum(Kind):
    def __init__(self, choices: tuple[str, ...], error: str) -> None:
        self.choices, self.error = choices, error

    def parse(self, args: list[str]) -> str:
        word = ascii_lower(args[0])
        if word not in self.choices:
            raise BadValue(self.error)
        return word

    def parse_set(self, raw: bytes, current: Any) -> str:
        return self.parse([decode(raw)])


class Memory(Kind):
    """A byte count; k/m/g are powers of 1000, kb/mb/gb powers of 1024."""


    def __init__(self, lo: int = 0, error: str | None = None, set_units: bool = True) -> None:
        self.lo, self.error, self.set_units = lo, error, set_units

    def parse(self, args: list[str]) -> int:
        value = parse_memory(encode(args[0]))
        if value is None or value < self.lo:
            raise BadValue(self.error or f"Invalid memory size '{args[0]}'")
        return value

    def parse_set(self, raw: bytes, current: Any) -> int:
        # Disque reads some sizes with units on CONFIG SET and some as plain numbers.
        value = parse_memory(raw) if self.set_units else parse_set_integer(raw)
        if value is None or value < max(self.lo, 0):
            raise BadValue("")
        return value

    def render(self, value: int) -> list[bytes]:
        return [format_memory(value).encode()]


class Str(Kind):

    def __init__(self, optional: bool = False, maxlen: int | None = None,
                 basename: bool = False, error: str = "") -> None:
        self.optional, self.maxlen, self.basename, self.error = optional, maxlen, basename, error

    def parse(self, args: list[str]) -> str | None:
        text = args[0]
        if self.maxlen is not None and len(encode(text)) > self.maxlen:
            raise BadValue(self.error)
        if self.basename and ("/" in text or "\\" in text):
            raise BadValue(self.error)
        return None if self.optional and not text else text

    def parse_set(self, raw: bytes, current: Any) -> str | None:
        return self.parse([decode(raw)])

    def show(self, value: str | None) -> bytes:
        return encode(value or "")

    def render(self, value: str | None) -> list[bytes] | None:
        return None if value is None else [quote(encode(value))]


class Octal(Kind):

    def __init__(self, hi: int, error: str) -> None:
        self.hi, self.error = hi, error

    def parse(self, args: list[str]) -> int:
        if not _OCTAL.match(args[0]) or int(args[0], 8) > self.hi:
            raise BadValue(self.error)
        return int(args[0], 8)

    def show(self, value: int) -> bytes:
        return b"%o" % value


class Words(Kind):
    """Several words on one line (bind); each new line replaces the list."""

    max_args = None  # more than `most` gets its own message, not the arity one

    def __init__(self, most: int, error: str) -> None:
        self.most, self.error = most, error

    def parse(self, args: list[str]) -> list[str]:
        if len(args) > self.most:
            raise BadValue(self.error)
        return list(args)

    def show(self, value: list[str]) -> bytes:
        return b" ".join(encode(word) for word in value)

    def render(self, value: list[str]) -> list[bytes] | None:
        return [bare_or_quoted(encode(word)) for word in value] or None


class Dir(Str):
    """The working directory: shown and written as the absolute cwd."""

    keep_original = False
    always_write = True

    def show(self, value: str) -> bytes:
        try:
            return encode(os.getcwd())
        except OSError:
            return b""

    def render(self, value: str) -> list[bytes]:
        try:
            return [quote(encode(os.getcwd()))]
        except OSError:
            return [quote(encode(value))]

    def describe(self, value: str) -> str:
        return value


class BufferLimit(NamedTuple):
    """client-output-buffer-limit for the 'normal' class."""

    hard: int
    soft: int
    seconds: int


class OutputBufferLimit(Kind):
    min_args = max_args = 4

    def parse(self, args: list[str]) -> BufferLimit:
        if ascii_lower(args[0]) not in CLIENT_CLASSES:
            raise BadValue("Unrecognized client limit class")
        hard, soft = (Memory().parse([size]) for size in args[1:3])
        seconds = parse_file_integer(args[3], _not_a_number(args[3]))
        if seconds < 0:
            raise BadValue("Negative number of seconds in soft limit is invalid")
        return BufferLimit(hard, soft, seconds)

    def parse_set(self, raw: bytes, current: BufferLimit) -> BufferLimit:
        # "<class> <hard> <soft> <seconds>" repeated; all checked before any is taken.
        words = raw.split(b" ") if raw else []
        if len(words) % 4:
            raise BadValue("")
        value = current
        for i in range(0, len(words), 4):
            if words[i].lower().decode("latin-1") not in CLIENT_CLASSES:
                raise BadValue("")
            numbers = [parse_set_integer(word) for word in words[i + 1:i + 4]]
            if any(n is None or n < 0 for n in numbers):
                raise BadValue("")
            value = BufferLimit(*numbers)
        return value

    def show(self, value: BufferLimit) -> bytes:
        return b"normal %d %d %d" % value

    def render(self, value: BufferLimit) -> list[bytes]:
        return [b"normal", format_memory(value.hard).encode(),
                format_memory(value.soft).encode(), b"%d" % value.seconds]


class Appended(Kind):
    """A directive each line of which adds to a list (include, rename-command)."""


    def __init__(self, nargs: int, lower: bool = False) -> None:
        self.min_args = self.max_args = nargs
        self.lower = lower

    def parse(self, args: list[str]) -> Any:
        words = [ascii_lower(word) for word in args] if self.lower else list(args)
        return words[0] if len(words) == 1 else tuple(words)

    def merge(self, old: list, new: Any) -> list:
        return [*old, new]


class TlsProtocols(Kind):
    """tls-protocols "TLSv1.2 TLSv1.3": TLS versions, as Redis 6 names them
    (any case), written as one quoted argument as Redis writes it; several
    arguments are read as one list too. The versions must form a range
    (OpenSSL sets a minimum and a maximum, not a set)."""

    max_args = None
    VERSIONS = ("TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3")   # oldest first

    def parse(self, args: list[str]) -> tuple[str, ...]:
        by_lower = {name.lower(): name for name in self.VERSIONS}
        words = " ".join(args).split()
        unknown = [word for word in words if word.lower() not in by_lower]
        if not words or unknown:
            what = f"Unknown TLS protocol '{unknown[0]}'" if unknown else "No TLS protocol"
            raise BadValue(f"{what}: use one or more of {', '.join(self.VERSIONS)}")
        chosen = sorted({self.VERSIONS.index(by_lower[word.lower()]) for word in words})
        if chosen[-1] - chosen[0] + 1 != len(chosen):
            raise BadValue("tls-protocols must be consecutive versions "
                           "(e.g. \"TLSv1.2 TLSv1.3\")")
        return tuple(self.VERSIONS[index] for index in chosen)

    def show(self, value: tuple[str, ...]) -> bytes:
        return encode(" ".join(value))

    def render(self, value: tuple[str, ...]) -> list[bytes]:
        return [quote(self.show(value))]
