# The table of DEDUP keys (dedup_table.pxi): one C block per key, an
# open-addressing index, an expiry heap.

cpdef enum:
    DEDUP_MEMORY_OVERHEAD = 150    # bytes per DEDUP key beyond the key: its 80-byte slot,
                                   # a 16-byte bucket an eighth to half full, a 16-byte
                                   # heap entry


# A (queue, key) pair naming a job until its window ends: one C block, the
# key inline. Owned by the table's heap until the window ends, and by each
# job whose key it is (refs); in the table's index while `live`.
cdef struct DedupSlot:
    uint64_t hash
    int64_t until_ms
    PyObject* queue                        # owned bytes: the ADDJOB's queue
    uint32_t refs
    uint32_t key_len
    bint live
    char id[40]
    char key[1]                            # key_len bytes (allocated to fit)


# A DEDUP key as a command, a message or a record carries it (pointers into
# the bytes it was read from, or into a slot; key NULL: none); queue NULL:
# the job's own. `hash`: the pair's, once computed (0: not yet). `earlier`:
# what NodeCore.create_job() found, the slot of a job the pair already names.
cdef struct DedupFields:
    const char* key
    Py_ssize_t key_len
    int64_t until_ms
    const char* queue
    Py_ssize_t queue_len
    uint64_t hash
    DedupSlot* earlier


# A heap entry: a window's end, copied from its slot so that ordering the
# heap reads no slot (each would be a cache miss on a large table).
cdef struct DedupDue:
    int64_t until_ms
    DedupSlot* slot


@cython.final
cdef class DedupTable:
    cdef IndexPartition* _parts            # items: DedupSlot*
    cdef Py_ssize_t _len
    cdef DedupDue* _heap                   # a min-heap by until_ms (one reference each)
    cdef Py_ssize_t _heap_len
    cdef Py_ssize_t _heap_cap
    cdef public Py_ssize_t max_keys
    cdef readonly int64_t memory
    cdef public int64_t hits           # ADDJOBs answered with an earlier job's ID
    cdef public int64_t refused        # ... refused: the table was full
    cdef public int64_t dropped        # keys of copies not kept: the table was full

    cdef int64_t unlink(self, DedupSlot* slot) noexcept
    cdef DedupSlot* _find_job(self, object queue, const char* key, Py_ssize_t key_len,
                              uint64_t h, const char* job_id) noexcept
    cdef DedupSlot* _heap_pop(self) noexcept
    cdef void _compact_heap(self) noexcept
    cdef void _release(self) noexcept
