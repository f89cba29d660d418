# One client connection's input: the fast path of the command loop.
#
# ConnectionBase is the compiled base of server/protocol.py's
# ClientConnection (an asyncio.Protocol). data_received() reads the bytes
# into the connection's RequestParser and, while the connection is in the
# plain state (nothing parked or queued, no CLIENT REPLY flags, no CLIENT
# PAUSE, no MONITOR, authenticated if a password is set), runs the hot
# commands here, one after the other, replies into one buffer, timing each
# for INFO commandstats, SLOWLOG and the latency monitor exactly as the
# Python loop does. A command that parks (an ADDJOB waiting for its copies,
# a blocking GETJOB) parks here as it does there (ClientConnection.park,
# which keeps its place in the reply order), and what the read holds after
# it goes to the Python loop. At the first command it does not own (another
# command, one refused before its handler, an inline command, a protocol
# error) it hands that command and the rest of the read, with the replies
# made so far, to run_commands, the Python loop.
#
# What it calls on the server layer is declared (conn.pxd): the hooks
# run_commands, park, yield_loop, flush_order, close_after_replies and
# after_commands, which ClientConnection overrides (a subclass that
# lacks one is refused at its first connection: require_overrides). It
# never opens, reads or closes a socket: bytes come in through
# data_received, and replies leave through the transport the server layer
# gives it (its write method), or at the end of the loop turn.
#
# Fairness: a connection whose read was large yields the event loop after
# it (reading pauses until the next loop turn), so one client's pipeline
# cannot hold every other client and the cluster bus for many reads.
#
# Output: every reply to the client (both loops', resumed commands',
# MONITOR's) goes through write_out. While several connections send
# pipelines, the replies to a pipelined read wait until the loop turn has
# read every socket ready (ServerCore.flush_replies, called soon), then
# leave in one write per connection; anything written to a connection
# with replies waiting waits behind them, and closing writes them first.
# Why: a write to a client asleep in its poll wakes it, and on a VM a
# wakeup is an interprocessor interrupt that costs the writer
# microseconds (perf: 9-17 % of a node's CPU under redis-benchmark -c 50
# -P 16, in the kernel under write()); writes that leave together find
# the client awake after the first (Redis writes in its beforeSleep for
# the same reason). Otherwise replies leave at once: the callback that
# flushes costs ~3,000 instructions a turn (callgrind), more than one
# command, and there is nothing to write together with. So: a lone
# command's reply leaves at once; a pipelined read's waits when the last
# flush wrote to several connections, or when the last reply written went
# to another connection (the flush then says whether others follow).
#
# Replies and the AOF (deliver): a reply made while the AOF has records
# of this turn not yet written may show what they hold, so it waits in
# _out for the turn's end, where ServerCore.flush_replies writes the
# records first (one write per turn, as Redis does in beforeSleep); with
# appendfsync always it waits further, until an fsync covers them
# (held_gen: the batch it waits for, aof/log.pxi). Anything written to the
# connection meanwhile waits behind it. A reply made when no record waits,
# or by a batch of commands that noted none (a read: AofLog.noted did not
# move), leaves as above: the AOF costs it nothing.

from libc.math cimport INFINITY

from disque_py.base.errors import DisqueError

cdef extern from "<time.h>" nogil:
    clockid_t CLOCK_MONOTONIC

cdef enum:
    YIELD_AFTER_BYTES = 32 * 1024        # a read this large yields the loop after it


cdef inline double _monotonic() noexcept nogil:
    """time.monotonic(), which the Python side reads too."""
    cdef timespec now
    clock_gettime(CLOCK_MONOTONIC, &now)
    return now.tv_sec + now.tv_nsec * 1e-9


cdef tuple CONNECTION_HOOKS = ("run_commands", "park", "yield_loop", "flush_order",
                               "close_after_replies", "after_commands")


