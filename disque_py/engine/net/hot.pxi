# The hot commands, compiled: PING, ADDJOB, GETJOB, ACKJOB, FASTACK, NACK,
# ENQUEUE, DEQUEUE, WORKING and QLEN, each parsed, run and answered here.
#
# One implementation serves two callers: the connection's fast path
# (conn.pxi), with the arguments still in the read buffer, and the command
# table (commands/), through run_hot(), with the arguments as bytes. Either
# way a command that must wait (a blocking GETJOB with nothing to give, an
# ADDJOB that waits for its copies) parks its client on a waiter.
# Errors are raised as DisqueError, with Disque's texts; arguments are
# checked in Disque's order, so a request that breaks several rules gets
# Disque's error. Replies are written into the call's WriteBuffer.

from disque_py.base.errors import BadIdError, CommandError, LeavingError
from disque_py.base.replies import (BACKOFF_RANGE, BADID_MESSAGE, COUNT_POSITIVE,
                                    DEADLETTER_NEEDS_MAXDELIVERIES, DEADLETTER_SAME_QUEUE,
                                    DEDUP_KEY_SIZE, DELAY_NON_NEGATIVE, LEAVING_MESSAGE,
                                    MAXDELIVERIES_RANGE, MAXLEN_POSITIVE, PING_ARITY,
                                    PRIORITY_RANGE, REPLICATE_RANGE, RETRY_NON_NEGATIVE,
                                    SYNTAX_ERROR, TIMEOUT_NEGATIVE, TIMEOUT_NOT_INTEGER,
                                    TTL_POSITIVE, WINDOW_NEEDS_DEDUP, WINDOW_POSITIVE)

cdef enum:
    MAX_REPLICATION = 65535
    MAX_DELIVERIES = 65535         # the delivery counters travel as u16
    MAX_BACKOFF_MS = 0xFFFFFFFF
    MAX_DEDUP_KEY = 1024
    MAX_WINDOW_S = 0xFFFFFFFF

# The hot commands, by the number the command table gives them.
HOT_COMMANDS = {"ping": HOT_PING, "addjob": HOT_ADDJOB, "getjob": HOT_GETJOB,
                "ackjob": HOT_ACKJOB, "fastack": HOT_FASTACK, "nack": HOT_NACK,
                "enqueue": HOT_ENQUEUE, "dequeue": HOT_DEQUEUE, "working": HOT_WORKING,
                "qlen": HOT_QLEN}

cdef bytes _PONG = b"+PONG\r\n"
cdef bytes _NULL_ARRAY_RESP2 = b"*-1\r\n"
cdef bytes _NULL_RESP3 = b"_\r\n"
cdef bytes _COUNTERS_HEAD = b"$5\r\nnacks\r\n"
cdef bytes _DELIVERIES_HEAD = b"$21\r\nadditional-deliveries\r\n"


cdef inline bint _is_option(ArgView arg, const char* name, Py_ssize_t size) noexcept:
    """Case-insensitive match of an option name (`name` is lowercase)."""
    cdef Py_ssize_t i
    if arg.size != size:
        return False
    for i in range(size):
        if (arg.data[i] | 32) != name[i]:
            return False
    return True


cdef bint _parse_int(ArgView arg, int64_t* out) noexcept:
    """A signed 64-bit integer as strtoll reads it, as Disque's commands do:
    a NUL ends the argument, "" is 0, "+5" and "007" are numbers, " 5" and
    "5s" are not."""
    cdef const char* p = arg.data
    cdef const char* end = arg.data + arg.size
    cdef bint negative = False
    cdef uint64_t value = 0, limit, digit
    if p < end and (p[0] == 43 or p[0] == 45):       # '+' '-'
        negative = p[0] == 45
        p += 1
        if p == end or p[0] == 0:
            return False
    limit = 9223372036854775808ULL if negative else 9223372036854775807ULL
    while p < end and p[0] != 0:
        digit = <uint64_t>(p[0] - 48)
        if digit > 9:
            return False
        # Below this bound no digit can overflow: one compare, no division.
        if value >= 922337203685477580ULL and value > (limit - digit) // 10:
            return False
        value = value * 10 + digit
        p += 1
    out[0] = -<int64_t>(value - 1) - 1 if negative and value else <int64_t>value
    return True


