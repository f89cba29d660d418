# A cluster bus link's input: the data plane's fast path (link.pxi).

cdef enum:
    LINK_MIN_FRAME = 5              # the shortest payload any frame may have (a handshake's)
    LINK_INITIAL_CAPACITY = 16 * 1024
    LINK_SHRINK_ABOVE = 1024 * 1024 # an idle link keeps no more buffer than this


cdef class LinkBase:
    cdef public NodeCore core         # whose data-plane frames this link takes in C
    cdef public Py_ssize_t frame_limit    # the largest payload the link may send now
    cdef public bint fast             # past its handshake and trusted: the fast path is open
    cdef public bint closed
    cdef public bytes peer_id         # the node an authenticated link speaks for, or None
    cdef public double last_data      # time.monotonic() of its last read
    cdef char* _buf                   # bytes of an incomplete frame, kept between reads
    cdef Py_ssize_t _size
    cdef Py_ssize_t _capacity
    cdef bytes _sender                # the ID object of the last fast frame's sender
    cdef int64_t _fast_frames         # fast frames of this read, and their bytes
    cdef int64_t _fast_bytes

    # Hooks: the cluster layer's (cluster/bus.py's BusLink overrides each;
    # link.pxi says what each must do).
    cpdef on_frame(self, bytes payload)
    cpdef refuse_length(self, int64_t length)
    cpdef fast_frames_done(self, bytes sender, int64_t frames, int64_t size)

    cdef Py_ssize_t _split(self, const char* data, Py_ssize_t size) except -1
    cdef bint _take_fast(self, const char* payload, Py_ssize_t size) except -1
    cdef bytes _known_sender(self, const char* node_id)
    cdef int _keep(self, const char* data, Py_ssize_t size) except -1
