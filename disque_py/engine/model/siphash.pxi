# The keyed hash of the engine's tables (job IDs, DEDUP keys): SipHash-1-3,
# the function CPython hashes bytes with, keyed per process from
# os.urandom, so a client that chooses IDs or keys cannot aim them at one
# chain or probe run. Inline here: CPython's, through _Py_HashBytes, cost
# ~40 instructions more per hash (callgrind), a sixth of a job ID's.
#
# Rules it keeps: the result depends on the bytes and this process's key
# only, so it never leaves the process (not in the AOF, not on the bus);
# the output is SipHash-1-3's (the unit tests check it against CPython's
# with PYTHONHASHSEED=0, which zeroes CPython's key).

from os import urandom

cdef uint64_t _sip_k0, _sip_k1


cdef int _key_halves(bytes key, uint64_t* k0, uint64_t* k1) except -1:
    if PyBytes_GET_SIZE(key) != 16:
        raise ValueError("a SipHash key is 16 bytes")
    memcpy(k0, PyBytes_AS_STRING(key), 8)
    memcpy(k1, PyBytes_AS_STRING(key) + 8, 8)
    return 0


_key_halves(urandom(16), &_sip_k0, &_sip_k1)


cdef extern from *:
    """
    /* 8 bytes as a little-endian word, on any host (SipHash reads words so). */
    static CYTHON_INLINE uint64_t disque_load_le64(const char *p) {
        uint64_t word;
        memcpy(&word, p, 8);
    #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        word = __builtin_bswap64(word);
    #endif
        return word;
    }
    """
    uint64_t disque_load_le64(const char* p) noexcept nogil


cdef inline uint64_t _rotl(uint64_t x, int bits) noexcept:
    return (x << bits) | (x >> (64 - bits))


cdef inline void _sip_round(uint64_t* v) noexcept:
    v[0] += v[1]
    v[1] = _rotl(v[1], 13) ^ v[0]
    v[0] = _rotl(v[0], 32)
    v[2] += v[3]
    v[3] = _rotl(v[3], 16) ^ v[2]
    v[0] += v[3]
    v[3] = _rotl(v[3], 21) ^ v[0]
    v[2] += v[1]
    v[1] = _rotl(v[1], 17) ^ v[2]
    v[2] = _rotl(v[2], 32)


cdef inline void _sip_absorb(uint64_t* v, uint64_t word) noexcept:
    v[3] ^= word
    _sip_round(v)
    v[0] ^= word


cdef inline uint64_t keyed_hash(const char* data, Py_ssize_t size) noexcept:
    """The bytes' hash with this process's key."""
    return siphash13(_sip_k0, _sip_k1, data, size)


cdef inline uint64_t siphash13(uint64_t k0, uint64_t k1, const char* data,
                               Py_ssize_t size) noexcept:
    """SipHash-1-3 of the bytes."""
    cdef uint64_t v[4]
    cdef uint64_t last = (<uint64_t>size) << 56
    cdef Py_ssize_t at, tail = size & 7
    v[0] = k0 ^ 0x736f6d6570736575ULL
    v[1] = k1 ^ 0x646f72616e646f6dULL
    v[2] = k0 ^ 0x6c7967656e657261ULL
    v[3] = k1 ^ 0x7465646279746573ULL
    for at in range(0, size - tail, 8):
        _sip_absorb(v, disque_load_le64(data + at))
    if tail and size >= 8:             # the tail is the top of the last 8 bytes
        last |= disque_load_le64(data + size - 8) >> (64 - 8 * tail)
    else:
        for at in range(tail):
            last |= (<uint64_t>(<unsigned char>data[size - tail + at])) << (8 * at)
    _sip_absorb(v, last)
    v[2] ^= 0xff
    _sip_round(v)
    _sip_round(v)
    _sip_round(v)
    return v[0] ^ v[1] ^ v[2] ^ v[3]


def siphash13_of(bytes data, bytes key):
    """SipHash-1-3 of `data` with a given 16-byte key (the tests' check)."""
    cdef uint64_t k0 = 0, k1 = 0
    _key_halves(key, &k0, &k1)
    return siphash13(k0, k1, PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))