def parse_int(bytes value):
    """The same rule, for the command table's Python handlers."""
    cdef int64_t number
    cdef ArgView arg
    arg.data, arg.size = PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value)
    return number if _parse_int(arg, &number) else None


cdef int64_t _timeout(ArgView arg) except -1:
    cdef int64_t timeout
    if not _parse_int(arg, &timeout):
        raise CommandError(TIMEOUT_NOT_INTEGER)
    if timeout < 0:
        raise CommandError(TIMEOUT_NEGATIVE)
    return timeout


cdef int _check_ids(ArgView* argv, Py_ssize_t first, Py_ssize_t argc) except -1:
    """Every ID well formed, or BADID before anything changes."""
    cdef Py_ssize_t i
    for i in range(first, argc):
        if not id_is_valid(argv[i].data, argv[i].size):
            raise BadIdError(BADID_MESSAGE)
    return 0


@cython.final
cdef class HotCall:
    """One command's run: its node, session, reply buffer, and (when it
    parks) the waiter."""

    def __cinit__(self):
        self.out = WriteBuffer.__new__(WriteBuffer)

    cdef int _reserve(self, Py_ssize_t count) except -1:
        cdef ArgView* grown
        if count > self.views_capacity:
            grown = <ArgView*>PyMem_Realloc(self.views, count * sizeof(ArgView))
            if grown == NULL:
                raise MemoryError()
            self.views = grown
            self.views_capacity = count
        return 0

    def __dealloc__(self):
        PyMem_Free(self.views)

    cdef bytes arg_bytes(self, ArgView arg):
        return PyBytes_FromStringAndSize(arg.data, arg.size)

    cdef Queue known_queue(self, ArgView name):
        """The live queue called `name` if it is the one used last."""
        cdef Queue q = self.recent_queue
        if q is not None and q.live and PyBytes_GET_SIZE(q.name) == name.size \
                and memcmp(PyBytes_AS_STRING(q.name), name.data, name.size) == 0:
            return q
        return None

    cdef bytes queue_name(self, ArgView name):
        """The name as bytes, sharing the queue's own when it exists; the
        queue, or None, is left in `found`."""
        cdef Queue q = self.known_queue(name)
        if q is None:
            key = self.arg_bytes(name)
            existing = self.node.queues.get(key)
            if existing is None:
                self.found = None
                return key
            q = <Queue>existing
            self.recent_queue = q
        self.found = q
        return q.name

    cdef int run(self, int kind, ArgView* argv, Py_ssize_t argc) except -1:
        if kind == HOT_ADDJOB:
            return _addjob(self, argv, argc)
        if kind == HOT_GETJOB:
            return _getjob(self, argv, argc)
        if kind == HOT_ACKJOB:
            _check_ids(argv, 1, argc)
            return self.out.write_number(58, ack_views(self.node, argv + 1, argc - 1))
        if kind == HOT_FASTACK:
            _check_ids(argv, 1, argc)
            return self.out.write_number(58, fast_ack_views(self.node, argv + 1, argc - 1))
        if kind == HOT_NACK:
            return _nack(self, argv, argc)
        if kind == HOT_ENQUEUE:
            _check_ids(argv, 1, argc)
            return self.out.write_number(58, enqueue_views(self.node, argv + 1, argc - 1,
                                                                False))
        if kind == HOT_DEQUEUE:
            _check_ids(argv, 1, argc)
            return self.out.write_number(58, dequeue_views(self.node, argv + 1, argc - 1))
        if kind == HOT_WORKING:
            _check_ids(argv, 1, argc)
            return self.out.write_number(58, job_working(self.node, self.arg_bytes(argv[1])))
        if kind == HOT_QLEN:
            q = self.known_queue(argv[1])
            if q is None:
                return self.out.write_number(58, self.node.queue_length(self.arg_bytes(argv[1])))
            return self.out.write_number(58, (<Queue>q).jobs.count)
        return _ping(self, argv, argc)


cdef int _ping(HotCall call, ArgView* argv, Py_ssize_t argc) except -1:
    """PING [message]"""
    if argc > 2:
        raise CommandError(PING_ARITY)
    if argc == 1:
        return call.out.write_bytes(_PONG)
    return call.out.write_bulk(argv[1].data, argv[1].size)


