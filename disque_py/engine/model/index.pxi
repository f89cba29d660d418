# The hash index both tables keep (table.pxi: jobs by ID; dedup_table.pxi:
# DEDUP keys): split by hash into partitions, each an array of (hash, item)
# buckets probed linearly from the item's home bucket. The full 64-bit
# hash sits in the bucket, so a probe reads no item until two hashes match
# (an item read is a cache miss on a large table; chains through the items
# cost one per step, and a resize re-read and re-hashed every item).
#
# Rules it keeps: every item is reachable from its home bucket by a run of
# occupied buckets (no tombstones: a removal shifts later entries back); a
# partition is at most half full (it doubles) and, once larger than
# INDEX_MIN_BUCKETS, at least an eighth full (it halves, unless memory is
# short); the index holds
# no reference to its items (each table keeps its own). `bits`: how many
# low bits of the hash choose the partition (the rest choose the bucket).

from libc.string cimport memset

cdef extern from *:
    """
    /* Start loading the cache line at p. gcc 12 takes a function whose one
       effect is __builtin_prefetch for one with none, and deletes calls to
       it that it did not inline early (ADDJOB's DEDUP prefetch was never
       issued); the empty volatile asm is an effect it keeps. */
    static CYTHON_INLINE void disque_prefetch(const void *p) {
    #if defined(__GNUC__)
        __builtin_prefetch(p);
        __asm__ __volatile__("" : : "r"(p));
    #else
        (void)p;
    #endif
    }
    """
    void disque_prefetch(const void* address) noexcept nogil

cdef enum:
    INDEX_MIN_BUCKETS = 8


cdef inline uint32_t index_home(IndexPartition* part, uint64_t h, int bits) noexcept:
    return <uint32_t>(h >> bits) & part.mask


cdef inline void index_prefetch(IndexPartition* part, uint64_t h, int bits) noexcept:
    """Start reading the bucket where a probe for `h` begins: on a table
    larger than the cache it is a miss, which the caller's next steps hide."""
    if part.buckets != NULL:
        disque_prefetch(&part.buckets[index_home(part, h, bits)])


cdef inline int64_t index_find_item(IndexPartition* part, uint64_t h, void* item,
                                    int bits) noexcept:
    """The bucket holding `item` (indexed under `h`), or -1."""
    cdef uint32_t i
    if part.buckets == NULL:
        return -1
    i = index_home(part, h, bits)
    while part.buckets[i].item != item:
        if part.buckets[i].item == NULL:
            return -1
        i = (i + 1) & part.mask
    return i


cdef inline void _index_place(IndexPartition* part, uint64_t h, void* item, int bits) noexcept:
    cdef uint32_t i = index_home(part, h, bits)
    while part.buckets[i].item != NULL:
        i = (i + 1) & part.mask
    part.buckets[i].hash = h
    part.buckets[i].item = item


cdef bint _index_rebuild(IndexPartition* part, uint32_t size, int bits) noexcept:
    """Move the entries into `size` buckets; False (nothing changed) when
    the memory is not there."""
    cdef IndexBucket* old = part.buckets
    cdef uint32_t i, old_size = part.mask + 1 if old != NULL else 0
    # malloc and memset: glibc's calloc cleared these sizes ten times slower.
    cdef IndexBucket* buckets = <IndexBucket*>PyMem_Malloc(size * sizeof(IndexBucket))
    if buckets == NULL:
        return False
    memset(buckets, 0, size * sizeof(IndexBucket))
    part.buckets = buckets
    part.mask = size - 1
    for i in range(old_size):
        if old[i].item != NULL:
            _index_place(part, old[i].hash, old[i].item, bits)
    PyMem_Free(old)
    return True


cdef inline int index_add(IndexPartition* part, uint64_t h, void* item, int bits) except -1:
    """Add an entry (the caller knows the item is not there yet)."""
    cdef uint32_t size = part.mask + 1 if part.buckets != NULL else 0
    if (part.count + 1) * 2 > size:
        if not _index_rebuild(part, size * 2 if size else INDEX_MIN_BUCKETS, bits):
            raise MemoryError()
    _index_place(part, h, item, bits)
    part.count += 1
    return 0


cdef void index_remove_at(IndexPartition* part, uint32_t gap, int bits) noexcept:
    """Empty bucket `gap` and pull back the entries probing past it; halve
    a partition left less than an eighth full (unless memory is short)."""
    cdef uint32_t i = gap, home
    while True:
        i = (i + 1) & part.mask
        if part.buckets[i].item == NULL:
            break
        home = index_home(part, part.buckets[i].hash, bits)
        # Move it unless its home lies cyclically in (gap, i].
        if (i > gap and (home <= gap or home > i)) or (i < gap and home <= gap and home > i):
            part.buckets[gap] = part.buckets[i]
            gap = i
    part.buckets[gap].item = NULL
    part.buckets[gap].hash = 0
    part.count -= 1
    if part.mask + 1 > INDEX_MIN_BUCKETS and part.count * 8 < part.mask + 1:
        _index_rebuild(part, (part.mask + 1) // 2, bits)


cdef void index_free(IndexPartition* part) noexcept:
    PyMem_Free(part.buckets)
    part.buckets = NULL
    part.mask = 0
    part.count = 0
