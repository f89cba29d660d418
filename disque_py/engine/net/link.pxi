# A cluster bus link's input, compiled: frames split, and the data plane's
# frames taken without a Python call per frame.
#
# LinkBase is the compiled base of cluster/bus.py's BusLink (an
# asyncio.Protocol), as ConnectionBase is a client connection's.
# data_received() cuts the bytes of a read into frames (a 4-byte length,
# then the payload: formats/bus.py) over any read boundaries, checking each
# announced length against the link's frame_limit first (refuse_length:
# the link is closed, as it was in Python). Each frame then goes one of
# two ways:
#   * the fast path, when the link is `fast` (trusted, past any handshake:
#     BusLink opens it) and the frame is a well-formed REPLJOB, GOTJOB,
#     SETACK, GOTACK or DELJOB (not one of an abandoned ADDJOB) from a
#     known peer (not this node, not a node in handshake; the peer the
#     link authenticated as, if it did): the copy is made straight from
#     the frame's bytes and a GOTJOB counts its copies (copies.pxi),
#     SETACK, GOTACK and DELJOB run the ack collection (acks.pxi), and the
#     answers leave through the node's BusOutbox (frames.pxi);
#   * on_frame(payload) otherwise: BusLink's Python path (handshakes,
#     membership, the other job messages, and every frame the fast path
#     would refuse: it reaches Python unchanged, and is decoded, refused
#     and counted there exactly as before).
# The fast path checks the whole frame before it applies any of it, as
# formats/bus.py's decode does. After a read, fast_frames_done(sender,
# frames, bytes) tells the cluster layer once (the sender is alive; the
# traffic counters; the effects the frames made, such as parked clients'
# answers), not once per frame; the queues that got jobs are served here.
#
# It never reads or writes a socket: bytes come in through data_received.

from cpython.dict cimport PyDict_Size
from cpython.mem cimport PyMem_Free, PyMem_Realloc
from libc.string cimport memmove

cdef tuple LINK_HOOKS = ("on_frame", "refuse_length", "fast_frames_done")


cdef bint _take_id_items(NodeCore node, bytes sender, int kind, const char* body,
                         Py_ssize_t size) except -1:
    """A GOTJOB, SETACK, GOTACK or DELJOB frame's body: a count, then (job ID,
    u32) items, every ID well formed (checked whole first; False, nothing
    applied, if not, as formats/bus.py's decode refuses it)."""
    cdef uint32_t count, i
    cdef const char* item
    if size < 4:
        return False
    count = get_u32(body)
    if <uint64_t>count * JOB_ID_AUX_SIZE != <uint64_t>(size - 4):
        return False
    for i in range(count):
        if not id_is_valid(body + 4 + i * JOB_ID_AUX_SIZE, JOB_ID_LEN):
            return False
    for i in range(count):
        item = body + 4 + i * JOB_ID_AUX_SIZE
        if kind == KIND_GOTJOB:
            job = node.jobs.find(item)
            if job is not None:
                copies_confirmed(node, sender, <Job>job)
        elif kind == KIND_SETACK:
            acks_on_setack(node, sender, item, get_u32(item + JOB_ID_LEN))
        elif kind == KIND_DELJOB:
            job = node.jobs.find(item)
            if job is not None:
                node.unregister(<Job>job)     # every copy is acked: this one goes
        else:
            acks_on_gotack(node, sender, item, get_u32(item + JOB_ID_LEN))
    return True


