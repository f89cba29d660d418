# The tables' hash index (index.pxi): partitions of (hash, item) buckets.

cdef struct IndexBucket:
    uint64_t hash
    void* item                             # NULL: empty


cdef struct IndexPartition:
    IndexBucket* buckets                   # open addressing, linear probing
    uint32_t mask
    uint32_t count