cdef class ConnectionBase:

    def __cinit__(self, *args, **kwargs):
        require_overrides(type(self), ConnectionBase, CONNECTION_HOOKS)
        self.reader = RequestParser.__new__(RequestParser)
        self.call = HotCall.__new__(HotCall)

    # ------------------------------------------- hooks: the server layer's

    cpdef run_commands(self, list commands, double started, bytes replies):
        """The Python loop: run `commands` (the rest of a read the fast path
        did not run), after `replies`, those of the commands it did."""
        raise NotImplementedError

    cpdef park(self, waiter, bint overlaps, bytes replies):
        """A command parked on `waiter` after `replies` (those before it):
        keep its place in the reply order; later commands wait unless it
        `overlaps` (an ADDJOB waiting for copies: ADDJOBs behind it run)."""
        raise NotImplementedError

    cpdef yield_loop(self):
        """Stop reading until the next loop turn (a large read was served)."""
        raise NotImplementedError

    cpdef flush_order(self):
        """Write the replies answered in order before a parked command's."""
        raise NotImplementedError

    cpdef close_after_replies(self):
        """Close once every reply owed has left (the client killed itself)."""
        raise NotImplementedError

    cpdef after_commands(self):
        """Carry out the effects of the commands just run (AOF records,
        other clients' answers, kills, shutdown) before this one's replies."""
        raise NotImplementedError

    # ------------------------------------------------------------ the path

    def bind_server(self, ServerCore server):
        self.server = server
        self.call.node = server.node

    @property
    def transport(self):
        return self._transport

    @transport.setter
    def transport(self, transport):
        self._transport = transport
        self._transport_write = transport.write if transport is not None else None

    @cython.binding(False)
    def data_received(self, bytes data):
        cdef ServerCore server = self.server
        cdef SessionCore session = self.session
        cdef Py_ssize_t size = PyBytes_GET_SIZE(data)
        cdef double now
        if self.closing:
            return
        server.stats.net_input_bytes += size
        self.reader.append(PyBytes_AS_STRING(data), size)
        now = server.now()
        session.last_interaction = now
        if self.pending is None and self._order is None and session.reply_flags == 0 \
                and server.paused_until == 0.0 and not server.monitors \
                and (session.authenticated or not server._requirepass):
            self._run_fast(now)
        else:
            self.run_commands(self.reader.take_all(), now, None)
        if size >= YIELD_AFTER_BYTES and not self.closing and self._transport is not None:
            self.yield_loop()

    cdef int _run_fast(self, double started) except -1:
        cdef ServerCore server = self.server
        cdef SessionCore session = self.session
        cdef NodeCore node = server.node
        cdef RequestParser reader = self.reader
        cdef HotCall call = self.call
        cdef CommandCore command
        cdef Py_ssize_t ran = 0, argc, i
        cdef int status = HOT_DONE
        cdef int disk = -1             # unknown until a command needs it
        cdef double now, took
        cdef uint64_t noted = node.aof.noted     # did the batch note AOF records?
        call.session = session
        call.resp3 = session.resp3
        while reader.next_command() == PARSE_COMMAND and reader.inline_argv is None:
            argc = reader.argc
            command = server.hot_command(reader.arg(0), reader.arg_size(0))
            if command is None or node.used_memory > node.memory_evict_at:
                break                  # not ours; or memory may need freeing first
            if (command.arity > 0 and command.arity != argc) or argc < -command.arity:
                break
            if command.needs_disk:
                if disk < 0:
                    disk = server.disk_accepts()
                if not disk:
                    break
            call._reserve(argc)
            for i in range(argc):
                call.views[i].data = reader.arg(i)
                call.views[i].size = reader.arg_size(i)
            session.last_command = command
            try:
                status = call.run(command.hot, call.views, argc)
            except DisqueError as error:
                call.out.write_bytes(error.wire())
                status = HOT_DONE
            ran += 1
            if node.ready:
                node.hooks.serve_ready()
            now = server.now()
            took = now - started
            started = now
            command.calls += 1
            command.seconds += took
            if took >= server.slow_after:
                server.command_took(command, reader.argv(), took)
            reader.consume()
            if status == HOT_PARKED:
                self.park(call.waiter, call.overlaps, call.out.take() if call.out.size else None)
                break
        server.stats.commands_processed += ran
        if reader.next_command() != PARSE_MORE or reader.error is not None:
            if status == HOT_PARKED:
                self._finish_fast(True, node.aof.noted != noted)   # the replies before it
                                                                  # leave now, as Disque's do
            self.run_commands(reader.take_all(), started,
                              call.out.take() if call.out.size else None)
            return 0
        self._finish_fast(ran > 1, node.aof.noted != noted)
        return 0

    cdef int _finish_fast(self, bint pipelined, bint wrote) except -1:
        """What the Python loop does after a batch: effects first (AOF
        records, other clients), then this client's replies (see Output)."""
        cdef ServerCore server = self.server
        if server.node.effects or server.kills or server.shutdown_request is not None:
            self._running = True
            try:
                self.after_commands()
            finally:
                self._running = False
        if not self.call.out.size:
            if self._order:
                self.flush_order()            # what was answered before a parked command
        else:
            self.deliver(self.call.out.take(), pipelined, wrote)
        if self.session.kill_requested:
            self.close_after_replies()
        return 0

    cpdef deliver(self, bytes payload, bint pipelined=False, bint wrote=True):
        """Write replies now (at the turn's end for a pipelined read), or
        once the AOF records they may depend on are written (see above).
        `wrote`: False for the replies of a batch that noted no record,
        which wait for none (a read, under appendfsync always too)."""
        cdef ServerCore server = self.server
        cdef uint64_t gen = server.node.aof.reply_gen() \
            if wrote and server.node.aof_enabled else 0
        if gen == 0:
            self.write_out(payload, pipelined)
            return
        if (self.closing and not self.draining) or self._transport is None:
            return
        if gen > self.held_gen:
            self.held_gen = gen
        server.stats.net_output_bytes += PyBytes_GET_SIZE(payload)
        if self._out is not None:
            self._out.append(payload)
        else:
            self._out = [payload]
            server.want_flush(self)

    @property
    def holding_replies(self):
        """Whether replies wait for the AOF (closing waits for them)."""
        return self.held_gen > self.server.node.aof.released_gen

    cpdef write_out(self, bytes payload, bint pipelined=False):
        """Send replies now, or at the end of this loop turn (see Output)."""
        cdef ServerCore server = self.server
        if (self.closing and not self.draining) or self._transport is None:
            return
        server.stats.net_output_bytes += PyBytes_GET_SIZE(payload)
        if self._out is not None:
            self._out.append(payload)
        elif pipelined and (server._batching or server._last_writer != <void*>self):
            self._out = [payload]
            server.want_flush(self)
        else:
            server._last_writer = <void*>self
            self._transport_write(payload)

    cpdef flush_out(self):
        """Write the replies kept (a connection closing writes them first),
        but not those still waiting for the AOF: a closing connection drops
        them (their outcome is unknown to the client)."""
        cdef list out = self._out
        if out is None or self.held_gen > self.server.node.aof.released_gen:
            return
        self.held_gen = 0
        self._out = None
        if self._transport is not None:
            self._transport_write(out[0] if len(out) == 1 else b"".join(out))

    def unflushed_bytes(self):
        """The size of the replies kept for the end of this loop turn."""
        return sum(len(payload) for payload in self._out) if self._out else 0
