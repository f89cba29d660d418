"""What a power cut or a failing disk leaves of a node's files: the plans, and applying them.

Pure planning (a seeded random generator in, a plan out, so that unit tests
check every choice) and one small function that carries a plan out on a
file. The kinds in disk.py decide when; this module decides what:

  power cut   the AOF cut to the offset the node last reported durable
              (persistence/durable_report.py), and perhaps a torn tail past
              it: a prefix of what the node had written after that offset
              (sectors that reached the disk; a record cut short), or zero
              bytes (the reserved space the writer had allocated), or, more
              rarely, garbage (stale blocks a filesystem may show). With no
              report for the file now on disk (the node was killed between
              a rewrite's rename and its directory fsync) the file is left
              whole: which of the two files a real disk would show is not
              known.
  damage      one file of a node that is down (its AOF or nodes.conf): a
              truncation at a random offset of its data, or one bit flipped
              in its data (in the AOF, now and then in the reserved space
              past it: a flipped bit in free space is garbage after the end).

Rules kept: a plan never reaches past the file it was planned for; a plan
says what it did in one line (the run's fault record).
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass

from disque_py.persistence import aof_format

TORN_TAIL_PROBABILITY = 0.5
TORN_KINDS = (("partial", 0.6), ("zeros", 0.3), ("garbage", 0.1))
TORN_MAX_BYTES = 512
ZERO_TAIL_BYTES = 4096
FLIP_IN_RESERVED_PROBABILITY = 0.1
TRUNCATE, FLIP = "truncate", "flip"


@dataclass(frozen=True)
class Damage:
    """A file cut to `keep` bytes and then `tail` appended; or one bit flipped."""

    keep: int | None            # None: no cut
    tail: bytes = b""
    flip_at: int | None = None  # byte offset of the flipped bit
    flip_bit: int = 0
    what: str = ""

    def apply(self, path: str) -> None:
        with open(path, "r+b") as handle:
            if self.flip_at is not None:
                handle.seek(self.flip_at)
                byte = handle.read(1)[0]
                handle.seek(self.flip_at)
                handle.write(bytes([byte ^ (1 << self.flip_bit)]))
            if self.keep is not None:
                handle.truncate(self.keep)
                handle.seek(self.keep)
                handle.write(self.tail)


def power_cut(rng: random.Random, data: bytes, durable: int) -> Damage:
    """The AOF `data` (its written part) after a power cut, `durable` bytes
    of it on disk for sure."""
    durable = min(durable, len(data))
    lost = len(data) - durable
    if rng.random() >= TORN_TAIL_PROBABILITY:
        return Damage(durable, what=f"cut to {durable} durable bytes ({lost} lost)")
    kind = rng.choices([k for k, _ in TORN_KINDS], weights=[w for _, w in TORN_KINDS])[0]
    if kind == "partial" and lost:
        size = rng.randint(1, min(lost, TORN_MAX_BYTES))
        tail = data[durable:durable + size]
    elif kind == "garbage":
        tail = bytes(rng.randrange(256) for _ in range(rng.randint(1, TORN_MAX_BYTES)))
    else:
        kind, tail = "zeros", bytes(ZERO_TAIL_BYTES)
    return Damage(durable, tail, what=f"cut to {durable} durable bytes ({lost} lost), "
                                      f"torn tail: {len(tail)} bytes of {kind}")


def aof_damage(rng: random.Random, data: bytes) -> Damage:
    """A truncation or a bit flip in an AOF (`data`: the whole file,
    reserved space included)."""
    written = aof_format.data_end(data)
    if rng.random() < 0.5:
        keep = rng.randrange(written) if written else 0
        return Damage(keep, what=f"AOF truncated to {keep} of {written} bytes")
    if written < len(data) and (not written or rng.random() < FLIP_IN_RESERVED_PROBABILITY):
        at = rng.randrange(written, len(data))
        where = "reserved space"
    elif written:
        at = rng.randrange(written)
        where = "data"
    else:
        return Damage(None, what="AOF empty: nothing to damage")
    bit = rng.randrange(8)
    return Damage(None, flip_at=at, flip_bit=bit,
                  what=f"AOF bit {bit} flipped at byte {at} ({where}, {written} bytes of data)")


def text_damage(rng: random.Random, data: bytes, name: str) -> Damage:
    """A truncation or a bit flip in a small text file (nodes.conf)."""
    if not data:
        return Damage(None, what=f"{name} empty: nothing to damage")
    if rng.random() < 0.5:
        keep = rng.randrange(len(data))
        return Damage(keep, what=f"{name} truncated to {keep} of {len(data)} bytes")
    at, bit = rng.randrange(len(data)), rng.randrange(8)
    return Damage(None, flip_at=at, flip_bit=bit, what=f"{name} bit {bit} flipped at byte {at}")


def read_file(path: str) -> bytes | None:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def inode(path: str) -> int | None:
    try:
        return os.stat(path).st_ino
    except FileNotFoundError:
        return None
