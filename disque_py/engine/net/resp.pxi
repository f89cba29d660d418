# RESP in C: client requests in, reply bytes out.
#
# RequestParser reads a connection's byte stream into commands, one at a
# time, following Disque's own request parser rule for rule and error
# message for error message (src/networking.c): multibulk requests
# ("*<n>\r\n$<len>\r\n...") with canonical lengths and Disque's limits, and
# inline ones (a line, split the way sdssplitargs splits it: the Python
# splitter in disque_py/base/splitargs.py, the only one). Incomplete input is a
# return value (0: no command yet), never an exception; a malformed stream
# sets `error` once, and the commands before the fault still run.
#
# A command is read in place: its arguments are (offset, length) pairs into
# the parser's buffer, relative to the command's first byte, so a command
# that arrives over many reads keeps its parsed prefix (no re-parsing) and
# a compaction of the buffer moves it without changing them. The hot path
# reads arguments through pointers; the rest get a list of bytes.
#
# WriteBuffer collects the replies of one read, to leave in one write.

from cpython.bytearray cimport PyByteArray_AS_STRING
from libc.string cimport memchr

from disque_py.base.errors import ProtocolError
from disque_py.base.splitargs import UnbalancedQuotes, split_line

cdef bint _strict_int(const char* data, Py_ssize_t size, int64_t* out) noexcept:
    """A length as Disque's string2ll reads it: canonical digits only."""
    cdef Py_ssize_t i = 0
    cdef bint negative = False
    cdef uint64_t value = 0
    if size == 0 or size > 20:
        return False
    if data[0] == 45:        # '-'
        negative = True
        i = 1
        if size == 1:
            return False
    if data[i] == 48 and size - i > 1:       # leading zero
        return False
    if negative and data[i] == 48:           # "-0"
        return False
    while i < size:
        if not 48 <= data[i] <= 57:
            return False
        if value > (<uint64_t>0xFFFFFFFFFFFFFFFFULL - <uint64_t>(data[i] - 48)) // 10:
            return False
        value = value * 10 + <uint64_t>(data[i] - 48)
        i += 1
    if negative:
        if value > 9223372036854775808ULL:
            return False
        out[0] = -<int64_t>(value - 1) - 1 if value else 0
    else:
        if value > 9223372036854775807ULL:
            return False
        out[0] = <int64_t>value
    return True


def parse_strict_int(digits):
    """The same rule, for Python (tests; the hot path uses it in C)."""
    cdef int64_t value
    data = bytes(digits)
    if _strict_int(PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data), &value):
        return value
    return None


