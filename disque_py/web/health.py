"""/healthz and /readyz: what an orchestrator asks a node.

/healthz is liveness: it is answered by the node's event loop, the one that
serves clients, so an answer means the loop turns (a stuck loop times the
probe out). It says nothing of the disk or the cluster: restarting a node
does not mend either.

/readyz is readiness, whether clients should be sent here. Ready is all of:
  * loaded: the AOF load is over (clients get -LOADING before);
  * AOF writable: no write, fsync or space error holds write commands back
    (they get -MISCONF meanwhile); a node with the AOF off passes;
  * cluster reachable: the node reaches at least half of the cluster,
    itself included (nodes past their handshake, those leaving not
    counted). A lone node is always ready; a node cut off from most of its
    cluster is not, so that a partition's minority is taken out of service
    while the majority keeps serving. Half, not a majority: in a two-node
    cluster the survivor of one failure keeps serving (REPLICATE 1 jobs).
Answers are plain text: 200 "ok", or 503 with one line per failed check.
Readiness reads the node's state only; it changes nothing and costs no
more than INFO.
"""

from __future__ import annotations

from aiohttp import web

from disque_py.cluster.nodes import HANDSHAKE, LEAVING
from disque_py.web.keys import SERVER_KEY

HEALTHZ_PATH = "/healthz"
READYZ_PATH = "/readyz"
OK = "ok\n"


def setup(app: web.Application) -> None:
    app.router.add_get(HEALTHZ_PATH, healthz)
    app.router.add_get(READYZ_PATH, readyz)


async def healthz(request: web.Request) -> web.Response:
    return web.Response(text=OK)


async def readyz(request: web.Request) -> web.Response:
    problems = readiness_problems(request.app[SERVER_KEY])
    if problems:
        return web.Response(status=503, text="".join(f"{line}\n" for line in problems))
    return web.Response(text=OK)


def readiness_problems(server) -> list[str]:
    """One line per failed readiness check; empty when ready."""
    problems = []
    for check in (_loaded, _aof_writable, _cluster_reachable):
        problem = check(server)
        if problem:
            problems.append(problem)
    return problems


def _loaded(server) -> str:
    persistence = server.persistence
    if server.loading:
        progress = persistence.load_progress if persistence is not None else None
        done = f" ({progress.percent:.0f}%)" if progress is not None else ""
        return f"loading: the AOF is being loaded{done}"
    if persistence is None or persistence.writer is None:
        return "loading: the node is starting"
    return ""


def _aof_writable(server) -> str:
    persistence = server.persistence
    if persistence is None or persistence.writer is None or persistence.accepting:
        return ""
    reason = persistence.writer.last_error or "no space reserved"
    return f"aof: write commands are refused: {reason}"


def _cluster_reachable(server) -> str:
    cluster = server.cluster
    if cluster is None:
        return ""
    membership = cluster.membership
    counted = sum(1 for node in membership.nodes.values()
                  if not node.flags & (HANDSHAKE | LEAVING) or node is membership.myself)
    reached = 1 + len(membership.reachable)
    if reached * 2 >= counted:
        return ""
    return f"cluster: {reached} of {counted} nodes reachable (at least half are needed)"
