# Job IDs for one node: a hash, in counter mode, of a start-up seed.
#
# An ID is 40 characters: "D-", the first 8 hex of the creating node's ID,
# "-", 24 base64 characters (144 pseudo-random bits), "-", and the TTL in
# minutes as 4 hex digits, even for at-most-once jobs (retry 0) and odd
# otherwise, so any node can tell the delivery guarantee and the expire
# time of an ID it has never seen.
#
# Each refill hashes (seed || counter) with SHAKE-256 into the random bits
# of IDS_PER_REFILL IDs at once and base64-encodes them in one call (18
# bytes are exactly 24 characters: no padding inside). Making an ID is then
# three copies into the job's inline ID: prefix, random part, TTL suffix.

import binascii
import hashlib

cdef enum:
    IDS_PER_REFILL = 256
    RANDOM_ID_BYTES = 18
    RANDOM_ID_CHARS = 24
    ID_PREFIX_LEN = 11
    ID_SUFFIX_LEN = 5
    TTL_MINUTES_MAX = 0xFFFF

cdef bytes _HEX_DIGITS = b"0123456789abcdef"


@cython.final
cdef class IdGenerator:

    def __init__(self, bytes node_id, bytes seed):
        if PyBytes_GET_SIZE(node_id) < 8:
            raise ValueError("a node ID has at least 8 characters")
        self._prefix = b"D-" + node_id[:8] + b"-"
        self._seed = seed
        self._counter = 0
        self._left = 0
        self._suffix_key = -1

    cdef void _refill(self) except *:
        self._counter += 1
        digest = hashlib.shake_256(self._seed + self._counter.to_bytes(8, "little")).digest(
            RANDOM_ID_BYTES * IDS_PER_REFILL)
        self._spare = binascii.b2a_base64(digest, newline=False)
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
