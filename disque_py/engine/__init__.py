"""The engine layer: the compiled job model, one node's job lifecycle and
the hot command loop (Cython, in _core), and their Python face.

Everything of the engine is imported from here, never from `_core`
directly: this is where a build that no longer matches its sources is
refused, loudly, instead of running yesterday's code (an edited .pyx, .pxd
or .pxi needs `make build`, or `pip install -e .`). Where the sources are
not shipped beside the extension (a wheel), nothing is checked.

The engine imports only the layers below it (disque_py.base and
disque_py.formats) and calls the layers above only through its declared
hooks: NodeHooks (node/hooks.pxd) and the cpdef hooks of ServerCore,
ConnectionBase and LinkBase (net/server.pxd, net/conn.pxd, net/link.pxd). Its constants are declared
once, as `cpdef enum`s in the .pxd of the part that owns them, and are
Python ints here.
"""

from __future__ import annotations

from disque_py.engine import _core, _sources

STALE_BUILD = ("disque_py.engine was built from other sources than the ones beside it "
               "(built {built}, sources {current}): rebuild it with `make build` "
               "(or `pip install -e .`)")


def _check_build_matches_sources() -> None:
    if not _sources.source_files():
        return
    current = _sources.source_hash()
    if current != _core.SOURCE_HASH:
        raise ImportError(STALE_BUILD.format(built=_core.SOURCE_HASH[:12], current=current[:12]))


_check_build_matches_sources()

# The types and functions, by part: model/ (the job and what holds jobs),
# node/ (one node's lifecycle and its hooks), net/ (the hot command loop),
# aof/ (the AOF's records).
from disque_py.engine._core import (  # noqa: E402
    AwakeSchedule, DedupTable, IdGenerator, Job, JobExtra, JobOptions, JobQueue, JobTable,
    Queue, is_valid_id, job_options, new_job, pack_job, serialize_job, siphash13_of, unpack_job,
    DEAD_QUEUE_SUFFIX, DEAD_REASON_NAMES, DEFAULT_DEDUP_MAX_KEYS, PAUSE_STATE_NAMES,
    STATE_NAMES)
from disque_py.engine._core import (  # noqa: E402
    Deadlines, HookNotWired, NodeCore, NodeHooks, Parking, Waiter, is_at_most_once_id,
    ttl_minutes_from_id)
from disque_py.engine._core import (  # noqa: E402
    HOT_COMMANDS, BusOutbox, CommandCore, ConnectionBase, LinkBase, RequestParser, ServerCore,
    SessionCore, StatsCore, parse_int, parse_strict_int, render_jobs, run_hot)
# The constants: cpdef enums, each declared once in the .pxd of its part.
from disque_py.engine._core import (  # noqa: E402  model/job.pxd
    JOB_ID_LEN, NODE_ID_LEN, WAIT_REPL, ACTIVE, QUEUED, ACKED, FLAG_BCAST_QUEUED,
    FLAG_BCAST_WILLQUEUE, FLAG_DELIVERED, FLAG_COUNTED, FLAG_BACKED_OFF, FLAG_PROMISED,
    FLAG_CONFIRMED, LOCAL_FLAGS)
from disque_py.engine._core import (  # noqa: E402  model/options.pxd, table, schedule, queue
    DEAD_NONE, DEAD_MAX_DELIVERIES, DEFAULT_PRIORITY, MAX_PRIORITY, TABLE_PARTITIONS, BUCKET_MS,
    PAUSED_IN, PAUSED_OUT, PAUSED_ALL, DEDUP_MEMORY_OVERHEAD)
from disque_py.engine._core import (  # noqa: E402  node/parking.pxd
    WAIT_GETJOB, WAIT_JOB_REPLICATION, WAIT_WAITJOB, WAIT_QWAIT, WAIT_DUPLICATE_ADD)
from disque_py.engine._core import (  # noqa: E402  node/core.pxd
    WILLQUEUE_ADVANCE_MS, TIME_ERROR_MS, DEFAULT_TTL_S, DEFAULT_RETRY_MAX_S,
    MAX_DEFAULT_REPLICATION, GC_RETRY_MIN_PERIOD_MS, GC_RETRY_MAX_PERIOD_MS, GC_RETRY_COUNT_MAX,
    GC_JITTER_MS, GONE_ACKED, GONE_DELETED, GONE_EXPIRED, GONE_MOVED, JOB_MEMORY_OVERHEAD,
    QUEUE_MEMORY_OVERHEAD)
from disque_py.engine._core import (  # noqa: E402  net/resp.pxd
    INLINE_MAX_SIZE, MULTIBULK_MAX_COUNT, BULK_MAX_LENGTH)
from disque_py.engine._core import (  # noqa: E402  aof/records.pxd, log, load, rewrite
    AOF_VERSION, AOF_JOB, AOF_GONE, AOF_DEDUP, AOF_UNDEDUP, RECORD_OK, RECORD_TORN, RECORD_BAD,
    LOAD_BAD_JOB, AofLoader, AofLog, RewriteWalk, aof_dedup_record, aof_job_record, aof_record,
    aof_record_at)
from disque_py.engine.records import (  # noqa: E402
    DEDUP_KEY_FIELD, DEDUP_QUEUE_FIELD, DEDUP_UNTIL_FIELD, JobRecord, deserialize_job,
    deserialize_jobs, serialize_record)

# A job state's number, by the name SHOW and JSCAN STATE use.
STATE_BY_NAME = {name: number for number, name in enumerate(STATE_NAMES)}
