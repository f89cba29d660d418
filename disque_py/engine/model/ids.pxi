# Job IDs for one node.
#
# An ID is 40 characters: "D-", the first 8 hex of the creating node's ID,
# "-", 24 base64 characters (144 random bits), "-", and the TTL in minutes
# as 4 hex digits, even for at-most-once jobs (retry 0) and odd otherwise,
# so any node can tell the delivery guarantee and the expire time of an ID
# it has never seen.
#
# The random characters come from the operating system's CSPRNG
# (os.urandom), IDS_PER_REFILL IDs' worth at a time, one byte per
# character: its low 6 bits pick the character of the base64 alphabet. A
# generator given a seed (the simulation, tests) draws them instead from
# SHAKE-256 in counter mode over that seed, so its IDs replay exactly.
# Making an ID is three copies into the job's inline ID: prefix, random
# part, TTL suffix.

import hashlib
import os

cdef enum:
    IDS_PER_REFILL = 256
    RANDOM_ID_CHARS = 24
    ID_PREFIX_LEN = 11
    ID_SUFFIX_LEN = 5
    TTL_MINUTES_MAX = 0xFFFF

cdef bytes _HEX_DIGITS = b"0123456789abcdef"
cdef bytes _BASE64_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


@cython.final
cdef class IdGenerator:

    def __init__(self, bytes node_id, bytes seed=None):
        if PyBytes_GET_SIZE(node_id) < 8:
            raise ValueError("a node ID has at least 8 characters")
        self._prefix = b"D-" + node_id[:8] + b"-"
        self._seed = seed
        self._counter = 0
        self._left = 0
        self._suffix_key = -1

    cdef void _refill(self) except *:
        cdef Py_ssize_t i, size = RANDOM_ID_CHARS * IDS_PER_REFILL
        cdef const char* alphabet = PyBytes_AS_STRING(_BASE64_ALPHABET)
        cdef char* chars
        if self._seed is None:
            random_bytes = os.urandom(size)
        else:
            self._counter += 1
            random_bytes = hashlib.shake_256(
                self._seed + self._counter.to_bytes(8, "little")).digest(size)
        self._spare = PyBytes_FromStringAndSize(NULL, size)
        chars = PyBytes_AS_STRING(self._spare)
        for i in range(size):
            chars[i] = alphabet[(<unsigned char*>PyBytes_AS_STRING(random_bytes))[i] & 63]
        self._left = IDS_PER_REFILL

    cdef void fill(self, char* out, int64_t ttl_s, int64_t retry_s) except *:
        """Write a new ID into out[0:40]."""
        cdef int64_t minutes, key
        cdef const char* digits
        if self._left == 0:
            self._refill()
        memcpy(out, PyBytes_AS_STRING(self._prefix), ID_PREFIX_LEN)
        memcpy(out + ID_PREFIX_LEN,
               PyBytes_AS_STRING(self._spare) + (IDS_PER_REFILL - self._left) * RANDOM_ID_CHARS,
               RANDOM_ID_CHARS)
        self._left -= 1
        key = ttl_s * 2 + (retry_s > 0)
        if key != self._suffix_key:
            minutes = ttl_s // 60
            if minutes > TTL_MINUTES_MAX:
                minutes = TTL_MINUTES_MAX
            minutes = (minutes | 1) if retry_s > 0 else (minutes & ~1)
            digits = PyBytes_AS_STRING(_HEX_DIGITS)
            self._suffix[0] = 45        # '-'
            self._suffix[1] = digits[(minutes >> 12) & 15]
            self._suffix[2] = digits[(minutes >> 8) & 15]
            self._suffix[3] = digits[(minutes >> 4) & 15]
            self._suffix[4] = digits[minutes & 15]
            self._suffix_key = key
        memcpy(out + ID_PREFIX_LEN + RANDOM_ID_CHARS, self._suffix, ID_SUFFIX_LEN)

    def next_id(self, int64_t ttl_s, int64_t retry_s):
        """A new ID as bytes."""
        cdef char out[JOB_ID_LEN]
        self.fill(out, ttl_s, retry_s)
        return PyBytes_FromStringAndSize(out, JOB_ID_LEN)
