"""Replies, as redis-py parsed them, made into the client's answers.

Each parser takes the reply and the client's serializer (for bodies). They
read RESP2 and RESP3 alike: Disque's replies keep their array shapes under
RESP3, nulls are None under both, and the few that change type (CONFIG
GET's map, INFO's verbatim text) are read in either form.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Generic, NamedTuple, TypeVar

from disque_py.client.serializers import Serializer
from disque_py.client.types import Hello, Job, JobInfo, Node, QueueStat, UnreadableBody

T = TypeVar("T")


class ScanPage(NamedTuple, Generic[T]):
    """One page of QSCAN or JSCAN: the cursor to ask next (0: done), the items."""

    cursor: int
    items: list[T]


def text(value: Any) -> str:
    """A bulk or status reply as str; non-UTF-8 bytes kept as surrogates."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "surrogateescape")
    return str(value)


def _optional_text(value: Any) -> str | None:
    return None if value is None else text(value)


def parse_raw(reply: Any, codec: Serializer) -> Any:
    return reply


def parse_id(reply: Any, codec: Serializer) -> str:
    return reply.decode() if isinstance(reply, bytes) else str(reply)


def parse_text(reply: Any, codec: Serializer) -> str:
    return text(reply)


def parse_count(reply: Any, codec: Serializer) -> int:
    return int(reply)


def parse_truth(reply: Any, codec: Serializer) -> bool:
    return bool(reply)


def parse_pong(reply: Any, codec: Serializer) -> bool:
    return reply in (b"PONG", "PONG", True)


def parse_statuses(reply: Any, codec: Serializer) -> list[str]:
    return [text(status) for status in reply]


def read_body(codec: Serializer, data: bytes) -> Any:
    """A body as the serializer reads it, or an UnreadableBody: one bad
    body must not lose the other jobs of a reply (they are handed out)."""
    try:
        return codec.loads(data)
    except Exception as error:
        return UnreadableBody(data, repr(error))


def parse_jobs(reply: Any, codec: Serializer) -> list[Job]:
    """GETJOB's and QPEEK's jobs: [queue, id, body] each, with
    [..., "nacks", n, "additional-deliveries", m] under WITHCOUNTERS."""
    if not reply:
        return []
    jobs = []
    for item in reply:
        queue, job_id, body = item[0], item[1], read_body(codec, item[2])
        if len(item) >= 7:
            jobs.append(Job(job_id.decode(), text(queue), body, item[4], item[6]))
        else:
            jobs.append(Job(job_id.decode(), text(queue), body))
    return jobs


def _fields(reply: Any) -> dict[str, Any]:
    """A flat [name, value, ...] array (or a RESP3 map) as a dict."""
    if isinstance(reply, dict):
        return {text(key): value for key, value in reply.items()}
    return {text(reply[i]): reply[i + 1] for i in range(0, len(reply) - 1, 2)}


def _names(values: Iterable[Any] | None) -> list[str]:
    return [text(value) for value in values or ()]


# SHOW's fields, in the order JobInfo takes them.
_SHOW_FIELDS = ("id", "queue", "state", "repl", "ttl", "ctime", "delay", "retry", "nacks",
                "additional-deliveries", "nodes-delivered", "nodes-confirmed",
                "next-requeue-within", "next-awake-within", "body", "backoff",
                "max-deliveries", "deadletter", "dead-reason", "dead-from", "priority",
                "dedup-key", "dedup-until")


def job_info(reply: Any, codec: Serializer) -> JobInfo:
    """One job as SHOW (or JSCAN REPLY ALL) describes it."""
    fields = _fields(reply)
    backoff = fields.get("backoff")
    priority = fields.get("priority")
    return JobInfo(
        id=text(fields["id"]), queue=text(fields["queue"]), state=text(fields["state"]),
        replicate=int(fields["repl"]), ttl=int(fields["ttl"]), ctime=int(fields["ctime"]),
        delay=int(fields["delay"]), retry=int(fields["retry"]), nacks=int(fields["nacks"]),
        additional_deliveries=int(fields["additional-deliveries"]),
        nodes_delivered=_names(fields.get("nodes-delivered")),
        nodes_confirmed=_names(fields.get("nodes-confirmed")),
        next_requeue_within=fields.get("next-requeue-within"),
        next_awake_within=fields.get("next-awake-within"),
        body=read_body(codec, fields["body"]),
        backoff=None if not backoff else (int(backoff[0]), int(backoff[1])),
        max_deliveries=fields.get("max-deliveries"),
        deadletter=_optional_text(fields.get("deadletter")),
        dead_reason=_optional_text(fields.get("dead-reason")),
        dead_from=_optional_text(fields.get("dead-from")),
        priority=5 if priority is None else int(priority),
        dedup_key=fields.get("dedup-key"), dedup_until=fields.get("dedup-until"),
        extra={key: value for key, value in fields.items() if key not in _SHOW_FIELDS})


def parse_show(reply: Any, codec: Serializer) -> JobInfo | None:
    return None if reply is None else job_info(reply, codec)


def parse_qstat(reply: Any, codec: Serializer) -> QueueStat | None:
    if reply is None:
        return None
    fields = _fields(reply)
    return QueueStat(
        name=text(fields["name"]), len=int(fields["len"]), age=int(fields["age"]),
        idle=int(fields["idle"]), blocked=int(fields["blocked"]),
        import_from=_names(fields.get("import-from")),
        import_rate=int(fields["import-rate"]), jobs_in=int(fields["jobs-in"]),
        jobs_out=int(fields["jobs-out"]), pause=text(fields["pause"]))


def parse_scan_ids(reply: Any, codec: Serializer) -> ScanPage[str]:
    return ScanPage(int(reply[0]), _names(reply[1]))


def parse_scan_jobs(reply: Any, codec: Serializer) -> ScanPage[JobInfo]:
    return ScanPage(int(reply[0]), [job_info(item, codec) for item in reply[1]])


def parse_hello(reply: Any, codec: Serializer) -> Hello:
    """HELLO: [format version, my ID, [id, host, port, priority], ...]."""
    nodes = [Node(text(node[0]), text(node[1]), int(node[2]), int(node[3]))
             for node in reply[2:]]
    return Hello(int(reply[0]), text(reply[1]), nodes)


def parse_info(reply: Any, codec: Serializer) -> dict[str, str]:
    """INFO's "name:value" lines (RESP3's verbatim text reads the same)."""
    body = text(reply)
    if body.startswith("txt:"):
        body = body[4:]
    fields = {}
    for line in body.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.partition(":")
            fields[key] = value
    return fields


def parse_config(reply: Any, codec: Serializer) -> dict[str, str]:
    return {key: text(value) for key, value in _fields(reply).items()}
