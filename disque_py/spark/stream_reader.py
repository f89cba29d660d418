"""readStream.format("disque"): jobs from queues as a streaming source,
acknowledged only when Spark commits the micro-batch that carried them.

Offsets are micro-batch numbers ({"batch": n}): a queue has no positions to
replay. The reader runs on the driver (Spark's SimpleDataSourceStreamReader):
each read takes up to `max_jobs_per_batch` jobs with GETJOB ... WITHCOUNTERS
from the nodes in turn (NOHANG, or on the first node TIMEOUT `timeout_ms`),
keeps their IDs under the batch's number, and Spark's commit of that batch
ACKJOBs them. A job a failed or killed query never committed is not
acknowledged: Disque queues it again after its RETRY, and the query gets
it in a later batch. Spark commits a batch when it starts the next one, so
when no jobs come the reader ends a batch with jobs by an empty one (their
acknowledgement would otherwise wait for the next job, and their RETRY
would deliver them twice). So delivery is at least once: a job whose batch was
written by the sink but not committed (the query died between the two)
comes again, and a sink that must not act twice keys on the job ID. After
a restart, Spark's replay of the batch it had planned reads nothing (those
jobs come back with their RETRY instead).
"""

from __future__ import annotations

import logging

import redis
from pyspark.sql.datasource import SimpleDataSourceStreamReader

from disque_py.spark.options import SPARK_OPTIONS, OptionError, int_option, parse_nodes

SOURCE_SCHEMA = "queue string, id string, body binary, nacks long, additional_deliveries long"
DEFAULT_MAX_JOBS = 1000
ACK_CHUNK = 1000
SOURCE_OPTIONS = ("queues", "nodes", "max_jobs_per_batch", "timeout_ms", "password")

log = logging.getLogger("disque_py.spark")


class DisqueStreamReader(SimpleDataSourceStreamReader):
    """Jobs of `queues` on `nodes`, acknowledged on commit."""

    def __init__(self, options) -> None:
        unknown = {name.lower() for name in options} - set(SOURCE_OPTIONS) - set(SPARK_OPTIONS)
        if unknown:
            raise OptionError(f"disque: unknown source option(s) {', '.join(sorted(unknown))}")
        self.queues = [q.strip() for q in options.get("queues", "").split(",") if q.strip()]
        if not self.queues:
            raise OptionError("disque: option queues is required (a,b,...)")
        self.nodes = parse_nodes(options.get("nodes"))
        self.max_jobs = int_option("max_jobs_per_batch",
                                options.get("max_jobs_per_batch", str(DEFAULT_MAX_JOBS)))
        self.timeout_ms = int_option("timeout_ms", options.get("timeout_ms", "0"))
        if self.max_jobs <= 0 or self.timeout_ms < 0:
            raise OptionError("disque: max_jobs_per_batch must be > 0 and timeout_ms >= 0")
        self.password = options.get("password")
        self._clients: dict[str, redis.Redis] = {}
        self._pending: dict[int, dict[str, list[bytes]]] = {}   # batch -> node -> job IDs
        self._turn = 0

    def initialOffset(self) -> dict:
        return {"batch": 0}

    def read(self, start: dict):
        rows, taken = self._take()
        batch = start["batch"] + 1
        if rows:
            self._pending[batch] = taken
        elif not self._pending:
            return iter(()), start            # no new batch until jobs arrive
        # Spark commits a batch's offsets when it starts the next one: with
        # jobs still to acknowledge and none to read, an empty batch does it.
        return iter(rows), {"batch": batch}

    def readBetweenOffsets(self, start: dict, end: dict):
        # A replay after a restart: the batch's jobs were never acknowledged,
        # so Disque delivers them again after their RETRY, in a later batch.
        return iter(())

    def commit(self, end: dict) -> None:
        for batch in sorted(b for b in self._pending if b <= end["batch"]):
            for node, ids in self._pending.pop(batch).items():
                self._ack(node, ids)

    def stop(self) -> None:
        for client in self._clients.values():
            client.close()

    # ----------------------------------------------------------------

    def _client(self, node: str) -> redis.Redis:
        client = self._clients.get(node)
        if client is None:
            host, _, port = node.rpartition(":")
            client = self._clients[node] = redis.Redis(host=host or "127.0.0.1", port=int(port),
                                                       password=self.password)
        return client

    def _take(self) -> tuple[list, dict]:
        """Up to max_jobs jobs, from each node in turn (a new first node
        every read); the rows and node -> IDs taken."""
        rows: list = []
        taken: dict[str, list[bytes]] = {}
        errors = []
        order = self.nodes[self._turn:] + self.nodes[:self._turn]
        self._turn = (self._turn + 1) % len(self.nodes)
        for position, node in enumerate(order):
            wait = ("TIMEOUT", self.timeout_ms) if position == 0 and self.timeout_ms \
                else ("NOHANG",)
            try:
                jobs = self._client(node).execute_command(
                    "GETJOB", *wait, "COUNT", self.max_jobs - len(rows), "WITHCOUNTERS",
                    "FROM", *self.queues) or []
            except redis.RedisError as error:
                errors.append(f"{node}: {error}")
                continue
            for queue, job_id, body, _, nacks, _, more in jobs:
                rows.append((queue.decode(), job_id.decode(), body, nacks, more))
            if jobs:
                taken[node] = [job[1] for job in jobs]
            if len(rows) >= self.max_jobs:
                break
        if len(errors) == len(order):
            raise ConnectionError("disque: no node answered GETJOB: " + "; ".join(errors))
        return rows, taken

    def _ack(self, node: str, ids: list[bytes]) -> None:
        """ACKJOB on the node that delivered them, else on any other (an
        acknowledgement reaches every holder from any node)."""
        for other in [node] + [n for n in self.nodes if n != node]:
            try:
                for start in range(0, len(ids), ACK_CHUNK):
                    self._client(other).execute_command("ACKJOB", *ids[start:start + ACK_CHUNK])
                return
            except redis.RedisError as error:
                log.warning("disque: ACKJOB on %s failed (%s), trying another node", other, error)
        raise ConnectionError(f"disque: no node took the acknowledgement of {len(ids)} jobs")
