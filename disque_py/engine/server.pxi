# The server state the connection's fast path reads on every command,
# as C fields: the bases of server/state.py's ServerState, Session and
# Stats and of commands/'s Command. The Python classes add everything
# else; Python code reads and writes these fields as plain attributes.


cdef class StatsCore:
    """The counters INFO stats shows (server/state.py's Stats adds the rates)."""


cdef class SessionCore:
    """What the fast path reads and writes of one client's session."""


cdef class CommandCore:
    """A command's table entry as the fast path needs it: arity, flags, the
    hot command it is (0: none) and its INFO commandstats."""


cdef class ServerCore:
    """The switches of the fast path and the table of hot commands."""

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

    def monotonic(self):
        return self.now()

    cdef bint disk_accepts(self) except -1:
        """False while the AOF cannot take records (-MISCONF). With no AOF
        (the node emits no records) there is nothing to ask."""
        if not self.node.aof_enabled or self.persistence is None:
            return True
        return self.persistence.accepting