cdef class LinkBase:

    def __cinit__(self, *args, **kwargs):
        require_overrides(type(self), LinkBase, LINK_HOOKS)

    def __dealloc__(self):
        PyMem_Free(self._buf)

    # ------------------------------------------- hooks: the cluster layer's

    cpdef on_frame(self, bytes payload):
        """A frame the fast path does not take: decode and apply it, or
        close the link (a bad frame, a failed handshake)."""
        raise NotImplementedError

    cpdef refuse_length(self, int64_t length):
        """A frame announced a length this link may not send now: count
        it, log it, close the link."""
        raise NotImplementedError

    cpdef fast_frames_done(self, bytes sender, int64_t frames, int64_t size):
        """The fast path took `frames` frames (`size` bytes) of `sender`'s
        in this read: it is alive; count them; carry out what they made."""
        raise NotImplementedError

    # ------------------------------------------------------------ the path

    @cython.binding(False)
    def data_received(self, bytes data):
        cdef Py_ssize_t size = PyBytes_GET_SIZE(data)
        cdef Py_ssize_t used
        self.last_data = _monotonic()
        if self._size == 0:
            used = self._split(PyBytes_AS_STRING(data), size)     # no copy for whole frames
            if not self.closed and used < size:
                self._keep(PyBytes_AS_STRING(data) + used, size - used)
        else:
            self._keep(PyBytes_AS_STRING(data), size)
            used = self._split(self._buf, self._size)
            if used:
                memmove(self._buf, self._buf + used, self._size - used)
                self._size -= used
        if self._size == 0 and self._capacity > LINK_SHRINK_ABOVE:
            PyMem_Free(self._buf)
            self._buf = NULL
            self._capacity = 0
        if self._fast_frames:
            frames, self._fast_frames = self._fast_frames, 0
            fast_bytes, self._fast_bytes = self._fast_bytes, 0
            if self.core.ready:
                self.core.hooks.serve_ready()
            self.fast_frames_done(self._sender, frames, fast_bytes)

    cdef int _keep(self, const char* data, Py_ssize_t size) except -1:
        cdef Py_ssize_t capacity
        cdef char* grown
        if self._size + size > self._capacity:
            capacity = max(self._capacity * 2, self._size + size, LINK_INITIAL_CAPACITY)
            grown = <char*>PyMem_Realloc(self._buf, capacity)
            if grown == NULL:
                raise MemoryError()
            self._buf = grown
            self._capacity = capacity
        memcpy(self._buf + self._size, data, size)
        self._size += size
        return 0

    cdef Py_ssize_t _split(self, const char* data, Py_ssize_t size) except -1:
        """Take every whole frame at the start of data; returns the bytes used."""
        cdef Py_ssize_t pos = 0
        cdef int64_t length
        while not self.closed and size - pos >= FRAME_PREFIX_SIZE:
            length = get_u32(data + pos)
            if length < LINK_MIN_FRAME or length > self.frame_limit:
                self.refuse_length(length)
                self.closed = True
                return pos
            if size - pos - FRAME_PREFIX_SIZE < length:
                break
            pos += FRAME_PREFIX_SIZE + length
            if not (self.fast and self._take_fast(data + pos - length, length)):
                self.on_frame(PyBytes_FromStringAndSize(data + pos - length, length))
        return pos

    cdef bint _take_fast(self, const char* payload, Py_ssize_t size) except -1:
        """Apply a REPLJOB or GOTJOB frame in C; False: not one for this
        path (Python takes it, unchanged)."""
        cdef int kind, mflags
        cdef bytes sender
        if size < FRAME_HEADER_SIZE or memcmp(payload, b"DqP1", 4) != 0:
            return False
        kind = <unsigned char>payload[4]
        mflags = <unsigned char>payload[5]
        if kind == KIND_REPLJOB:
            if (PyDict_Size(self.core.heal_marks) or PyDict_Size(self.core.heal_watch)) \
                    and not mflags & FLAG_PROMISED_COPY:
                return False              # healing looks at the copies (node/healing.py)
        elif kind == KIND_DELJOB:
            if mflags & FLAG_ABANDONED_ADD:
                return False              # its DEDUP key and promises: node/acks.py
        elif kind != KIND_GOTJOB and kind != KIND_SETACK and kind != KIND_GOTACK:
            return False
        sender = self._known_sender(payload + 10)
        if sender is None:
            return False
        payload += FRAME_HEADER_SIZE
        size -= FRAME_HEADER_SIZE
        if kind == KIND_REPLJOB:
            if not copies_take_frame(self.core, sender, mflags, payload, size):
                return False
        elif not _take_id_items(self.core, sender, kind, payload, size):
            return False
        self._fast_frames += 1
        self._fast_bytes += FRAME_PREFIX_SIZE + FRAME_HEADER_SIZE + size
        return True

    cdef bytes _known_sender(self, const char* node_id):
        """The shared ID object of a frame's sender if the fast path may take
        its frames: a known peer (past handshake, not this node), the one
        the link authenticated as if it did. None otherwise."""
        cdef bytes sender = self._sender
        if sender is None or memcmp(PyBytes_AS_STRING(sender), node_id, NODE_ID_LEN) != 0:
            sender = PyBytes_FromStringAndSize(node_id, NODE_ID_LEN)
            if self._fast_frames:
                return None               # a second sender in one read: Python's rules
        if sender not in self.core.known_peers:
            return None
        if self.peer_id is not None and sender != self.peer_id:
            return None
        sender = self.core.node_ids.get(sender, sender)
        self._sender = sender
        return sender