cdef int _addjob(HotCall call, ArgView* argv, Py_ssize_t argc) except -1:
    """ADDJOB queue job ms-timeout [REPLICATE n] [DELAY s] [RETRY s] [TTL s]
    [MAXLEN n] [ASYNC] [BACKOFF base-ms max-ms] [MAXDELIVERIES n [DEADLETTER queue]]
    [PRIORITY n] [DEDUP key [WINDOW seconds]]"""
    cdef int64_t repl = -1, retry = -1, delay = 0, maxlen = 0, ttl = DEFAULT_TTL_S, timeout
    cdef int64_t backoff_base = 0, backoff_max = 0, max_deliveries = 0
    cdef int64_t priority = DEFAULT_PRIORITY, window = 0, now
    cdef bint async_ = False
    cdef Py_ssize_t i = 4, dedup_at = 0
    cdef NodeCore node = call.node
    cdef Job job
    cdef DedupFields dedup
    deadletter = None
    while i < argc:
        option = argv[i]
        i += 1
        if _is_option(option, b"replicate", 9) and i < argc:
            if not _parse_int(argv[i], &repl) or not 0 < repl <= MAX_REPLICATION:
                raise CommandError(REPLICATE_RANGE)
        elif _is_option(option, b"ttl", 3) and i < argc:
            if not _parse_int(argv[i], &ttl) or ttl <= 0:
                raise CommandError(TTL_POSITIVE)
        elif _is_option(option, b"retry", 5) and i < argc:
            if not _parse_int(argv[i], &retry) or retry < 0:
                raise CommandError(RETRY_NON_NEGATIVE)
        elif _is_option(option, b"delay", 5) and i < argc:
            if not _parse_int(argv[i], &delay) or delay < 0:
                raise CommandError(DELAY_NON_NEGATIVE)
        elif _is_option(option, b"maxlen", 6) and i < argc:
            if not _parse_int(argv[i], &maxlen) or maxlen <= 0:
                raise CommandError(MAXLEN_POSITIVE)
        elif _is_option(option, b"async", 5):
            async_ = True
            continue
        elif _is_option(option, b"backoff", 7) and i + 1 < argc:
            if not _parse_int(argv[i], &backoff_base) or not _parse_int(argv[i + 1], &backoff_max) \
                    or not 0 < backoff_base <= backoff_max <= MAX_BACKOFF_MS:
                raise CommandError(BACKOFF_RANGE)
            i += 1
        elif _is_option(option, b"maxdeliveries", 13) and i < argc:
            if not _parse_int(argv[i], &max_deliveries) or \
                    not 0 < max_deliveries <= MAX_DELIVERIES:
                raise CommandError(MAXDELIVERIES_RANGE)
        elif _is_option(option, b"deadletter", 10) and i < argc:
            deadletter = call.arg_bytes(argv[i])
        elif _is_option(option, b"priority", 8) and i < argc:
            if not _parse_int(argv[i], &priority) or not 0 <= priority <= MAX_PRIORITY:
                raise CommandError(PRIORITY_RANGE)
        elif _is_option(option, b"dedup", 5) and i < argc:
            if not 0 < argv[i].size <= MAX_DEDUP_KEY:
                raise CommandError(DEDUP_KEY_SIZE)
            dedup_at = i
        elif _is_option(option, b"window", 6) and i < argc:
            if not _parse_int(argv[i], &window) or not 0 < window <= MAX_WINDOW_S:
                raise CommandError(WINDOW_POSITIVE)
        else:
            raise CommandError(SYNTAX_ERROR)
        i += 1
    timeout = _timeout(argv[3])
    options = _job_options(call, argv[1], backoff_base, backoff_max, max_deliveries, deadletter,
                           priority)
    name = call.queue_name(argv[1])
    if dedup_at:                          # read by create_job() once it built the job
        dedup.key, dedup.key_len = argv[dedup_at].data, argv[dedup_at].size
        dedup.queue = NULL
        dedup.hash = dedup_hash(name, dedup.key, dedup.key_len)
        dedup_prefetch(node.dedup, dedup.hash)
    elif window:
        raise CommandError(WINDOW_NEEDS_DEDUP)
    now = node.now_ms()                   # the one clock read of the command
    if dedup_at:
        dedup.until_ms = now + (window or ttl) * 1000
    job = create_job(node, name, call.found, argv[2].data, argv[2].size, repl, delay, retry, ttl,
                          maxlen, async_, call.session, timeout, options, now,
                          &dedup if dedup_at else NULL)
    if job is None:
        return _answer_duplicate(call, dedup.earlier, dedup_duplicate(
            node, dedup.earlier, call.session, timeout, repl, now))
    if job.state == WAIT_REPL:
        call.waiter = node_extra(node, job).waiter
        call.overlaps = True
        return HOT_PARKED
    call.out.write(b"+", 1)
    call.out.write(job.id_, JOB_ID_LEN)
    return call.out.write(b"\r\n", 2)


