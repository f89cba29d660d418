"""The dashboard's actions: pause or resume a queue, requeue a dead-letter
queue, delete a job. POST forms only (auth.py checks login and CSRF first).

Each action runs the command a client would send (PAUSE, QREQUEUE, DELJOB)
through the node's command table, as one command from a session of its own
(its address "http:<peer>"): the same handler, the same refusals (-LOADING,
-MISCONF, -OOM), the same MONITOR line. A command that rename-command
renamed is found under its new name; one it removed is not available here
either. The node's effects (messages to peers, AOF records) are carried
out by the runtime's job timer, within its TIMER_MAX_SLEEP_MS, as for the
node's own timers. The answer is a redirect to a page (303) with a message
kept in the session for it.
"""

from __future__ import annotations

from urllib.parse import quote_from_bytes, unquote_to_bytes

from aiohttp import web

from disque_py.commands import deadletter, jobs, queues
from disque_py.engine import is_valid_id
from disque_py.base.errors import DisqueError
from disque_py.web.dashboard.auth import SESSION_REQUEST_KEY, see_other
from disque_py.web.keys import SERVER_KEY

# The pause states the form offers: PAUSE's options.
PAUSE_CHOICES = ("in", "out", "all", "none")
NAME_FIELD, JOB_FIELD, STATE_FIELD, BCAST_FIELD = "queue", "job", "state", "bcast"


class ActionError(Exception):
    """The form was wrong (400) or the command answered an error."""


def queue_url(prefix: str, name: bytes) -> str:
    return f"{prefix}queue?name={quote_from_bytes(name, safe='')}"


def job_url(prefix: str, job_id: bytes) -> str:
    return f"{prefix}job?id={quote_from_bytes(job_id, safe='')}"


def run_command(request: web.Request, handler, *args: bytes):
    """One command through the command table; its reply value, or
    ActionError with the error's text."""
    server = request.config_dict[SERVER_KEY]
    name = next((name for name, command in server.commands.commands.items()
                 if command.handler is handler), None)
    if name is None:
        raise ActionError(f"{handler.__name__.upper()} is disabled on this node (rename-command)")
    peer = request.transport.get_extra_info("peername") if request.transport else None
    # Authenticated: the dashboard's own login was checked.
    session = server.detached_session(f"http:{peer[0]}:{peer[1]}" if peer else "http")
    reply = server.commands.dispatch(server, session, [name, *args])
    if isinstance(reply, DisqueError):
        raise ActionError(f"{reply.prefix.decode()} {reply.message}")
    return reply


async def form_value(request: web.Request, field: str) -> bytes:
    """A form field's bytes: the pages put names and IDs in forms
    percent-encoded, since queue names need not be UTF-8."""
    value = (await request.post()).get(field)
    if not isinstance(value, str) or not value:
        raise ActionError(f"the form has no {field}")
    return unquote_to_bytes(value)


def _flash(request: web.Request, kind: str, message: str) -> None:
    request[SESSION_REQUEST_KEY].flash.append((kind, message))


def make_handlers(prefix: str):
    """The POST handlers, each answering with a redirect and a message."""

    async def pause_queue(request: web.Request) -> web.Response:
        name = await form_value(request, NAME_FIELD)
        state = (await form_value(request, STATE_FIELD)).decode()
        if state not in PAUSE_CHOICES:
            raise ActionError(f"pause state must be one of {', '.join(PAUSE_CHOICES)}")
        args = [name, state.encode()]
        if (await request.post()).get(BCAST_FIELD):
            args.append(b"bcast")
        reply = run_command(request, queues.pause, *args)
        now = bytes(reply)[1:-2].decode()          # PAUSE's status reply: the state now
        _flash(request, "ok", f"PAUSE {state}: the queue's pause state is now {now}")
        return see_other(queue_url(prefix, name))

    async def requeue_dead(request: web.Request) -> web.Response:
        name = await form_value(request, NAME_FIELD)
        moved = run_command(request, deadletter.qrequeue, name)
        _flash(request, "ok", f"QREQUEUE: {moved} dead-lettered job(s) queued again")
        return see_other(queue_url(prefix, name))

    async def delete_job(request: web.Request) -> web.Response:
        job_id = await form_value(request, JOB_FIELD)
        server = request.config_dict[SERVER_KEY]
        job = server.node.lookup(job_id) if is_valid_id(job_id) else None
        back = queue_url(prefix, job.queue) if job is not None else prefix
        deleted = run_command(request, jobs.deljob, job_id)
        _flash(request, "ok", f"DELJOB: {deleted} job(s) deleted")
        return see_other(back)

    return {"pause": pause_queue, "requeue": requeue_dead, "delete": delete_job}


def guarded(action, render_error):
    """An action whose ActionError becomes an error page (400)."""

    async def handler(request: web.Request) -> web.StreamResponse:
        try:
            return await action(request)
        except ActionError as error:
            return await render_error(request, 400, str(error))

    return handler
