"""The dashboard's pages (GET), rendered on the server with Jinja2.

The environment autoescapes every template: queue names, job bodies and
slow log arguments are user data and are only ever printed escaped. Bytes
travel in URLs and form fields percent-encoded (queue names need not be
UTF-8) and are decoded here with unquote_to_bytes. Unknown queues and jobs
answer 404 with the dashboard's error page.
"""

from __future__ import annotations

import asyncio
import time
from urllib.parse import quote_from_bytes, unquote_to_bytes

import jinja2
from aiohttp import web

from disque_py.web.dashboard import readers, svg
from disque_py.web.dashboard.actions import PAUSE_CHOICES, job_url, queue_url
from disque_py.web.dashboard.auth import (CSRF_FIELD, SESSION_REQUEST_KEY, check_password,
                                          fingerprint, log_in, password_of, see_other)
from disque_py.web.keys import SERVER_KEY

TABLE_SPARK_SAMPLES = 120           # the queues table's sparklines: the last 2 minutes
ROWS_PER_TURN = 25                  # queue rows built in one turn of the event loop
RENDER_CHUNKS_PER_TURN = 400        # template pieces rendered in one turn
NOT_FOUND = 404
BYTE_UNITS = ("KiB", "MiB", "GiB", "TiB", "PiB")
# Pages carry no script: inline styles and SVG only.
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; form-action 'self'; " \
      "frame-ancestors 'none'; base-uri 'none'"


def query_bytes(request: web.Request, field: str) -> bytes | None:
    """A query parameter's raw bytes (percent-decoded, '+' as a space)."""
    for pair in request.rel_url.raw_query_string.split("&"):
        key, _, value = pair.partition("=")
        if key == field:
            return unquote_to_bytes(value.replace("+", " "))
    return None


def query_int(request: web.Request, field: str) -> int:
    raw = query_bytes(request, field)
    try:
        return int(raw) if raw else 0
    except ValueError:
        return 0


def duration(seconds) -> str:
    """12 -> 12s, 75 -> 1m15s, 7300 -> 2h01m; None -> -."""
    if seconds is None:
        return "-"
    seconds = float(seconds)
    if seconds < 10:
        return f"{seconds:.1f}s"
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def when(unix_seconds: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(unix_seconds))


def figure(value, kind: str = readers.COUNT) -> str:
    """How every page writes a number (readers.py's kinds): a count with
    thousands separators (1234567 -> 1,234,567), a size in bytes in binary
    units (1572864 -> 1.5 MiB); anything else, or AS_IS, as show_value does."""
    if kind == readers.AS_IS or isinstance(value, bool) or \
            not isinstance(value, (int, float)):
        return readers.show_value(value)
    if kind == readers.BYTES:
        return byte_size(value)
    return f"{value:,}"


def byte_size(size: float) -> str:
    """512 -> 512 B, 1536 -> 1.5 KiB, 3 * 2**30 -> 3.0 GiB."""
    if abs(size) < 1024:
        return f"{size:,} B"
    for unit in BYTE_UNITS:
        size /= 1024
        if abs(size) < 1024 or unit == BYTE_UNITS[-1]:
            break
    return f"{size:,.1f} {unit}"


def make_environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.PackageLoader("disque_py.web.dashboard", "templates"),
                             autoescape=True, undefined=jinja2.StrictUndefined)
    env.filters.update(duration=duration, figure=figure, when=when,
                       pct=lambda raw: quote_from_bytes(raw, safe=""))
    return env


