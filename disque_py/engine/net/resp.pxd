# The request parser and the reply buffer (resp.pxi).

cpdef enum:
    INLINE_MAX_SIZE = 64 * 1024            # an inline command, or a header line
    MULTIBULK_MAX_COUNT = 1024 * 1024      # arguments in one command
    BULK_MAX_LENGTH = 512 * 1024 * 1024    # bytes in one argument
    PARSER_MIN_CAPACITY = 16 * 1024
    PARSER_SHRINK_ABOVE = 1024 * 1024      # an idle connection keeps no more
    WRITE_BUFFER_INITIAL = 4096

cdef enum ParseStatus:
    PARSE_MORE = 0         # no complete command (yet)
    PARSE_COMMAND = 1      # a command is ready: argc/args, or inline_argv
    PARSE_ERROR = -1       # the stream is malformed: `error` is set


cdef struct ArgSpan:
    Py_ssize_t offset             # from the command's first byte
    Py_ssize_t size


cdef struct ArgView:
    const char* data
    Py_ssize_t size


cdef class RequestParser:
    cdef char* buf
    cdef Py_ssize_t size               # bytes in buf
    cdef Py_ssize_t capacity
    cdef Py_ssize_t start              # the next unconsumed command
    cdef Py_ssize_t pos                # where parsing continues
    cdef Py_ssize_t cmd_start          # the command being read
    cdef Py_ssize_t args_left          # arguments of it still expected
    cdef int64_t bulk_len              # length of the argument being read, or -1
    cdef ArgSpan* args
    cdef Py_ssize_t args_capacity
    cdef readonly Py_ssize_t argc
    cdef bint ready                    # a complete command waits for consume()
    cdef object inline_argv            # the ready command, when it was inline
    cdef readonly object error         # ProtocolError, once the stream is malformed

    cdef int append(self, const char* data, Py_ssize_t length) except -1
    cdef int next_command(self) except? -2
    cdef void consume(self) noexcept
    cdef int _fail(self, str detail) except -1
    cdef int _parse_inline(self) except? -2
    cdef inline bint _short_header(self, int64_t* value, char expected) noexcept
    cdef int _header(self, int64_t* value, bint* valid, char expected,
                     const char* too_big) except? -2
    cdef int _parse_multibulk(self) except? -2
    cdef int _reserve(self, Py_ssize_t count) except -1
    cdef const char* arg(self, Py_ssize_t index) noexcept
    cdef Py_ssize_t arg_size(self, Py_ssize_t index) noexcept
    cdef list argv(self)
    cdef list take_all(self)


cdef class WriteBuffer:
    cdef char* data
    cdef readonly Py_ssize_t size
    cdef Py_ssize_t capacity

    cdef int _grow(self, Py_ssize_t extra) except -1
    cdef int write(self, const char* data, Py_ssize_t length) except -1
    cdef int write_bytes(self, bytes data) except -1
    cdef int write_number(self, char kind, int64_t value) except -1
    cdef int write_bulk(self, const char* data, Py_ssize_t length) except -1
    cdef bytes take(self)
