# The server state the connection's fast path reads on every command,
# as C fields: the bases of server/state.py's ServerState, Session and
# Stats and of commands/'s Command. The Python classes add everything
# else; Python code reads and writes these fields as plain attributes.
#
# What ServerCore calls on the server layer is declared (server.pxd):
# schedule_flush (the event loop's turn ends), write_aof (the turn's AOF
# records are written), write_bus (the turn's frames to peers are
# written), aof_accepts (-MISCONF) and command_took (a slow command),
# which ServerState overrides; a subclass
# that lacks one is refused when it is made (require_overrides, which the
# connection's base uses too).

cdef tuple SERVER_HOOKS = ("schedule_flush", "write_aof", "write_bus", "aof_accepts",
                           "command_took")
cdef set _checked_types = set()


cdef int require_overrides(type cls, type base, tuple names) except -1:
    """A subclass of `base` must override each hook in `names`: a method
    renamed on one side fails here, at the subclass's first instance, not
    on the rare path that would have called it."""
    if cls is base or cls in _checked_types:
        return 0
    missing = [name for name in names if getattr(cls, name) is getattr(base, name)]
    if missing:
        raise TypeError("%s must override the engine's hooks %s" % (cls.__name__,
                                                                    ", ".join(missing)))
    _checked_types.add(cls)
    return 0


cdef class StatsCore:
    """The counters INFO stats shows (server/state.py's Stats adds the rates)."""


cdef class SessionCore:
    """What the fast path reads and writes of one client's session."""


cdef class CommandCore:
    """A command's table entry as the fast path needs it: arity, flags, the
    hot command it is (0: none) and its INFO commandstats."""


cdef class ServerCore:
    """The switches of the fast path, the table of hot commands, and the
    connections whose replies leave at the end of this loop turn."""

    def __cinit__(self, *args, **kwargs):
        require_overrides(type(self), ServerCore, SERVER_HOOKS)
        self._unflushed = []
        self._waiting = []

    # ------------------------------------------- hooks: the server layer's

    cpdef schedule_flush(self):
        """Call flush_replies once this loop turn has read every socket ready."""
        raise NotImplementedError

    cpdef write_aof(self):
        """Write the AOF records of this turn (AofLog.take) before its
        replies leave; then advance the log's batches, or fail the replies
        that waited for a batch that could not be written (take_failed)."""
        raise NotImplementedError

    cpdef write_bus(self):
        """Write each peer's frames that may leave now (the node's
        BusOutbox.take, given the AOF's released batch), one write per peer."""
        raise NotImplementedError

    cpdef bint aof_accepts(self) except -1:
        """Whether the AOF takes records now (False: -MISCONF)."""
        raise NotImplementedError

    cpdef command_took(self, command, list argv, double seconds):
        """A command's handler ran at least slow_after seconds."""
        raise NotImplementedError

    # --------------------------------------------------------------- state

    def set_hot_commands(self, entries):
        """(name, Command) for each hot command under its current name
        (rename-command applied): the names the fast path answers to."""
        cdef Py_ssize_t i
        cdef bytes name
        self._hot_names = [(bytes(name).lower(), command) for name, command in entries]
        if len(self._hot_names) > MAX_HOT_NAMES:
            raise ValueError("too many hot commands")
        self._hot_count = len(self._hot_names)
        for i in range(self._hot_count):
            name, command = self._hot_names[i]
            self._hot[i].name = PyBytes_AS_STRING(name)
            self._hot[i].size = PyBytes_GET_SIZE(name)
            self._hot[i].command = <PyObject*>command

    cdef CommandCore hot_command(self, const char* name, Py_ssize_t size):
        """The hot command called `name` (any case), or None."""
        cdef Py_ssize_t i, j
        cdef const char* known
        for i in range(self._hot_count):
            if self._hot[i].size != size:
                continue
            known = self._hot[i].name
            for j in range(size):
                if (name[j] | 32) != known[j]:
                    break
            else:
                return <CommandCore>self._hot[i].command
        return None

    cdef double now(self) except? -1:
        """The clock commands are timed with: time.monotonic's, or the
        callable in timing_clock (tests)."""
        if self.timing_clock is None:
            return _monotonic()
        return self.timing_clock()

    cdef int want_flush(self, ConnectionBase conn) except -1:
        """Write conn's replies once this loop turn has read every socket
        ready (conn.pxi says why)."""
        self._unflushed.append(conn)
        if not self._flush_scheduled:
            self.schedule_flush()           # first: if it raises, the next call retries
            self._flush_scheduled = True
        return 0

    def output_due(self):
        """The AofLog's on_records hook and the BusOutbox's on_frames: this
        turn has records or frames to write at its end."""
        if not self._flush_scheduled:
            self.schedule_flush()
            self._flush_scheduled = True

    def flush_replies(self):
        """The turn's end: its AOF records first, then its frames to peers
        and its replies, one write per peer and per connection (those
        waiting for an fsync wait on)."""
        cdef ConnectionBase conn
        cdef uint64_t released
        cdef BusOutbox bus_out = self.node.bus_out
        self._flush_scheduled = False
        if self.node.aof.scheduled:
            self.write_aof()
        if bus_out is not None and bus_out._dirty:
            self.write_bus()
        unflushed = self._unflushed
        self._unflushed = []
        if not unflushed:
            return
        self._batching = len(unflushed) > 1
        self._last_writer = <void*>unflushed[len(unflushed) - 1]
        released = self.node.aof.released_gen
        error = None
        for conn in unflushed:
            try:
                self._write_or_wait(conn, released)
            except Exception as exc:
                error = exc                # the others still get their replies
        if error is not None:
            raise error                    # the loop's exception handler logs it

    cdef int _write_or_wait(self, ConnectionBase conn, uint64_t released) except -1:
        if conn._out is None:
            return 0                       # closed meanwhile, or its replies failed
        if conn.held_gen > released:
            self._waiting.append(conn)     # an fsync will release it
            return 0
        conn.flush_out()
        if conn.draining:
            conn.close_after_replies()     # what it owed has left
        return 0

    def release_held(self):
        """The AOF's released batch advanced (an fsync ended): write the
        replies that waited for it."""
        cdef ConnectionBase conn
        cdef BusOutbox bus_out = self.node.bus_out
        if bus_out is not None and bus_out._dirty:
            self.write_bus()               # confirmations held for the fsync
        if not self._waiting:
            return                         # every turn calls it: most have none
        waiting = self._waiting
        self._waiting = []
        released = self.node.aof.released_gen
        for conn in waiting:
            self._write_or_wait(conn, released)

    def take_failed(self, uint64_t first, uint64_t last):
        """The connections whose replies wait for a batch from `first` to
        `last` that could not be made durable: their replies are dropped
        (they must not claim success), and the caller closes them."""
        cdef ConnectionBase conn
        if self.node.bus_out is not None:
            self.node.bus_out.drop_held(first, last)
        failed = []
        for group in (self._unflushed, self._waiting):
            for conn in group:
                if conn._out is not None and first <= conn.held_gen <= last:
                    conn._out = None
                    conn.held_gen = 0
                    failed.append(conn)
        return failed

    def monotonic(self):
        return self.now()

    cdef bint disk_accepts(self) except -1:
        """False while the AOF cannot take records (-MISCONF). With no AOF
        (the node emits no records) there is nothing to ask."""
        if not self.node.aof_enabled:
            return True
        return self.aof_accepts()
