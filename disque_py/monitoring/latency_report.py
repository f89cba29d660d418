"""Human-readable views of the latency monitor: LATENCY DOCTOR and GRAPH.

The wording and drawing are ours (Disque's reply shapes are kept: one bulk
string each). DOCTOR reads every event's statistics and gives advice for
the kinds of events seen; GRAPH draws one event's samples as columns,
oldest on the left, each labelled with how long ago it happened.
"""

from __future__ import annotations

from disque_py.monitoring import latency as ev

GRAPH_COLUMNS = 80
GRAPH_ROWS = 4

_MONITOR_OFF = (
    "The latency monitor is off on this node (latency-monitor-threshold is 0), and "
    "nothing was recorded while it was on. Turn it on with 'CONFIG SET "
    "latency-monitor-threshold <milliseconds>' and ask again later.\n")
_NO_SPIKES = ("No latency spike has been recorded on this node: nothing took "
              "%d ms or longer so far.\n")
_SPIKES_SEEN = "Latency spikes recorded on this node:\n\n"
_EVENT_LINE = ("%d. %s: %d spike(s) (average %d ms, mean deviation %d ms, one every "
               "%.2f s); worst ever %d ms.\n")
_NO_ADVICE = ("\nThere is no specific advice for these events; the history of each "
              "is available with LATENCY HISTORY <event>.\n")
_ADVICE_HEADER = "\nWhat may help:\n\n"

_SLOWLOG_OFF = ("- The slow log is off. 'CONFIG SET slowlog-log-slower-than %d' "
                "records the commands that reach the latency threshold.\n")
_SLOWLOG_HIGHER = ("- The slow log only records commands slower than %d us, above the "
                   "latency threshold; 'CONFIG SET slowlog-log-slower-than %d' shows "
                   "every command that caused a spike.\n")
_ADVICE = {
    "slowlog": "- SLOWLOG GET lists the slowest recent commands with their arguments.\n",
    "big-replies": ("- Commands over many jobs at once (QPEEK, JSCAN or GETJOB with a "
                    "large COUNT, DEBUG FLUSHALL) block the node while they run; ask "
                    "for fewer jobs per call.\n"),
    "cpu": ("- Even O(1) commands were slow: the node did not get the CPU. Look for "
            "other busy processes, a loaded or oversubscribed host, or stolen "
            "virtual-machine time.\n"),
    "disk": ("- Writes to the AOF were slow: keep it on a local disk (an SSD if the "
             "write load is high) that other busy processes do not share.\n"),
    "fsync-always": ("- With appendfsync always every reply waits for an fsync; "
                     "appendfsync everysec risks one second of jobs on power loss "
                     "and removes that wait.\n"),
    "rewrite": ("- Finishing an AOF rewrite took long: the records written while it "
                "ran are appended and the file is renamed at the end. Rewrite at a "
                "quieter time, or keep the AOF smaller.\n"),
    "timers": ("- Many jobs came due at once (retries, delays, TTL expirations): "
               "spread jobs' RETRY and DELAY values so fewer fall due together.\n"),
    "eviction": ("- The node freed memory near maxmemory: raise maxmemory, or "
                 "acknowledge jobs sooner so fewer of them are kept.\n"),
}
_EVENT_ADVICE = {
    ev.COMMAND: ("slowlog", "big-replies"),
    ev.FAST_COMMAND: ("cpu",),
    ev.AOF_WRITE: ("disk",),
    ev.AOF_WRITE_ALONE: ("disk",),
    ev.AOF_WRITE_PENDING_FSYNC: ("disk",),
    ev.AOF_WRITE_ACTIVE_CHILD: ("disk",),
    ev.AOF_FSYNC_ALWAYS: ("disk", "fsync-always"),
    ev.AOF_REWRITE_DIFF_WRITE: ("rewrite", "disk"),
    ev.AOF_RENAME: ("rewrite", "disk"),
    ev.JOBS_PROCESSING: ("timers",),
    ev.EVICTION_CYCLE: ("eviction",),
}


def doctor(monitor: ev.LatencyMonitor, slower_than_us: int) -> bytes:
    """The LATENCY DOCTOR report."""
    if not monitor.events:
        if not monitor.threshold_ms:
            return _MONITOR_OFF.encode()
        return (_NO_SPIKES % monitor.threshold_ms).encode()
    lines = [_SPIKES_SEEN]
    advice: list[str] = []
    for number, event in enumerate(monitor.events, 1):
        stats = monitor.stats(event)
        lines.append(_EVENT_LINE % (number, event, stats.samples, stats.average,
                                    stats.mean_deviation, stats.period / stats.samples,
                                    stats.all_time_high))
        if event == ev.COMMAND:
            advice += _slowlog_advice(monitor.threshold_ms, slower_than_us)
        advice += [_ADVICE[key] for key in _EVENT_ADVICE.get(event, ())]
    unique = list(dict.fromkeys(advice))
    lines.append(_ADVICE_HEADER + "".join(unique) if unique else _NO_ADVICE)
    return "".join(lines).encode()


def _slowlog_advice(threshold_ms: int, slower_than_us: int) -> list[str]:
    wanted_us = threshold_ms * 1000
    if slower_than_us < 0:
        return [_SLOWLOG_OFF % wanted_us]
    if threshold_ms and slower_than_us > wanted_us:
        return [_SLOWLOG_HIGHER % (slower_than_us, wanted_us)]
    return []


def graph(monitor: ev.LatencyMonitor, event: str) -> bytes:
    """The LATENCY GRAPH drawing of a known event."""
    series = monitor.events[event]
    samples = list(series.samples)
    values = [ms for _, ms in samples]
    low, high = min(values), max(values)
    now = monitor.now()
    out = [f"{event}: {len(values)} sample(s), lowest {low} ms, highest {high} ms, "
           f"all-time high {series.all_time_high} ms\n"]
    for start in range(0, len(samples), GRAPH_COLUMNS):
        chunk = samples[start:start + GRAPH_COLUMNS]
        out.append(_draw(chunk, low, high, now))
    return "".join(out).encode()


def _draw(chunk: list[list[int]], low: int, high: int, now: int) -> str:
    """Columns as tall as each sample (low: one row, high: GRAPH_ROWS),
    then the sample's age written downwards under it."""
    span = high - low
    heights = [GRAPH_ROWS if not span else 1 + (ms - low) * (GRAPH_ROWS - 1) // span
               for _, ms in chunk]
    rule = "-" * len(chunk) + "\n"
    rows = ["".join("#" if h >= level else " " for h in heights).rstrip() + "\n"
            for level in range(GRAPH_ROWS, 0, -1)]
    ages = [_age(now - second) for second, _ in chunk]
    depth = max(len(age) for age in ages)
    labels = ["".join(age[i] if i < len(age) else " " for age in ages).rstrip() + "\n"
              for i in range(depth)]
    return rule + "".join(rows) + rule + "".join(labels)


def _age(seconds: int) -> str:
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m"
    if seconds < 86400:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"
