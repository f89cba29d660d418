# BusOutbox: a node's job messages to its peers, encoded as bus frames in
# C, one buffer of frames per peer and loop turn.
#
# The node's paths address a peer by node ID (node/outbox.pxi); with an
# outbox (a node in a server) each item goes straight into that peer's
# frames: consecutive items of one kind and message flags share one frame
# (the format's lists: formats/bus.py has the layout and stays the
# reference codec, which tests hold this one to, byte for byte). The
# first frame of a turn calls on_frames: the server takes every peer's
# frames at the turn's end (take) and writes each peer's in one write.
#
# Confirmations (GOTJOB, GOTACK, DELJOB) tell a peer what this node's AOF
# holds, so like a client's reply they wait for the AOF batch that holds
# the records noted before them (`gen`, aof/log.pxi's reply_gen; 0: none):
# in a peer's `held` buffer, after its other frames, until take() is told
# that batch is released (written; appendfsync always: fsynced). A batch
# that could not be made durable drops the confirmations waiting for it
# (drop_held): the peers ask again, or ask another node.
#
# No I/O here: bytes in, bytes out.

from cpython.mem cimport PyMem_Free, PyMem_Realloc
from cpython.mem cimport PyMem_Free
from libc.string cimport memset

from disque_py.formats import bus as _bus

# The message types this file and link.pxi test, as C ints (formats/bus.py
# names them).
cdef int KIND_REPLJOB = _bus.REPLJOB
cdef int KIND_GOTJOB = _bus.GOTJOB
cdef int KIND_ENQUEUE = _bus.ENQUEUE
cdef int KIND_SETACK = _bus.SETACK
cdef int KIND_GOTACK = _bus.GOTACK
cdef int KIND_DELJOB = _bus.DELJOB
cdef int FLAG_ABANDONED_ADD = _bus.MSG_ABANDONED
cdef int KIND_YOURJOBS = _bus.YOURJOBS
cdef int KIND_NEEDJOBS = _bus.NEEDJOBS
cdef int KIND_PAUSE = _bus.PAUSE
cdef int FLAG_PROMISED_COPY = _bus.MSG_PROMISED

cdef inline void put_u16(char* out, uint32_t value) noexcept:
    out[0] = <char>((value >> 8) & 0xFF)
    out[1] = <char>(value & 0xFF)


cdef inline void put_u32(char* out, uint32_t value) noexcept:
    out[0] = <char>((value >> 24) & 0xFF)
    out[1] = <char>((value >> 16) & 0xFF)
    out[2] = <char>((value >> 8) & 0xFF)
    out[3] = <char>(value & 0xFF)


cdef inline uint32_t get_u32(const char* data) noexcept:
    cdef const unsigned char* p = <const unsigned char*>data
    return (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | p[3]


cdef inline uint32_t get_u16(const char* data) noexcept:
    cdef const unsigned char* p = <const unsigned char*>data
    return (<uint32_t>p[0] << 8) | p[1]


cdef inline bint frame_carries_jobs(int kind) noexcept:
    return kind == KIND_REPLJOB or kind == KIND_YOURJOBS


cdef inline bint frame_carries_queue(int kind) noexcept:
    return kind == KIND_NEEDJOBS or kind == KIND_PAUSE


cdef int _release_large(WriteBuffer buf) noexcept:
    """Free an emptied buffer that grew past FRAME_BUFFER_KEEP (one large
    job's frame): a peer's buffers keep only a small one between turns."""
    if buf.size == 0 and buf.capacity > FRAME_BUFFER_KEEP:
        PyMem_Free(buf.data)
        buf.data = NULL
        buf.capacity = 0
    return 0


cdef int _close_run(WriteBuffer buf, FrameRun* run) noexcept:
    """Write the open frame's length and item count into it."""
    if run.start < 0:
        return 0
    put_u32(buf.data + run.start, <uint32_t>(buf.size - run.start - FRAME_PREFIX_SIZE))
    if run.count_at >= 0:
        put_u32(buf.data + run.count_at, run.count)
    run.start = -1
    return 0


cdef int _open_frame(WriteBuffer buf, FrameRun* run, const char* tail, int kind,
                     int mflags) except -1:
    cdef char head[FRAME_PREFIX_SIZE + FRAME_HEADER_SIZE + 4]
    cdef Py_ssize_t size = FRAME_PREFIX_SIZE + FRAME_HEADER_SIZE
    _close_run(buf, run)
    put_u32(head, 0)
    memcpy(head + 4, b"DqP1", 4)
    head[8] = <char>kind
    head[9] = <char>mflags
    memcpy(head + 10, tail, FRAME_HEADER_TAIL)
    run.start = buf.size
    run.count_at = -1
    if not frame_carries_queue(kind):
        run.count_at = buf.size + size
        put_u32(head + size, 0)
        size += 4
    run.count = 0
    run.kind = kind
    run.mflags = mflags
    return buf.write(head, size)


cdef bytes _item_bytes(int kind, object item, int64_t* aux) except *:
    """An item's variable part, and its u32 in `aux` (none: -1), checked
    before anything is written: a refused item leaves no frame behind."""
    cdef bytes data
    if frame_carries_jobs(kind):
        data = <bytes?>item
        aux[0] = -1
    elif frame_carries_queue(kind):
        data = <bytes?>item.queue
        aux[0] = item.aux
    else:
        data = <bytes?>(<tuple?>item)[0]
        aux[0] = (<tuple>item)[1]
        if PyBytes_GET_SIZE(data) != JOB_ID_LEN:
            raise ValueError("a job ID item out of range")
    if PyBytes_GET_SIZE(data) > 0xFFFFFFFF or aux[0] > 0xFFFFFFFF or \
            (aux[0] < 0 and not frame_carries_jobs(kind)):
        raise OverflowError("a bus message field out of range")
    return data


cdef int _put_item(WriteBuffer buf, int kind, bytes data, int64_t aux) except -1:
    """One item of a frame, as formats/bus.py lays it out."""
    cdef char fixed[8]
    if frame_carries_jobs(kind):
        put_u32(fixed, <uint32_t>PyBytes_GET_SIZE(data))
        buf.write(fixed, 4)
        return buf.write(PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))
    if frame_carries_queue(kind):
        put_u32(fixed, <uint32_t>aux)
        put_u32(fixed + 4, <uint32_t>PyBytes_GET_SIZE(data))
        buf.write(fixed, 8)
        return buf.write(PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))
    buf.write(PyBytes_AS_STRING(data), JOB_ID_LEN)
    put_u32(fixed, <uint32_t>aux)
    return buf.write(fixed, 4)


