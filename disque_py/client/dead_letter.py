"""Moving a job to its dead-letter queue at once, from the client.

Disque-py dead-letters a job by itself once it reaches MAXDELIVERIES; a
worker that knows a job can never succeed (a malformed body, a deleted
account) should not wait for that. Disque has no command that dead-letters
a job on demand, so the client does it with the commands every Disque
node has: it adds the job's body to the dead-letter queue (the job's
DEADLETTER queue as SHOW gives it, else `<queue>:dead`, disque-py's
default), then acknowledges the job. The dead job is a new job (a new ID,
its counters at 0), added with the failed job's ID in `dedup` so that a
retry of the move makes no second one; QREQUEUE does not move it back (it
only moves jobs the server dead-lettered), re-add its body instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from disque_py.client.commands import DEFAULT_ADD_TIMEOUT_MS
from disque_py.client.types import Job, UnreadableBody

if TYPE_CHECKING:
    from disque_py.client.aio import AsyncClient

DEAD_SUFFIX = ":dead"


def is_dead_letter_queue(queue: str) -> bool:
    """A default dead-letter queue's name: dead-lettering from there again
    would only make `<queue>:dead:dead`."""
    return queue.endswith(DEAD_SUFFIX)


async def dead_letter(client: AsyncClient, job: Job) -> str:
    """Move `job` to its dead-letter queue; the dead job's ID. A body the
    serializer could not read goes as the bytes it came as."""
    info = await client.show(job.id)
    dead_queue = info.deadletter if info is not None and info.deadletter else \
        job.queue + DEAD_SUFFIX
    if isinstance(job.body, UnreadableBody):
        reply = await client.execute_command(
            "ADDJOB", dead_queue, job.body.data, DEFAULT_ADD_TIMEOUT_MS, "DEDUP", job.id)
        dead_id = reply.decode() if isinstance(reply, bytes) else str(reply)
    else:
        dead_id = await client.add(dead_queue, job.body, dedup=job.id)
    await client.ack(job.id)
    return dead_id