cdef int _answer_duplicate(HotCall call, DedupSlot* first, object waiter) except -1:
    """An ADDJOB whose DEDUP key names an earlier job: its ID, as the first
    ADDJOB was answered, or (a waiter) the wait for that answer (dedup.pxi)."""
    if waiter is not None:
        call.waiter = waiter
        call.overlaps = True
        return HOT_PARKED
    call.out.write(b"+", 1)
    call.out.write(first.id, JOB_ID_LEN)
    return call.out.write(b"\r\n", 2)


cdef int _nack(HotCall call, ArgView* argv, Py_ssize_t argc) except -1:
    """NACK id ... [DELAY seconds]"""
    cdef int64_t delay = -1
    if argc >= 4 and _is_option(argv[argc - 2], b"delay", 5):   # ids first, as in Disque
        if not _parse_int(argv[argc - 1], &delay) or delay < 0:
            raise CommandError(DELAY_NON_NEGATIVE)
        argc -= 2
    _check_ids(argv, 1, argc)
    return call.out.write_number(58, nack_views(call.node, argv + 1, argc - 1,
                                                delay * 1000 if delay >= 0 else -1))


cdef JobOptions _job_options(HotCall call, ArgView queue, int64_t backoff_base,
                             int64_t backoff_max, int64_t max_deliveries, object deadletter,
                             int64_t priority):
    """ADDJOB's options beyond Disque but DEDUP, checked (None when it has
    none)."""
    if deadletter is not None:
        if not max_deliveries:
            raise CommandError(DEADLETTER_NEEDS_MAXDELIVERIES)
        if PyBytes_GET_SIZE(deadletter) == queue.size and \
                memcmp(PyBytes_AS_STRING(deadletter), queue.data, queue.size) == 0:
            raise CommandError(DEADLETTER_SAME_QUEUE)
    if not (backoff_base or max_deliveries):
        return None if priority == DEFAULT_PRIORITY else priority_options(<uint8_t>priority)
    return new_job_options(backoff_base, backoff_max, max_deliveries, deadletter,
                           <uint8_t>priority)


cdef int _getjob(HotCall call, ArgView* argv, Py_ssize_t argc) except -1:
    """GETJOB [NOHANG] [TIMEOUT ms] [COUNT n] [WITHCOUNTERS] FROM queue1 ... queueN
    (or, beyond Disque, PATTERN glob in place of FROM ...)"""
    cdef int64_t timeout = 0, count = 1
    cdef bint nohang = False, withcounters = False
    cdef Py_ssize_t i = 1, first = 0, pattern = 0
    cdef NodeCore node = call.node
    cdef Queue q
    while i < argc:
        option = argv[i]
        i += 1
        if _is_option(option, b"from", 4):
            if i < argc:
                first = i
            break
        elif _is_option(option, b"pattern", 7):
            if i + 1 == argc:             # exactly one glob, and the last word
                pattern = i
            break
        elif _is_option(option, b"nohang", 6):
            nohang = True
        elif _is_option(option, b"withcounters", 12):
            withcounters = True
        elif _is_option(option, b"timeout", 7) and i < argc:
            timeout = _timeout(argv[i])
            i += 1
        elif _is_option(option, b"count", 5) and i < argc:
            if not _parse_int(argv[i], &count) or count <= 0:
                raise CommandError(COUNT_POSITIVE)
            i += 1
        else:
            break
    if pattern:
        return _getjob_pattern(call, call.arg_bytes(argv[pattern]), count, nohang, timeout,
                               withcounters)
    if first == 0:
        raise CommandError(SYNTAX_ERROR)
    if argc - first == 1 and count == 1:      # the usual GETJOB: one job, one queue
        q = call.known_queue(argv[first])
        if q is not None and q.jobs.count and not q.flags & PAUSED_OUT:
            return _write_jobs(call.out, [take_one(node, q)], withcounters)
    names, queues = [], []
    for i in range(first, argc):
        names.append(call.queue_name(argv[i]))
        queues.append(call.found)
    jobs = take_jobs(node, names, queues, count)
    if jobs:
        return _write_jobs(call.out, jobs, withcounters)
    return _nothing_to_give(call, nohang, timeout, withcounters, names, None)