@cython.final
cdef class RequestParser:

    def __cinit__(self):
        self.bulk_len = -1
        self.error = None

    def __dealloc__(self):
        PyMem_Free(self.buf)
        PyMem_Free(self.args)

    @property
    def buffered(self):
        """Bytes received but not yet turned into commands."""
        return self.size - self.start

    # ------------------------------------------------------------- input

    cdef int append(self, const char* data, Py_ssize_t length) except -1:
        """Add received bytes (after the unconsumed ones)."""
        cdef Py_ssize_t needed
        cdef char* grown
        if length == 0:
            return 0        # and a parser with no buffer yet must not memcpy to NULL
        if self.start == self.size:               # everything was consumed
            self.start = self.size = self.pos = 0
            if self.capacity > PARSER_SHRINK_ABOVE:   # after one huge command
                PyMem_Free(self.buf)
                self.buf = NULL
                self.capacity = 0
        needed = self.size + length
        if needed > self.capacity and self.start:    # drop consumed bytes first
            memmove(self.buf, self.buf + self.start, self.size - self.start)
            self.size -= self.start
            self.pos -= self.start
            self.cmd_start -= self.start
            self.start = 0
            needed = self.size + length
        if needed > self.capacity:
            self.capacity = max(needed, self.capacity * 2, PARSER_MIN_CAPACITY)
            grown = <char*>PyMem_Realloc(self.buf, self.capacity)
            if grown == NULL:
                raise MemoryError()
            self.buf = grown
        memcpy(self.buf + self.size, data, length)
        self.size += length
        return 0

    # ----------------------------------------------------------- parsing

    cdef int next_command(self) except? -2:
        """Parse up to the next complete command; PARSE_COMMAND leaves it
        readable until consume(). Empty commands are skipped."""
        cdef int status
        if self.ready:
            return PARSE_COMMAND
        if self.error is not None:
            return PARSE_ERROR
        while self.pos < self.size:
            if self.args_left == 0 and self.bulk_len < 0 and self.buf[self.pos] != 42:
                status = self._parse_inline()
            else:
                status = self._parse_multibulk()
            if status != PARSE_COMMAND:
                return status
            if self.argc or self.inline_argv is not None:
                self.ready = True
                return PARSE_COMMAND
            self.start = self.pos          # an empty command: nothing to run
        return PARSE_MORE

    cdef void consume(self) noexcept:
        """The current command is done with: the next one starts after it."""
        self.ready = False
        self.start = self.pos
        self.argc = 0
        self.inline_argv = None

    cdef int _fail(self, str detail) except -1:
        self.error = ProtocolError(detail).as_reply()
        self.start = self.pos = self.size          # nothing more is read
        return PARSE_ERROR

    cdef int _parse_inline(self) except? -2:
        cdef char* line = self.buf + self.pos
        cdef char* newline = <char*>memchr(line, 10, self.size - self.pos)
        cdef Py_ssize_t end, nul
        if newline == NULL:
            if self.size - self.pos > INLINE_MAX_SIZE:
                return self._fail("too big inline request")
            return PARSE_MORE
        end = newline - self.buf
        if end > self.pos and self.buf[end - 1] == 13:
            end -= 1
        text = PyBytes_FromStringAndSize(line, end - self.pos)
        nul = text.find(b"\0")
        if nul >= 0:                  # Disque reads the line as a C string
            text = text[:nul]
        try:
            argv = split_line(text)
        except UnbalancedQuotes:
            return self._fail("unbalanced quotes in request")
        self.pos = newline - self.buf + 1
        argv = [arg for arg in argv if arg]
        self.inline_argv = argv if argv else None
        return PARSE_COMMAND

    cdef inline bint _short_header(self, int64_t* value, char expected) noexcept:
        """The common header: "<c><digits>\r" with a short canonical number,
        wholly here with one byte after it; else False and nothing read."""
        cdef const char* line = self.buf + self.pos
        cdef const char* end = self.buf + self.size
        cdef const char* p = line + 1
        cdef int64_t number
        if end - line < 4 or line[0] != expected or not 49 <= p[0] <= 57:
            return False
        number = p[0] - 48
        p += 1
        while p < end and 48 <= p[0] <= 57 and p - line < 19:
            number = number * 10 + (p[0] - 48)
            p += 1
        if p + 1 < end and p[0] == 13:
            value[0] = number
            self.pos = p + 2 - self.buf
            return True
        return False

    cdef int _header(self, int64_t* value, bint* valid, char expected,
                     const char* too_big) except? -2:
        """Read any "<c><digits>\r" line at pos (_short_header failed):
        PARSE_MORE until the line and one byte after it are here; the value,
        and whether it is canonical."""
        cdef char* line = self.buf + self.pos
        cdef char* cr
        cr = <char*>memchr(line, 13, self.size - self.pos)
        if cr == NULL:
            if self.size - self.pos > INLINE_MAX_SIZE:
                return self._fail(too_big.decode())
            return PARSE_MORE
        if cr - self.buf + 1 >= self.size:
            return PARSE_MORE
        if line[0] != expected:
            return self._fail("expected '%s', got '%s'"
                              % (chr(<unsigned char>expected), chr(<unsigned char>line[0])))
        valid[0] = _strict_int(line + 1, cr - line - 1, value)
        self.pos = cr - self.buf + 2
        return PARSE_COMMAND

    cdef int _parse_multibulk(self) except? -2:
        cdef int64_t count, length
        cdef bint valid
        cdef int status
        cdef Py_ssize_t cmd_start
        if self.args_left == 0 and self.bulk_len < 0:
            cmd_start = self.pos
            valid = self._short_header(&count, 42)
            if not valid:
                status = self._header(&count, &valid, 42, b"too big mbulk count string")
                if status != PARSE_COMMAND:
                    return status
            if not valid or count > MULTIBULK_MAX_COUNT:
                return self._fail("invalid multibulk length")
            self.cmd_start = cmd_start
            if count <= 0:
                return PARSE_COMMAND          # empty: skipped by next_command
            self.args_left = count
            self.argc = 0
            self._reserve(count)
        while self.args_left:
            if self.bulk_len < 0:
                valid = self._short_header(&length, 36)
                if not valid:
                    status = self._header(&length, &valid, 36, b"too big bulk count string")
                    if status != PARSE_COMMAND:
                        return status
                if not valid or length < 0 or length > BULK_MAX_LENGTH:
                    return self._fail("invalid bulk length")
                self.bulk_len = length
            if self.size - self.pos < self.bulk_len + 2:
                return PARSE_MORE
            self.args[self.argc].offset = self.pos - self.cmd_start
            self.args[self.argc].size = self.bulk_len
            self.argc += 1
            self.pos += self.bulk_len + 2
            self.bulk_len = -1
            self.args_left -= 1
        return PARSE_COMMAND

    cdef int _reserve(self, Py_ssize_t count) except -1:
        cdef ArgSpan* grown
        if count > self.args_capacity:
            grown = <ArgSpan*>PyMem_Realloc(self.args, count * sizeof(ArgSpan))
            if grown == NULL:
                raise MemoryError()
            self.args = grown
            self.args_capacity = count
        return 0

    # ----------------------------------------------------- reading a command

    cdef inline const char* arg(self, Py_ssize_t index) noexcept:
        return self.buf + self.cmd_start + self.args[index].offset

    cdef inline Py_ssize_t arg_size(self, Py_ssize_t index) noexcept:
        return self.args[index].size

    cdef list argv(self):
        """The current command as a list of bytes."""
        cdef Py_ssize_t i
        if self.inline_argv is not None:
            return self.inline_argv
        return [PyBytes_FromStringAndSize(self.arg(i), self.args[i].size)
                for i in range(self.argc)]

    cdef list take_all(self):
        """Every complete command left, as lists of bytes, consumed."""
        commands = []
        while self.next_command() == PARSE_COMMAND:
            commands.append(self.argv())
            self.consume()
        return commands

    # -------------------------------------------------------- Python API

    def feed(self, data):
        """Consume bytes; return the commands they complete, in order (the
        stream's error, if any, is in `error` afterwards)."""
        self.append(data, len(data))
        return self.take_all()


