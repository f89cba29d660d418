"""The compiled engine: the job model in C-typed Cython classes.

Imported from here, never from `_core` directly: this is where a build
that no longer matches its sources is refused, loudly, instead of running
yesterday's code (an edited .pyx needs `make build`, or `pip install -e .`).
Where the sources are not shipped beside the extension (a wheel), there is
nothing to compare and nothing is checked.
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

from disque_py.engine._core import (CONSTANTS, HOT_COMMANDS, PAUSE_STATE_NAMES,  # noqa: E402
                                    REMOVED_BEFORE_COPIES, STATE_NAMES, AwakeSchedule,
                                    DEAD_REASON_NAMES, DEFAULT_DEDUP_MAX_KEYS, CommandCore,
                                    ConnectionBase, DedupTable, IdGenerator, Job, JobOptions,
                                    JobQueue,
                                    JobTable, NodeCore, Queue, RequestParser, ServerCore,
                                    SessionCore, StatsCore, is_at_most_once_id, is_valid_id,
                                    job_options, new_job, pack_job, parse_int, parse_strict_int,
                                    render_jobs, run_hot, serialize_job, siphash13_of,
                                    unpack_job)

BUCKET_MS = CONSTANTS["BUCKET_MS"]      # the awake schedule's resolution
PAUSED_IN = CONSTANTS["PAUSED_IN"]      # queue pause flags
PAUSED_OUT = CONSTANTS["PAUSED_OUT"]
PAUSED_ALL = CONSTANTS["PAUSED_ALL"]

__all__ = ["BUCKET_MS", "CONSTANTS", "HOT_COMMANDS", "PAUSED_ALL", "PAUSED_IN", "PAUSED_OUT",
           "PAUSE_STATE_NAMES", "REMOVED_BEFORE_COPIES", "STATE_NAMES", "AwakeSchedule",
           "CommandCore", "ConnectionBase", "DEAD_REASON_NAMES", "IdGenerator", "Job",
           "JobOptions", "JobQueue", "JobTable",
           "NodeCore", "Queue", "RequestParser", "ServerCore", "SessionCore", "StatsCore",
           "is_at_most_once_id", "is_valid_id", "new_job", "pack_job", "parse_int",
           "parse_strict_int", "render_jobs", "run_hot", "serialize_job", "siphash13_of",
           "unpack_job"]