class Pages:
    """The GET handlers, sharing the template environment, the sampler and
    what is known of dead-letter queues."""

    def __init__(self, prefix: str, sampler, dead_letters, env: jinja2.Environment) -> None:
        self.prefix = prefix
        self.sampler = sampler
        self.dead_letters = dead_letters      # deadletters.py's DeadLetterQueues
        self.env = env

    async def render(self, request: web.Request, template: str, status: int = 200,
                     **context) -> web.Response:
        """The page, rendered a slice of RENDER_CHUNKS_PER_TURN pieces per
        turn of the event loop (a page of a hundred queues is no single
        long block)."""
        session = request[SESSION_REQUEST_KEY]
        flash, session.flash = session.flash, []
        server = request.config_dict[SERVER_KEY]
        password = password_of(request)
        pieces = self.env.get_template(template).generate(
            prefix=self.prefix, csrf=session.csrf, csrf_field=CSRF_FIELD, flash=flash,
            logged_in=bool(password) and session.logged_in(fingerprint(password)),
            node_id=readers.text(server.node.id),
            queue_url=lambda name: queue_url(self.prefix, name),
            job_url=lambda job_id: job_url(self.prefix, job_id), **context)
        html = []
        for count, piece in enumerate(pieces, 1):
            html.append(piece)
            if count % RENDER_CHUNKS_PER_TURN == 0:
                await asyncio.sleep(0)
        return web.Response(text="".join(html), status=status, content_type="text/html",
                            headers={"Cache-Control": "no-store",
                                     "X-Content-Type-Options": "nosniff",
                                     "X-Frame-Options": "DENY",
                                     "Content-Security-Policy": CSP})

    async def error(self, request: web.Request, status: int, message: str) -> web.Response:
        return await self.render(request, "error.html", status=status, status_code=status,
                                 message=message)

    # -------------------------------------------------------------- pages

    async def overview(self, request: web.Request) -> web.Response:
        server = request.config_dict[SERVER_KEY]
        sampler = self.sampler
        queues = server.node.queues
        rows = []
        names = sorted(self._shown_queues(queues))
        for start in range(0, len(names), ROWS_PER_TURN):
            if start:
                await asyncio.sleep(0)        # clients are served between two slices
            rows.extend(self._queue_rows(server, names[start:start + ROWS_PER_TURN]))
        span = sampler.span_seconds()
        charts = [svg.chart(sampler.rates("commands"), "commands/s", span),
                  svg.chart(sampler.rates("created"), "jobs added/s", span),
                  svg.chart(sampler.rates("delivered"), "jobs delivered/s", span),
                  svg.chart(sampler.rates("acked"), "jobs acked/s", span),
                  svg.chart(sampler.levels("memory"), "job memory (maxmemory's measure)",
                            span, "B"),
                  svg.chart(sampler.levels("rss"), "process memory (RSS)", span, "B"),
                  svg.chart(sampler.levels("clients"), "connected clients", span),
                  svg.chart(sampler.levels("blocked"), "blocked clients", span)]
        return await self.render(request, "overview.html", fields=readers.node_fields(server),
                                 nodes=readers.cluster_nodes(server), queues=rows,
                                 queue_count=len(queues), charts=charts)

    def _shown_queues(self, queues) -> list[bytes]:
        """Every queue up to the sampler's cap; past it, the ones it samples
        (until its first choice is made, the first ones of a QSCAN)."""
        sampler = self.sampler
        if len(queues) <= sampler.max_queues:
            return [q.name for q in queues.values()]
        if sampler.tracked:
            return list(sampler.tracked)
        return [q.name for q in queues.scan(0, sampler.max_queues, None, False)[1]
                ][:sampler.max_queues]

    def _queue_rows(self, server, names: list[bytes]) -> list[dict]:
        rows = readers.queue_rows(server, names, self.dead_letters)
        for row in rows:
            for field in ("jobs_in", "jobs_out"):
                rates = self.sampler.queue_rates(row["name"], field, TABLE_SPARK_SAMPLES)
                row[f"{field}_spark"] = svg.sparkline(rates, f"{field.replace('_', ' ')}/s")
        return rows

    async def queue(self, request: web.Request) -> web.Response:
        server = request.config_dict[SERVER_KEY]
        name = query_bytes(request, "name")
        row = readers.queue_row(server, name, self.dead_letters) if name else None
        if row is None:
            return await self.error(request, NOT_FOUND, "No such queue on this node.")
        offset = max(query_int(request, "offset"), 0)
        jobs, more = readers.queue_jobs(server, name, offset)
        not_queued, cursor = await readers.jobs_not_queued(server, name,
                                                            query_int(request, "cursor"))
        stat = readers.qstat(server, name)
        span = self.sampler.span_seconds()
        charts = [svg.chart(self.sampler.queue_lengths(name), "length", span),
                  svg.chart(self.sampler.queue_rates(name, "jobs_in"), "jobs in/s", span),
                  svg.chart(self.sampler.queue_rates(name, "jobs_out"), "jobs out/s", span)]
        return await self.render(request, "queue.html", queue=row, stat=stat, jobs=jobs,
                                 offset=min(offset, readers.MAX_JOB_OFFSET),
                                 page=readers.PAGE_JOBS, more=more, not_queued=not_queued,
                                 cursor=cursor, charts=charts, pause_choices=PAUSE_CHOICES)

    async def job(self, request: web.Request) -> web.Response:
        server = request.config_dict[SERVER_KEY]
        job_id = query_bytes(request, "id") or b""
        found = readers.job_fields(server, job_id)
        if found is None:
            return await self.error(request, NOT_FOUND, "No such job on this node.")
        fields, queue, body = found
        return await self.render(request, "job.html", job_id=readers.text(job_id), raw_id=job_id,
                                 fields=fields, queue=queue, queue_label=readers.text(queue),
                                 body=body)

    async def latency(self, request: web.Request) -> web.Response:
        server = request.config_dict[SERVER_KEY]
        events = readers.latency_events(server)
        for event in events:
            event["chart"] = svg.chart(event["history"], event["name"], event["span"], " ms")
        return await self.render(request, "latency.html", events=events,
                                 threshold=server.latency.threshold_ms,
                                 slowlog=readers.slowlog_entries(server),
                                 slower_than=server.slowlog.slower_than_us)

    # -------------------------------------------------------------- login

    async def login_form(self, request: web.Request) -> web.Response:
        if not password_of(request):
            return see_other(self.prefix)         # nothing to log in to
        return await self.render(request, "login.html", failed=False)

    def make_login(self, store):
        async def login(request: web.Request) -> web.StreamResponse:
            given = (await request.post()).get("password")
            if isinstance(given, str) and check_password(request, given):
                return log_in(request, store, self.prefix)
            return await self.render(request, "login.html", status=401, failed=True)
        return login