@cython.final
cdef class WriteBuffer:

    def __dealloc__(self):
        PyMem_Free(self.data)

    cdef int _grow(self, Py_ssize_t extra) except -1:
        cdef Py_ssize_t capacity = max(self.capacity * 2, self.size + extra, WRITE_BUFFER_INITIAL)
        cdef char* grown = <char*>PyMem_Realloc(self.data, capacity)
        if grown == NULL:
            raise MemoryError()
        self.data = grown
        self.capacity = capacity
        return 0

    cdef inline int write(self, const char* data, Py_ssize_t length) except -1:
        if self.size + length > self.capacity:
            self._grow(length)
        memcpy(self.data + self.size, data, length)
        self.size += length
        return 0

    cdef int write_bytes(self, bytes data) except -1:
        return self.write(PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))

    cdef int write_number(self, char kind, int64_t value) except -1:
        """<kind><value>\r\n: an integer reply (':'), an array or bulk header."""
        cdef char digits[20]
        cdef int count = 0
        cdef uint64_t magnitude = <uint64_t>(-(value + 1)) + 1 if value < 0 else <uint64_t>value
        cdef char* out
        while True:
            digits[count] = <char>(48 + magnitude % 10)
            count += 1
            magnitude //= 10
            if magnitude == 0:
                break
        if self.size + count + 4 > self.capacity:
            self._grow(count + 4)
        out = self.data + self.size
        out[0] = kind
        out += 1
        if value < 0:
            out[0] = 45
            out += 1
        while count:
            count -= 1
            out[0] = digits[count]
            out += 1
        out[0] = 13
        out[1] = 10
        self.size = out + 2 - self.data
        return 0

    cdef int write_bulk(self, const char* data, Py_ssize_t length) except -1:
        self.write_number(36, length)          # '$'
        self.write(data, length)
        return self.write(b"\r\n", 2)

    cdef bytes take(self):
        """What was written, as bytes; the buffer is empty again."""
        out = PyBytes_FromStringAndSize(self.data, self.size)
        self.size = 0
        return out
