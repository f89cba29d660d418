"""One client connection: bytes in, commands run in order, replies out.

An asyncio.Protocol over a compiled base (engine/net/conn.pxi): the base's
data_received reads the bytes into the request parser and runs the hot
commands itself while the connection is in the plain state; everything
else comes here, to run_commands, which runs every command that arrived in
one read and answers them with one write (a pipelined read's at the end
of the loop turn: the base's write_out, engine/net/conn.pxi says why). The
rules it keeps:

  * Parking: a command that returns Park (GETJOB on empty queues, ADDJOB
    waiting for copies) stops the pipeline; commands that arrive after it
    wait in `pending`, unrun, until the node answers the parked one (an
    effect server/effects.py carries out). The exception: ADDJOBs right
    behind a parked ADDJOB run at once and park too, so a pipelined producer
    pays one replication round trip per batch. Replies go out in command order: a parked command holds
    a place in `_order` that its answer fills. A client that goes away
    while parked is cancelled in the node.
  * Backpressure: when unsent replies pass the transport's high-water mark
    we stop reading from this client until they drain; a parked client that
    keeps sending is paused once PENDING_LIMIT commands are waiting.
  * Protocol errors: commands before the bad bytes run and are answered,
    then the error is written and only this connection is closed.
  * Timing (INFO commandstats, SLOWLOG, LATENCY): one clock read per
    command, taken once its reply is encoded; the run time is the distance
    from the read before (the first command of a read: from the read that
    follows parsing). A command whose handler ran adds it to its
    commandstats; only a run of at least server.slow_after goes further,
    so a command that is not slow costs a clock read, two additions and a
    comparison. The fast path times its commands the same way.
  * Fairness: after a large read the connection stops reading until the
    next loop turn (yield_loop), so a client flooding a pipeline takes its
    turn with the others instead of holding the loop for many reads.
  * Refusals: past maxclients, or a non-local client under protected mode
    (config/protected_mode.py), the connection gets one error and is hung
    up (_refuse); it never gets a session. Over TLS the same class runs
    unchanged behind server/tls_connection.py.
"""

from __future__ import annotations

import asyncio
import socket
from collections import deque

from disque_py.base.errors import CommandError
from disque_py.base.replies import MAX_CLIENTS
from disque_py.commands.context import (REPLY_MUTED, REPLY_OFF, Park, reply_flags_after_command)
from disque_py.engine import ConnectionBase
from disque_py.formats.resp import Raw, encode, encode_into
from disque_py.config import protected_mode

OUTPUT_HIGH_WATER = 4 * 1024 * 1024
OUTPUT_LOW_WATER = 1024 * 1024
PENDING_LIMIT = 10_000
MAX_CLIENTS_ERROR = CommandError(MAX_CLIENTS).wire()
REFUSED_LINGER_S = 1.0
QUIT_OK = Raw(b"+OK\r\n")


