# A node's job messages to its peers, as bus frames (frames.pxi).

cdef enum:
    FRAME_PREFIX_SIZE = 4           # the u32 length of what follows
    FRAME_HEADER_SIZE = 50          # signature, type, mflags, port, node flags, sender ID
    FRAME_HEADER_TAIL = 44          # port, node flags, sender ID: the same in every frame
    FRAME_SPLIT_AT = 16 * 1024 * 1024   # a frame past this size takes no more items
    FRAME_BUFFER_KEEP = 1024 * 1024     # a peer's emptied buffer larger than this is freed


cdef struct FrameRun:
    Py_ssize_t start                # the open frame's length prefix, or -1: none open
    Py_ssize_t count_at             # its u32 item count, or -1: a frame without one
    uint32_t count
    int kind
    int mflags


cdef class PeerFrames:
    cdef bytes node_id
    cdef WriteBuffer now            # frames that leave at the end of this loop turn
    cdef WriteBuffer held           # confirmations waiting for the AOF batch held_gen
    cdef FrameRun now_run
    cdef FrameRun held_run
    cdef uint64_t held_gen
    cdef int64_t now_frames
    cdef int64_t held_frames
    cdef bint listed                # in BusOutbox._dirty


cdef class BusOutbox:
    cdef dict _peers                # node ID -> PeerFrames
    cdef list _dirty                # PeerFrames with frames to write or held
    cdef char _tail[44]             # FRAME_HEADER_TAIL
    cdef bint _scheduled
    cdef public object on_frames    # called at a turn's first frame: write at its end

    cdef int add(self, bytes node_id, int kind, object item, int mflags,
                 uint64_t gen) except -1
