"""The web dashboard: the node, its cluster, queues, jobs, latency and slow log.

setup(app, server) mounts the dashboard under PREFIX as an aiohttp
sub-application of the node's HTTP endpoint (web/server.py), so that its
middleware (auth.py: protected mode, login, CSRF) guards its routes only,
redirects / to it, and returns PREFIX (the endpoint logs the dashboard's
URL). It starts the sampler (sampler.py), one sample a second in the
node's loop, and the walk that learns the dead-letter queues
(deadletters.py), one step a second, when the endpoint starts, and stops
them with the endpoint.

    GET  /dashboard/                  overview: node, cluster, queues, charts
    GET  /dashboard/queue?name=Q      a queue: QSTAT, its jobs in GETJOB order, charts
    GET  /dashboard/job?id=ID         a job: SHOW
    GET  /dashboard/latency           LATENCY LATEST/HISTORY and SLOWLOG
    GET  /dashboard/login             the login form (when requirepass is set)
    GET  /, /dashboard                redirects to /dashboard/
    POST /dashboard/login, /dashboard/logout
    POST /dashboard/queue/pause       PAUSE queue in|out|all|none [bcast]
    POST /dashboard/queue/requeue     QREQUEUE queue
    POST /dashboard/job/delete        DELJOB id
"""

from __future__ import annotations

import asyncio
import contextlib

from aiohttp import web

from disque_py.web.dashboard.actions import guarded, make_handlers
from disque_py.web.dashboard.auth import (LOGIN_PATH, SESSION_COOKIE_PREFIX, SessionStore,
                                          log_out, make_guard)
from disque_py.web.dashboard.deadletters import DeadLetterQueues
from disque_py.web.dashboard.pages import Pages, make_environment
from disque_py.web.dashboard.sampler import Sampler

PREFIX = "/dashboard/"
SAMPLER_KEY = web.AppKey("dashboard_sampler", Sampler)
DEAD_LETTERS_KEY = web.AppKey("dashboard_dead_letters", DeadLetterQueues)


def setup(app: web.Application, server) -> str:
    sampler = Sampler(server)
    dead_letters = DeadLetterQueues(server.node)
    store = SessionStore(SESSION_COOKIE_PREFIX + str(server.config.http_port))
    pages = Pages(PREFIX, sampler, dead_letters, make_environment())
    dashboard = web.Application(middlewares=[make_guard(store, PREFIX)])
    dashboard[SAMPLER_KEY] = sampler
    dashboard[DEAD_LETTERS_KEY] = dead_letters
    router = dashboard.router
    router.add_get("/", pages.overview)
    router.add_get("/queue", pages.queue)
    router.add_get("/job", pages.job)
    router.add_get("/latency", pages.latency)
    router.add_get("/" + LOGIN_PATH, pages.login_form)
    router.add_post("/" + LOGIN_PATH, pages.make_login(store))

    async def logout(request: web.Request) -> web.StreamResponse:
        return log_out(request, store, PREFIX)

    router.add_post("/logout", logout)
    actions = make_handlers(PREFIX)
    router.add_post("/queue/pause", guarded(actions["pause"], pages.error))
    router.add_post("/queue/requeue", guarded(actions["requeue"], pages.error))
    router.add_post("/job/delete", guarded(actions["delete"], pages.error))
    dashboard.cleanup_ctx.append(_sampling)
    app.router.add_get("/", _to_dashboard)
    app.router.add_get(PREFIX.rstrip("/"), _to_dashboard)    # before the prefix takes it
    app.add_subapp(PREFIX.rstrip("/"), dashboard)
    return PREFIX


async def _to_dashboard(request: web.Request) -> web.Response:
    return web.Response(status=302, headers={"Location": PREFIX})


async def _sampling(dashboard: web.Application):
    """The sampler and the dead-letter walk run in the node's loop while
    the endpoint is up."""
    tasks = [asyncio.create_task(dashboard[SAMPLER_KEY].run()),
             asyncio.create_task(dashboard[DEAD_LETTERS_KEY].run())]
    yield
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError):
            await task