@cython.final
cdef class PeerFrames:
    """One peer's frames of this turn, and its confirmations held."""

    def __cinit__(self, bytes node_id):
        self.node_id = node_id
        self.now = WriteBuffer.__new__(WriteBuffer)
        self.held = WriteBuffer.__new__(WriteBuffer)
        self.now_run.start = -1
        self.held_run.start = -1


@cython.final
cdef class BusOutbox:
    """Every peer's frames of this loop turn (see above)."""

    def __cinit__(self):
        self._peers = {}
        self._dirty = []
        memset(self._tail, 0, FRAME_HEADER_TAIL)

    def set_sender(self, bytes node_id, int port, int flags):
        """This node as each frame's header names it (its ID, client port,
        and node flags: leaving, capabilities); frames already made keep
        the old header."""
        if PyBytes_GET_SIZE(node_id) != NODE_ID_LEN:
            raise ValueError("a node ID is 40 bytes")
        put_u16(self._tail, <uint32_t>port)
        put_u16(self._tail + 2, <uint32_t>flags)
        memcpy(self._tail + 4, PyBytes_AS_STRING(node_id), NODE_ID_LEN)

    cdef int add(self, bytes node_id, int kind, object item, int mflags,
                 uint64_t gen) except -1:
        """One item for a peer; `gen`: the AOF batch it waits for (0: none)."""
        cdef PeerFrames peer = <PeerFrames>self._peers.get(node_id)
        cdef WriteBuffer buf
        cdef FrameRun* run
        cdef int64_t aux
        cdef bytes data = _item_bytes(kind, item, &aux)
        if peer is None:
            peer = PeerFrames.__new__(PeerFrames, node_id)
            self._peers[node_id] = peer
        if gen or peer.held.size:       # behind what is held: confirmations keep their order
            buf, run = peer.held, &peer.held_run
            if gen > peer.held_gen:
                peer.held_gen = gen
        else:
            buf, run = peer.now, &peer.now_run
        if run.start < 0 or run.kind != kind or run.mflags != mflags or \
                frame_carries_queue(kind) or buf.size - run.start > FRAME_SPLIT_AT:
            _open_frame(buf, run, self._tail, kind, mflags)
            if buf is peer.held:
                peer.held_frames += 1
            else:
                peer.now_frames += 1
        _put_item(buf, kind, data, aux)
        run.count += 1
        if not peer.listed:
            peer.listed = True
            self._dirty.append(peer)
        if not self._scheduled:
            self._scheduled = True
            if self.on_frames is not None:     # None: a test takes the frames itself
                self.on_frames()
        return 0

    @property
    def pending(self):
        """Whether any peer has frames to write or held."""
        return bool(self._dirty)

    def take(self, uint64_t released):
        """Every peer's frames that may leave now: (node ID, bytes, frames)
        per peer. Confirmations held for a batch past `released` stay."""
        cdef PeerFrames peer
        cdef list dirty = self._dirty
        out = []
        self._dirty = []
        self._scheduled = False
        for peer in dirty:
            _close_run(peer.now, &peer.now_run)
            if peer.held.size and peer.held_gen <= released:
                _close_run(peer.held, &peer.held_run)
                peer.now.write(peer.held.data, peer.held.size)
                peer.now_frames += peer.held_frames
                peer.held.size = 0
                peer.held_frames = 0
                peer.held_gen = 0
            if peer.now.size:
                out.append((peer.node_id, peer.now.take(), peer.now_frames))
                peer.now_frames = 0
            _release_large(peer.now)
            _release_large(peer.held)
            if peer.held.size:
                self._dirty.append(peer)      # an fsync releases it (take again)
            else:
                peer.listed = False
        return out

    def drop_held(self, uint64_t first, uint64_t last):
        """Forget the confirmations that waited for batches `first` to
        `last`: the AOF could not make them durable."""
        cdef PeerFrames peer
        for peer in self._dirty:
            if peer.held.size and first <= peer.held_gen <= last:
                peer.held.size = 0
                peer.held_frames = 0
                peer.held_gen = 0
                peer.held_run.start = -1

    def forget(self, bytes node_id):
        """A peer forgotten: its frames go (and its buffers)."""
        cdef PeerFrames peer = <PeerFrames>self._peers.pop(node_id, None)
        if peer is not None:
            peer.now.size = peer.held.size = 0
            peer.now_frames = peer.held_frames = 0
            peer.now_run.start = peer.held_run.start = -1
            peer.held_gen = 0
