"""Splitting a line into arguments the way Disque does (its sdssplitargs).

Used for inline commands (PING typed into telnet) and for disque.conf
lines, which Disque splits with the same rules: blanks separate arguments;
double quotes understand \\n \\r \\t \\b \\a \\xHH and \\<any>; single
quotes only \\'; a quote may start inside a word and the closing quote
must end it. Unbalanced quotes raise UnbalancedQuotes.
"""

from __future__ import annotations


class UnbalancedQuotes(ValueError):
    """A quoted argument that does not end properly."""


_ESCAPES = {ord("n"): b"\n", ord("r"): b"\r", ord("t"): b"\t", ord("b"): b"\b", ord("a"): b"\a"}
_HEX = b"0123456789abcdefABCDEF"
_TOKEN_END = b" \n\r\t"
_BLANKS = b" \t\n\r\v\f"


def _double_quoted(line: bytes, i: int, out: bytearray) -> int:
    """Read after an opening '"'; returns the index just past the closing one."""
    n = len(line)
    while i < n:
        c = line[i]
        if c == 0x5C and i + 3 < n and line[i + 1] == 0x78 \
                and line[i + 2] in _HEX and line[i + 3] in _HEX:
            out.append(int(line[i + 2:i + 4], 16))
            i += 4
        elif c == 0x5C and i + 1 < n:
            out += _ESCAPES.get(line[i + 1], line[i + 1:i + 2])
            i += 2
        elif c == 0x22:
            return _closing_quote(line, i)
        else:
            out.append(c)
            i += 1
    raise UnbalancedQuotes("unbalanced quotes")


def _single_quoted(line: bytes, i: int, out: bytearray) -> int:
    n = len(line)
    while i < n:
        c = line[i]
        if c == 0x5C and i + 1 < n and line[i + 1] == 0x27:
            out.append(0x27)
            i += 2
        elif c == 0x27:
            return _closing_quote(line, i)
        else:
            out.append(c)
            i += 1
    raise UnbalancedQuotes("unbalanced quotes")


def _closing_quote(line: bytes, i: int) -> int:
    # A closing quote must end the token: "foo"bar is refused, as Disque does.
    if i + 1 < len(line) and line[i + 1] not in _BLANKS:
        raise UnbalancedQuotes("closing quote must be followed by a space")
    return i + 1


def split_line(line: bytes) -> list[bytes]:
    """Split a line into arguments (see the module docstring)."""
    args: list[bytes] = []
    i, n = 0, len(line)
    while True:
        while i < n and line[i] in _BLANKS:
            i += 1
        if i >= n:
            return args
        token = bytearray()
        while i < n and line[i] not in _TOKEN_END:
            c = line[i]
            if c in (0x22, 0x27):  # a closing quote also ends the token
                reader = _double_quoted if c == 0x22 else _single_quoted
                i = reader(line, i + 1, token)
                break
            token.append(c)
            i += 1
        args.append(bytes(token))
