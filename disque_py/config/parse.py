"""How configuration text becomes values, and values become text again.

Owns the pieces the directive table (directives.py) is built from: the line splitter
(shell-like quoting, as disque.conf is written), the quoting used when a value
is written back, memory sizes with units, and the value kinds (int, yes/no, enum, memory, string, ...).

Rules kept here:
- A kind parses file arguments (strings) and CONFIG SET values (bytes)
  without side effects; effects such as chdir live in directives.py.
- A value a kind renders for CONFIG REWRITE parses back to the same value.
- Numbers in a file must be whole numbers: Disque's atoi would read "10k" as
  10 and "abc" as 0; such lines are refused instead of silently misread.
- CONFIG SET numbers follow Disque's strtoll rules ("" is 0, "+5" is 5,
  " 5" and "5s" are invalid), so clients see the same replies.
"""

from __future__ import annotations

import re

from disque_py.base.splitargs import UnbalancedQuotes, split_line

INT64_MAX = (1 << 63) - 1
ENCODING, ERRORS = "utf-8", "surrogateescape"  # arbitrary bytes survive a round trip

# Units accepted after a memory size, as Disque reads them (case-insensitive).
MEMORY_UNITS = {b"": 1, b"b": 1, b"k": 1000, b"kb": 1024, b"m": 1000 ** 2,
                b"mb": 1024 ** 2, b"g": 1000 ** 3, b"gb": 1024 ** 3}
# Units CONFIG REWRITE writes, largest first.
_REWRITE_UNITS = ((1024 ** 3, "gb"), (1024 ** 2, "mb"), (1024, "kb"))
_MEMORY = re.compile(rb"(-?)([0-9]*)([a-zA-Z]*)\Z")
_MAX_MEMORY_DIGITS = 127  # Disque's memtoll refuses longer digit runs
_INTEGER = re.compile(r"[+-]?[0-9]+\Z")
_OCTAL = re.compile(r"[0-7]+\Z")
_SET_INTEGER = re.compile(rb"[+-]?[0-9]+\Z")

YES, NO = "yes", "no"
BAD_YES_NO = "argument must be 'yes' or 'no'"
CLIENT_CLASSES = ("normal",)  # Disque 1.0 knows a single client class


class BadValue(ValueError):
    """A value a directive refuses; the message is what the operator sees."""


def decode(raw: bytes) -> str:
    return raw.decode(ENCODING, ERRORS)


def encode(text: str) -> bytes:
    return text.encode(ENCODING, ERRORS)


def ascii_lower(text: str) -> str:
    """Lower case the way strcasecmp compares: ASCII letters only."""
    return decode(encode(text).lower())


# --------------------------------------------------------------------------
# Lines: splitting and quoting


def split_args(line: bytes) -> list[bytes]:
    """A config line's arguments; BadValue on unbalanced quotes."""
    try:
        return split_line(line)
    except UnbalancedQuotes as error:
        raise BadValue(str(error)) from None


_PLAIN = {0x5C: b"\\\\", 0x22: b'\\"', 0x0A: b"\\n", 0x0D: b"\\r",
          0x09: b"\\t", 0x07: b"\\a", 0x08: b"\\b"}
_SAFE_BARE = re.compile(rb"[A-Za-z0-9_./:@%+,=-]+\Z")


def quote(raw: bytes) -> bytes:
    """A double-quoted form of raw that split_args reads back unchanged."""
    out = bytearray(b'"')
    for c in raw:
        if c in _PLAIN:
            out += _PLAIN[c]
        elif 0x20 <= c < 0x7F:
            out.append(c)
        else:
            out += b"\\x%02x" % c
    out.append(0x22)
    return bytes(out)


def bare_or_quoted(raw: bytes) -> bytes:
    """raw itself when it needs no quoting, else its quoted form."""
    return raw if _SAFE_BARE.match(raw) else quote(raw)


# --------------------------------------------------------------------------
# Numbers


def parse_memory(raw: bytes) -> int | None:
    """A byte count as Disque's memtoll reads it (1k=1000, 1kb=1024), or None.

    Like memtoll, missing digits read as 0 ("" and "gb" are 0).
    """
    match = _MEMORY.match(raw)
    if match is None:
        return None
    sign, digits, unit = match.groups()
    multiplier = MEMORY_UNITS.get(unit.lower())
    if multiplier is None or len(digits) > _MAX_MEMORY_DIGITS:
        return None
    value = int(digits or b"0") * multiplier
    value = -value if sign else value
    return value if value <= INT64_MAX else None


def format_memory(value: int) -> str:
    """value in the largest unit that divides it, as CONFIG REWRITE writes it."""
    for size, unit in _REWRITE_UNITS:
        if value and value % size == 0:
            return f"{value // size}{unit}"
    return str(value)


def parse_set_integer(raw: bytes) -> int | None:
    """An integer as CONFIG SET reads it (strtoll, whole string), or None."""
    if not raw:
        return 0
    if not _SET_INTEGER.match(raw):
        return None
    value = int(raw)
    return value if -INT64_MAX - 1 <= value <= INT64_MAX else None


def parse_file_integer(text: str, error: str) -> int:
    if not _INTEGER.match(text):
        raise BadValue(error)
    value = int(text)
    if abs(value) > INT64_MAX:
        raise BadValue(error)
    return value