class ClientConnection(ConnectionBase, asyncio.Protocol):
    # In the compiled base: server, session, transport, reader (the
    # request parser), pending (commands waiting behind a parked one, or
    # None), pending_error, _order (replies behind a parked command:
    # [bytes|None], or None), held_gen (the AOF batch the replies in _out
    # wait for: deliver), closing, draining (closing once the replies held
    # for the AOF have left), _running (inside _run: replies not written
    # yet), _out (replies kept for the end of the loop turn).
    __slots__ = ("effects", "_reading_paused_for_output",
                 "_reading_paused_for_pending", "_resume_scheduled", "_overlapping", "_yielding")

    def __init__(self, server, effects) -> None:
        """`effects`: the interpreter of the node's effects (server/effects.py)."""
        self.effects = effects
        self.bind_server(server)
        self._reading_paused_for_output = False
        self._reading_paused_for_pending = False
        self._resume_scheduled = False
        self._overlapping = False           # stopped after a parked ADDJOB: more may run
        self._yielding = False              # reading stopped until the next loop turn

    # ----------------------------------------------------------- lifecycle

    def connection_made(self, transport) -> None:
        self.transport = transport
        server = self.server
        if len(server.clients) >= server.config.maxclients:
            self._refuse(MAX_CLIENTS_ERROR)
            return
        peer = transport.get_extra_info("peername")
        if not protected_mode.allows(peer, server.config):
            self._refuse(protected_mode.DENIED)
            return
        transport.set_write_buffer_limits(OUTPUT_HIGH_WATER, OUTPUT_LOW_WATER)
        sock = transport.get_extra_info("socket")
        local = transport.get_extra_info("sockname")
        fd = sock.fileno() if sock is not None else -1
        self.session = server.new_session(_format_addr(peer), _format_addr(local), fd, self)
        keepalive = server.config.tcp_keepalive
        if keepalive and sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            _set_keepalive(sock, keepalive)

    def _refuse(self, reply: bytes) -> None:
        """Answer a connection we do not serve, and hang up without losing
        the answer: closing while the client's first bytes sit unread sends
        a reset, which can destroy the answer before the client reads it.
        So: the answer, then end-of-stream; what the client sends is
        dropped (closing); we close when it does, or after REFUSED_LINGER_S."""
        transport = self.transport
        self.server.stats.rejected_connections += 1
        self.closing = True
        transport.write(reply)
        if transport.can_write_eof():
            transport.write_eof()
            asyncio.get_running_loop().call_later(REFUSED_LINGER_S, transport.close)
        else:
            transport.close()

    def connection_lost(self, exc) -> None:
        self.closing = True
        session = self.session
        if session is not None:
            self.server.drop_session(session)
            session.conn = None
        self.server.paused_conns.discard(self)
        self.pending = None
        self.transport = None
        self.after_commands()

    # ---------------------------------------------------------------- input

    # ------------------------------------------- the engine's hooks (conn.pxd)

    def after_commands(self) -> None:
        """The effects of the commands just run, carried out."""
        self.effects.after_commands()

    def run_commands(self, commands: list, now: float, prefix: bytes | None) -> None:
        """The commands of a read the fast path did not run (the base's
        data_received), after `prefix`: the replies of those it did."""
        server = self.server
        if self.pending is not None:
            if self._overlapping and commands and \
                    server.commands.overlaps_parked(commands[0][0]):
                self.pending = None         # more ADDJOBs behind the parked ones
            else:
                self._queue_pending(commands)
                return
        if commands or prefix:
            if commands and server.paused_until and server.clients_paused():
                self.pending = deque()
                self._queue_pending(commands)
                self._wait_for_unpause()
                return
            self._run(commands, now, prefix)
        if self.reader.error is not None and self.pending is None:
            self._fail(self.reader.error)

    def yield_loop(self) -> None:
        """Stop reading until the next loop turn: the other clients' reads
        of this turn run first."""
        if self._yielding or self._reading_paused_for_output or \
                self._reading_paused_for_pending:
            return
        self._yielding = True
        self.transport.pause_reading()
        asyncio.get_running_loop().call_soon(self._end_yield)

    def _end_yield(self) -> None:
        self._yielding = False
        if not (self.closing or self._reading_paused_for_output or
                self._reading_paused_for_pending):
            self.transport.resume_reading()

    def _queue_pending(self, commands) -> None:
        self._overlapping = False
        self.pending.extend(commands)
        if len(self.pending) > PENDING_LIMIT and not self._reading_paused_for_pending:
            self._reading_paused_for_pending = True
            self.transport.pause_reading()
        if self.reader.error is not None:
            self.pending_error = self.reader.error

    def _run(self, commands, started: float, prefix: bytes | None = None) -> None:
        """Run commands in order until one parks; write all replies at once,
        after `prefix` (replies already made). `started`: the clock when the
        first command may start (see Timing)."""
        server = self.server
        session = self.session
        node = server.node
        dispatch = server.commands.dispatch
        clock = server.monotonic
        out: list = [prefix] if prefix else []
        noted = node.aof.noted                  # the fast path's part: prefix
        ran = 0
        total = len(commands)
        close_after = False
        for argv in commands:
            ran += 1
            name = argv[0]
            if len(name) == 4 and name.lower() == b"quit":
                if not session.reply_flags & REPLY_MUTED:
                    out.append(QUIT_OK)
                close_after = True
                break
            reply = dispatch(server, session, argv)
            if node.ready:
                node.consumers.serve_ready()
            kind = type(reply)
            if session.reply_flags and _muted(session, kind):
                pass
            elif kind is Raw:
                out.append(reply)
            elif kind is not Park:
                encode_into(out, reply, session.resp3)
            now = clock()
            took = now - started
            if session.refused is not argv:
                command = session.last_command
                command.calls += 1
                command.seconds += took
                if took >= server.slow_after:          # read each time: CONFIG SET
                    server.command_took(command, argv, took)
            started = now
            if kind is Park:
                self._hold_place(reply.waiter, out)
                out = []
                if reply.overlaps and (ran == total or
                                       server.commands.overlaps_parked(commands[ran][0])):
                    if ran < total:
                        continue
                    self._overlapping = True
                self.pending = deque(commands[ran:])
                break
            if server.paused_until and ran < total and server.clients_paused():
                self.pending = deque(commands[ran:])        # CLIENT PAUSE
                self._wait_for_unpause()
                break
        server.stats.commands_processed += ran
        if out and self._order is not None:
            self._order.append([b"".join(out)])     # behind a parked reply
            out = []
        self._running = True
        try:
            self.after_commands()  # effects first: AOF records, other clients
        finally:
            self._running = False
        if out:
            self.deliver(b"".join(out), total > 1 or prefix is not None,
                         prefix is not None or node.aof.noted != noted)
        elif self._order:
            self.flush_order()
        if close_after or session.kill_requested:
            self.close_after_replies()

    def park(self, waiter, overlaps: bool, ready: bytes | None) -> None:
        """The fast path parked a command (after `ready`, the replies of the
        commands before it): what the client sends next waits in `pending`,
        except the ADDJOBs right behind an overlapping one (run_commands)."""
        self._hold_place(waiter, [ready] if ready else [])
        self.pending = deque()
        self._overlapping = overlaps

    def _hold_place(self, waiter, ready: list) -> None:
        """Keep the parked command's place in the reply order."""
        order = self._order
        if order is None:
            order = self._order = deque()
        if ready:
            order.append([b"".join(ready)])
        slot = [None]
        order.append(slot)
        self.session.waiting[waiter] = slot

    def resume(self, waiter, reply) -> bool:
        """A parked command is answered: its reply takes its place in order.
        True if flush_resumed() is to be called (once for all the answers
        of one batch, so that they leave in one write)."""
        slot = self.session.waiting.pop(waiter, None)
        if self.closing or slot is None:
            return False
        session = self.session
        slot[0] = b"" if session.reply_flags & REPLY_OFF else encode(reply, session.resp3)
        return True

    def flush_resumed(self) -> None:
        """Write what is now in order, then, once nothing is parked, run
        what queued up (on the next loop turn: not inside the caller)."""
        if self.closing:
            return
        if not self._running:
            self.flush_order()
        if self.session.waiting or self._resume_scheduled:
            return
        pending = self.pending
        if pending is not None and not pending and self.pending_error is None \
                and not self._reading_paused_for_pending:
            self.pending = None         # nothing queued behind: unparked now
            self._overlapping = False
            return
        self._schedule_pending()

    def _schedule_pending(self) -> None:
        if not self._resume_scheduled and not self.closing:
            self._resume_scheduled = True
            asyncio.get_running_loop().call_soon(self._run_pending)

    def _wait_for_unpause(self) -> None:
        """Stop here until CLIENT PAUSE is over (`pending` holds the rest)."""
        server = self.server
        server.paused_conns.add(self)
        if server.unpause_timer is None:
            server.unpause_timer = asyncio.get_running_loop().call_later(
                server.paused_until - server.monotonic(), _unpause, server)

    def flush_order(self) -> None:
        order = self._order
        ready = []
        while order and order[0][0] is not None:
            ready.append(order.popleft()[0])
        if not order:
            self._order = None
        if ready:
            self.deliver(b"".join(ready))

    def _run_pending(self) -> None:
        self._resume_scheduled = False
        pending = self.pending
        if self.closing or pending is None or self.session.waiting:
            return
        if self.server.paused_until and self.server.clients_paused():
            self._wait_for_unpause()
            return
        self.pending = None
        self._overlapping = False
        if self._reading_paused_for_pending:
            self._reading_paused_for_pending = False
            if not self._reading_paused_for_output and not self._yielding:
                self.transport.resume_reading()
        if pending:
            self._run(list(pending), self.server.monotonic())
        error = self.pending_error
        if error is not None and self.pending is None:
            self._fail(error)

    def _fail(self, error) -> None:
        self.deliver(error.wire())
        self.close_after_replies()

    def _close(self) -> None:
        if not self.closing or self.draining:
            self.closing = True
            self.draining = False
            if self.transport is not None:
                self.flush_out()           # the replies kept for the turn's end
                self.transport.close()

    def close_after_replies(self) -> None:
        """Close once every reply owed has left (QUIT, a protocol error, a
        client that killed itself), as Disque does: those still held for
        the AOF (deliver) go first. Meanwhile nothing more is read or run
        (closing), and write_out takes only those (draining)."""
        if not self.holding_replies:
            self._close()
            return
        self.closing = True
        self.draining = True
        self.transport.pause_reading()

    # --------------------------------------------------------------- output

    def send(self, payload: bytes) -> None:
        """Bytes from elsewhere (MONITOR feed, SHUTDOWN's failure)."""
        if not self.session.reply_flags & REPLY_OFF:
            self.write_out(payload)      # behind any reply still waiting for the AOF

    def pause_writing(self) -> None:
        self._reading_paused_for_output = True
        self.transport.pause_reading()

    def resume_writing(self) -> None:
        self._reading_paused_for_output = False
        if not self._reading_paused_for_pending and not self.closing and not self._yielding:
            self.transport.resume_reading()

    def input_buffered(self) -> int:
        return self.reader.buffered

    def output_buffered(self) -> int:
        transport = self.transport
        kept = self.unflushed_bytes()
        return kept + transport.get_write_buffer_size() if transport is not None else kept

    def eof_received(self):
        """The client is done sending (over TLS, in the same read as its
        last commands): their replies leave before the transport closes."""
        self.flush_out()

    def close(self) -> None:
        """Close from elsewhere (CLIENT KILL, idle timeout). A client that
        killed itself is closed by _run once its reply is written."""
        if not self._running:
            self._close()

    def drop(self) -> None:
        """Close now, even while its commands run: replies it was owed were
        dropped (ServerCore.take_failed), so no later one may reach the
        client, which would take it for the answer to an earlier command."""
        self._close()


def _muted(session, kind) -> bool:
    """CLIENT REPLY: whether this command's reply is dropped; moves the
    flags on to the next command. A parked command's reply is judged when
    it comes (resume): Disque drops it only if replies are still OFF."""
    flags = session.reply_flags
    session.reply_flags = reply_flags_after_command(flags)
    return kind is not Park and bool(flags & REPLY_MUTED)


def _unpause(server) -> None:
    """CLIENT PAUSE is over (or was extended: wait again)."""
    server.unpause_timer = None
    if server.clients_paused():
        server.unpause_timer = asyncio.get_running_loop().call_later(
            server.paused_until - server.monotonic(), _unpause, server)
        return
    waiting, server.paused_conns = server.paused_conns, set()
    for conn in waiting:
        conn._schedule_pending()


def _format_addr(addr) -> str:
    if isinstance(addr, tuple) and len(addr) >= 2:
        host = addr[0]
        return f"[{host}]:{addr[1]}" if ":" in host else f"{host}:{addr[1]}"
    return str(addr or "")


def _set_keepalive(sock: socket.socket, interval: int) -> None:
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    if hasattr(socket, "TCP_KEEPIDLE"):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, interval)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, max(interval // 3, 1))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, 3)
