"""Every command the client sends, as a value: its words and how to read
its reply. No I/O happens here, so the blocking and the asyncio clients
share one encoding and one parsing of each command (sans-IO).

A builder returns a `Call`: the command's words, the function that makes
the typed answer from redis-py's parsed reply, the job IDs it names (the
client routes a call on them to the node that made the jobs), whether it
is safe to send again on another node after a lost connection, and whether
its answer is jobs handed out (the client counts their producers), and
how long the server may wait before it answers. The
server checks every value; the client only builds the words, so a bad
value gets the server's own error.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Generic, Literal, TypedDict, TypeVar

from disque_py.client.replies import (
    parse_config, parse_count, parse_hello, parse_id, parse_info, parse_jobs, parse_pong,
    parse_qstat, parse_raw, parse_scan_ids, parse_scan_jobs, parse_show, parse_statuses,
    parse_text, parse_truth, ScanPage,
)
from disque_py.client.serializers import RAW, Serializer
from disque_py.client.types import Hello, Job, JobInfo, QueueStat

T = TypeVar("T")
Arg = bytes | str | int | float

# ADDJOB waits this long for its copies unless told otherwise (Disque's
# clients all pass one; 0 would wait as long as it takes).
DEFAULT_ADD_TIMEOUT_MS = 5000


class Call(Generic[T]):
    """One command: its words, and how its reply becomes the answer."""

    __slots__ = ("args", "parse", "job_ids", "retry_safe", "hands_out", "blocks_ms")

    def __init__(self, args: tuple[Arg, ...], parse: Callable[[Any, Serializer], T],
                 job_ids: Sequence[str] = (), retry_safe: bool = True,
                 hands_out: bool = False, blocks_ms: int | None = None) -> None:
        self.args = args
        self.parse = parse
        self.job_ids = job_ids
        self.retry_safe = retry_safe
        self.hands_out = hands_out
        # How long the server may hold the reply back (GETJOB, WAITJOB,
        # QWAIT, ADDJOB waiting for its copies): 0 for as long as it takes;
        # None for a call that answers at once. The client's socket timeout
        # is stretched by as much.
        self.blocks_ms = blocks_ms


def name(text: str | bytes) -> bytes:
    """A queue name's bytes: a str that held non-UTF-8 bytes as surrogates
    (types.py) goes back as those bytes."""
    if isinstance(text, bytes):
        return text
    return text.encode("utf-8", "surrogateescape")


# --------------------------------------------------------------- ADDJOB

class AddOptions(TypedDict, total=False):
    """ADDJOB's options, as keyword arguments (Disque's units: `timeout`
    in milliseconds, `delay`, `retry`, `ttl` and `window` in seconds;
    `backoff` is (base-ms, max-ms))."""

    timeout: int
    replicate: int
    delay: int
    retry: int
    ttl: int
    maxlen: int
    async_: bool
    priority: int
    backoff: tuple[int, int]
    max_deliveries: int
    deadletter: str
    dedup: str | bytes
    window: int


# Keyword -> ADDJOB word, in the order they are written.
_ADD_WORDS = (("replicate", b"REPLICATE"), ("delay", b"DELAY"), ("retry", b"RETRY"),
              ("ttl", b"TTL"), ("maxlen", b"MAXLEN"), ("priority", b"PRIORITY"),
              ("max_deliveries", b"MAXDELIVERIES"))
_ADD_KEYWORDS = frozenset(("timeout", "async_", "backoff", "deadletter", "dedup", "window",
                           *(key for key, _ in _ADD_WORDS)))


def add(codec: Serializer, queue: str, body: Any, options: AddOptions) -> Call[str]:
    """ADDJOB queue body timeout [options]: the new job's ID.

    Raises NoReplError when the copies were not made in time (the job was
    not added), PausedError, MaxlenError, LeavingError, OOMError. A call
    with `dedup` is sent again on another node when the connection is lost
    (the key makes that safe); one without is not."""
    timeout = options.get("timeout", DEFAULT_ADD_TIMEOUT_MS)
    data = body if type(body) is bytes and codec is RAW else codec.dumps(body)
    args: tuple[Arg, ...] = (b"ADDJOB", name(queue), data, timeout)
    if len(options) <= ("timeout" in options):     # the common case, kept short: it is
        return Call(args, parse_id, (), False, False, timeout)      # most of a pipeline
    args += _add_options(options)
    return Call(args, parse_id, retry_safe=options.get("dedup") is not None,
                blocks_ms=None if options.get("async_") else timeout)


def _add_options(options: AddOptions) -> tuple[Arg, ...]:
    unknown = options.keys() - _ADD_KEYWORDS
    if unknown:
        raise TypeError(f"unknown ADDJOB option(s): {', '.join(sorted(unknown))}")
    words: list[Arg] = []
    for key, word in _ADD_WORDS:
        value: Any = options.get(key)
        if value is not None:
            words += (word, value)
    if options.get("async_"):
        words.append(b"ASYNC")
    backoff = options.get("backoff")
    if backoff is not None:
        words += (b"BACKOFF", backoff[0], backoff[1])
    for key, word in (("deadletter", b"DEADLETTER"), ("dedup", b"DEDUP")):
        value = options.get(key)
        if value is not None:
            words += (word, name(value))
    if options.get("window") is not None:
        words += (b"WINDOW", options["window"])
    return tuple(words)


# --------------------------------------------------------------- GETJOB

def get(queues: Sequence[str], count: int | None = None, timeout: int | None = None,
        nohang: bool = False, with_counters: bool = False,
        pattern: str | None = None) -> Call[list[Job]]:
    """GETJOB: up to `count` jobs (default 1) from `queues`, or from every
    queue matching `pattern` (disque-py's PATTERN). Without `timeout` (ms)
    or `nohang` it waits until a job comes; an empty list means none came."""
    if bool(queues) == (pattern is not None):
        raise ValueError("get() takes queue names or pattern=, one of the two")
    args: list[Arg] = [b"GETJOB"]
    if nohang:
        args.append(b"NOHANG")
    if timeout is not None:
        args += (b"TIMEOUT", timeout)
    if count is not None:
        args += (b"COUNT", count)
    if with_counters:
        args.append(b"WITHCOUNTERS")
    if pattern is not None:
        args += (b"PATTERN", name(pattern))
    else:
        args.append(b"FROM")
        args += [name(queue) for queue in queues]
    return Call(tuple(args), parse_jobs, hands_out=True,
                blocks_ms=None if nohang else timeout or 0)


# ---------------------------------------------------------- job commands

def _ids(job_ids: Sequence[str]) -> tuple[str, ...]:
    if not job_ids:
        raise ValueError("name at least one job ID")
    return tuple(job_ids)


def ack(job_ids: Sequence[str]) -> Call[int]:
    """ACKJOB: acknowledge the jobs; the number of jobs known here that
    were acknowledged now."""
    ids = _ids(job_ids)
    return Call((b"ACKJOB", *ids), parse_count, ids)


def fastack(job_ids: Sequence[str]) -> Call[int]:
    """FASTACK: acknowledge and delete at once, best effort in a cluster."""
    ids = _ids(job_ids)
    return Call((b"FASTACK", *ids), parse_count, ids)


def nack(job_ids: Sequence[str], delay: int | None = None) -> Call[int]:
    """NACK: put the jobs back in their queues now, or after `delay`
    seconds (disque-py's NACK DELAY); their BACKOFF applies when set."""
    ids = _ids(job_ids)
    tail: tuple[Arg, ...] = () if delay is None else (b"DELAY", delay)
    return Call((b"NACK", *ids, *tail), parse_count, ids)


def working(job_id: str) -> Call[int]:
    """WORKING: postpone the job's next delivery; the seconds it was
    postponed by (its RETRY). TooLateError past half its TTL."""
    return Call((b"WORKING", job_id), parse_count, (job_id,))


def enqueue(job_ids: Sequence[str]) -> Call[int]:
    """ENQUEUE: queue the jobs again if they are not queued."""
    ids = _ids(job_ids)
    return Call((b"ENQUEUE", *ids), parse_count, ids)


def dequeue(job_ids: Sequence[str]) -> Call[int]:
    """DEQUEUE: take the jobs out of their queues (they stay known)."""
    ids = _ids(job_ids)
    return Call((b"DEQUEUE", *ids), parse_count, ids)


def delete(job_ids: Sequence[str]) -> Call[int]:
    """DELJOB: forget the jobs on this node."""
    ids = _ids(job_ids)
    return Call((b"DELJOB", *ids), parse_count, ids)


def show(job_id: str) -> Call[JobInfo | None]:
    """SHOW: the job as this node knows it, or None."""
    return Call((b"SHOW", job_id), parse_show, (job_id,))


JobStatus = Literal["acked", "deleted", "expired", "unknown", "pending"]


def wait(job_ids: Sequence[str], timeout: int | None = None) -> Call[list[str]]:
    """WAITJOB: block until every job is done as far as this node knows
    (or `timeout` ms); one status per ID, in order: acked, deleted,
    expired, unknown or pending."""
    ids = _ids(job_ids)
    tail: tuple[Arg, ...] = () if timeout is None else (b"TIMEOUT", timeout)
    return Call((b"WAITJOB", *ids, *tail), parse_statuses, ids, blocks_ms=timeout or 0)


# -------------------------------------------------------- queue commands

def qlen(queue: str) -> Call[int]:
    """QLEN: jobs queued in `queue` on this node."""
    return Call((b"QLEN", name(queue)), parse_count)


def qpeek(queue: str, count: int) -> Call[list[Job]]:
    """QPEEK: up to `count` jobs from the head (negative: the tail), left queued."""
    return Call((b"QPEEK", name(queue), count), parse_jobs)


def qstat(queue: str) -> Call[QueueStat | None]:
    """QSTAT: the queue's figures, or None when the node does not know it."""
    return Call((b"QSTAT", name(queue)), parse_qstat)


def qwait(queue: str, timeout: int | None = None) -> Call[bool]:
    """QWAIT: block until the node holds no unacknowledged job of `queue`;
    False when `timeout` (ms) came first."""
    tail: tuple[Arg, ...] = () if timeout is None else (b"TIMEOUT", timeout)
    return Call((b"QWAIT", name(queue), *tail), parse_truth, blocks_ms=timeout or 0)


def qrequeue(dead_queue: str, to: str | None = None, count: int | None = None) -> Call[int]:
    """QREQUEUE: move dead-lettered jobs back (to `to`, or each to the
    queue it came from), their counters reset; how many moved."""
    args: tuple[Arg, ...] = (b"QREQUEUE", name(dead_queue))
    if to is not None:
        args += (b"TO", name(to))
    if count is not None:
        args += (b"COUNT", count)
    return Call(args, parse_count, retry_safe=False)


PauseState = Literal["in", "out", "all", "none"]


def pause(queue: str, state: PauseState | None = None, bcast: bool = False) -> Call[str]:
    """PAUSE: set the queue's pause state (with `bcast`, on every node),
    or only read it; the state after the call."""
    args: tuple[Arg, ...] = (b"PAUSE", name(queue), state or "state")
    if bcast:
        args += (b"BCAST",)
    return Call(args, parse_text)


def qscan(cursor: int, count: int | None = None, minlen: int | None = None,
          maxlen: int | None = None, importrate: int | None = None) -> Call[ScanPage[str]]:
    """One QSCAN page: the next cursor (0: done) and queue names."""
    args: list[Arg] = [b"QSCAN", cursor]
    for word, value in ((b"COUNT", count), (b"MINLEN", minlen), (b"MAXLEN", maxlen),
                        (b"IMPORTRATE", importrate)):
        if value is not None:
            args += (word, value)
    return Call(tuple(args), parse_scan_ids)


def _jscan_args(cursor: int, count: int | None, queue: str | None,
                states: Sequence[str]) -> list[Arg]:
    args: list[Arg] = [b"JSCAN", cursor]
    if count is not None:
        args += (b"COUNT", count)
    if queue is not None:
        args += (b"QUEUE", name(queue))
    for state in states:
        args += (b"STATE", state)
    return args


def jscan(cursor: int, count: int | None = None, queue: str | None = None,
          states: Sequence[str] = ()) -> Call[ScanPage[str]]:
    """One JSCAN page: the next cursor and job IDs."""
    return Call(tuple(_jscan_args(cursor, count, queue, states)), parse_scan_ids)


def jscan_info(cursor: int, count: int | None = None, queue: str | None = None,
               states: Sequence[str] = ()) -> Call[ScanPage[JobInfo]]:
    """One JSCAN ... REPLY ALL page: the next cursor and each job as SHOW
    describes it."""
    args = _jscan_args(cursor, count, queue, states) + [b"REPLY", b"ALL"]
    return Call(tuple(args), parse_scan_jobs)


# ---------------------------------------------------------- the server

def hello() -> Call[Hello]:
    """HELLO (Disque's form): the answering node's ID and the nodes it knows."""
    return Call((b"HELLO",), parse_hello)


def info(section: str | None = None) -> Call[dict[str, str]]:
    """INFO [section]: every field as name -> text."""
    return Call((b"INFO",) if section is None else (b"INFO", section), parse_info)


def ping() -> Call[bool]:
    """PING: True when the node answered PONG."""
    return Call((b"PING",), parse_pong)


def config_get(pattern: str) -> Call[dict[str, str]]:
    """CONFIG GET pattern: each matching directive -> its value."""
    return Call((b"CONFIG", b"GET", pattern), parse_config)


def config_set(directive: str, value: str | int) -> Call[str]:
    """CONFIG SET directive value."""
    return Call((b"CONFIG", b"SET", directive, value), parse_text)


def execute(args: Sequence[Arg]) -> Call[Any]:
    """Any command, its reply as redis-py parsed it (bytes, int, list...)."""
    return Call(tuple(args), parse_raw, retry_safe=False)
