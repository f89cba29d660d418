"""Disque's glob (its stringmatchlen): * ? [abc] [^a] [a-z] and \\x escapes.

CONFIG GET matches directive names with it, and GETJOB PATTERN queue
names. A pattern is compiled once into tokens (cached), and matching runs
in O(len(pattern) * len(string)): a star only ever backtracks to the most
recent star, so a hostile pattern cannot blow up.
"""

from __future__ import annotations

import functools

_STAR = None
_ANY = frozenset(range(256))


def _lower(byte: int) -> int:
    return byte + 32 if 0x41 <= byte <= 0x5A else byte


def _fold(byte: int, nocase: bool) -> tuple[int, ...]:
    """The bytes that match byte: itself, and its other ASCII case if nocase."""
    if nocase and (0x41 <= byte <= 0x5A or 0x61 <= byte <= 0x7A):
        return (byte | 0x20, byte & ~0x20)
    return (byte,)


def _range(low: int, high: int, nocase: bool) -> set[int]:
    low, high = sorted((low, high))
    if not nocase:
        return set(range(low, high + 1))
    # Disque orders the ends first and lowers them after, so [Z-a] is empty.
    low, high = _lower(low), _lower(high)
    return {b for b in _ANY if low <= _lower(b) <= high}


def _read_class(pattern: bytes, i: int, nocase: bool) -> tuple[frozenset[int], int]:
    """The bytes matched by the class whose body starts at i, and the index
    after it. Mirrors Disque's scan: "[a-]x]" is the range a..] plus x, and an
    unclosed class runs to the end of the pattern."""
    n = len(pattern)
    negate = i < n and pattern[i] == 0x5E
    i += negate
    accepted: set[int] = set()
    while i < n and pattern[i] != 0x5D:
        if pattern[i] == 0x5C:  # escaped: that exact byte, never case-folded
            if i + 1 < n:
                accepted.add(pattern[i + 1])
            i += 2
        elif i + 2 < n and pattern[i + 1] == 0x2D:
            accepted |= _range(pattern[i], pattern[i + 2], nocase)
            i += 3
        else:
            accepted.update(_fold(pattern[i], nocase))
            i += 1
    matched = _ANY - accepted if negate else frozenset(accepted)
    return matched, min(i + 1, n)


@functools.lru_cache(maxsize=128)
def _compile(pattern: bytes, nocase: bool) -> tuple:
    """The pattern as a sequence of tokens: _STAR, or a set of matching bytes."""
    tokens: list = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == 0x2A:
            if not tokens or tokens[-1] is not _STAR:
                tokens.append(_STAR)
            i += 1
        elif c == 0x3F:
            tokens.append(_ANY)
            i += 1
        elif c == 0x5B:
            matched, i = _read_class(pattern, i + 1, nocase)
            tokens.append(matched)
        else:
            if c == 0x5C and i + 1 < len(pattern):
                i += 1
            tokens.append(frozenset(_fold(pattern[i], nocase)))
            i += 1
    return tuple(tokens)


def glob_match(pattern: bytes, string: bytes, nocase: bool = False) -> bool:
    """Whether `string` matches `pattern` (case-folded with nocase)."""
    tokens = _compile(pattern, nocase)
    p = s = 0
    star, mark = -1, 0
    while s < len(string):
        if p < len(tokens) and tokens[p] is _STAR:
            star, mark = p, s
            p += 1
        elif p < len(tokens) and string[s] in tokens[p]:
            p += 1
            s += 1
        elif star >= 0:
            p, mark = star + 1, mark + 1
            s = mark
        else:
            return False
    while p < len(tokens) and tokens[p] is _STAR:
        p += 1
    return p == len(tokens)