cdef int _getjob_pattern(HotCall call, bytes pattern, int64_t count, bint nohang,
                         int64_t timeout, bint withcounters) except -1:
    """GETJOB ... PATTERN glob: the queues this node knows that match, each
    call starting after the queue that served the pattern last (fair), and
    a parked client woken by any matching queue, new ones included."""
    cdef NodeCore node = call.node
    names = node.hooks.pattern_queues(pattern)
    queues = [node.queues.get(name) for name in names]
    jobs = take_jobs(node, names, queues, count)
    if jobs:
        node.hooks.pattern_served(pattern, (<Job>jobs[len(jobs) - 1]).queue)
        return _write_jobs(call.out, jobs, withcounters)
    return _nothing_to_give(call, nohang, timeout, withcounters, names, pattern)


cdef int _nothing_to_give(HotCall call, bint nohang, int64_t timeout, bint withcounters,
                          list names, bytes pattern) except -1:
    """GETJOB found no job: a null reply (NOHANG), or the client parks on
    the named queues (or on its pattern) until a job or the timeout."""
    cdef NodeCore node = call.node
    if nohang:
        return call.out.write_bytes(_NULL_RESP3 if call.resp3 else _NULL_ARRAY_RESP2)
    if node.leaving:
        raise LeavingError(LEAVING_MESSAGE)
    deadline = node.now_ms() + timeout if timeout else 0
    if pattern is None:
        call.waiter = node.hooks.block(call.session, names, deadline, withcounters)
    else:
        call.waiter = node.hooks.block_pattern(call.session, pattern, deadline, withcounters)
    call.overlaps = False
    return HOT_PARKED


cdef int _write_jobs(WriteBuffer out, list jobs, bint withcounters) except -1:
    """GETJOB's reply: [[queue, id, body(, "nacks", n, "additional-deliveries", n)] ...]"""
    cdef Job job
    out.write_number(42, len(jobs))
    for job in jobs:
        out.write_number(42, 7 if withcounters else 3)
        out.write_bulk(PyBytes_AS_STRING(<object>job.queue_),
                       PyBytes_GET_SIZE(<object>job.queue_))
        out.write_bulk(job.id_, JOB_ID_LEN)
        out.write_bulk(job.body_, job.body_len)
        if withcounters:
            out.write_bytes(_COUNTERS_HEAD)
            out.write_number(58, job.nacks)
            out.write_bytes(_DELIVERIES_HEAD)
            out.write_number(58, job.deliveries)
    return 0


def render_jobs(list jobs, bint withcounters):
    """GETJOB's reply for these jobs, encoded (QPEEK, a parked GETJOB
    answered later)."""
    cdef WriteBuffer out = WriteBuffer.__new__(WriteBuffer)
    _write_jobs(out, jobs, withcounters)
    return out.take()


def run_hot(int kind, NodeCore node, session, list argv):
    """Run a hot command for the command table: returns its encoded reply,
    or (waiter, overlaps) when the client is to park."""
    cdef HotCall call = HotCall.__new__(HotCall)
    cdef Py_ssize_t i, argc = len(argv)
    call.node, call.session = node, session
    call.resp3 = session is not None and session.resp3
    call._reserve(argc)
    for i in range(argc):
        arg = argv[i]
        call.views[i].data = PyBytes_AS_STRING(arg)
        call.views[i].size = PyBytes_GET_SIZE(arg)
    if call.run(kind, call.views, argc) == HOT_PARKED:
        return call.waiter, call.overlaps
    return call.out.take()
