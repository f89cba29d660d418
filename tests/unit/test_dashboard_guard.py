"""The dashboard's guard on requests made in memory: protected mode by peer
address, the login, CSRF. (Real sockets and a real non-loopback client:
tests/integration/test_dashboard_http.py.)"""

from __future__ import annotations

import asyncio
from unittest import mock

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from disque_py.config import Config
from disque_py.server.state import ServerState
from disque_py.web.dashboard.auth import SessionStore, make_guard
from disque_py.web.keys import SERVER_KEY

PREFIX = "/dashboard/"


@pytest.fixture
def server(node):
    return ServerState(node, Config.load(None, []))


def run(server, peer, method="GET", path=PREFIX, cookie=None):
    """The guard's answer to one request from `peer`; "page" when it let it through."""
    app = web.Application()
    app[SERVER_KEY] = server
    transport = mock.Mock()
    transport.get_extra_info.side_effect = lambda name, default=None: \
        peer if name == "peername" else default
    headers = {"Cookie": cookie} if cookie else {}
    request = make_mocked_request(method, path, headers=headers, app=app, transport=transport)
    guard = make_guard(SessionStore(), PREFIX)

    async def handler(request):
        return web.Response(text="page")

    return asyncio.run(guard(request, handler))


def test_protected_mode_serves_only_this_host(server):
    assert run(server, ("127.0.0.1", 5000)).text == "page"
    assert run(server, ("::1", 5000, 0, 0)).text == "page"
    refused = run(server, ("10.1.2.3", 5000))
    assert refused.status == 403 and "protected mode" in refused.text
    assert run(server, ("10.1.2.3", 5000), method="POST").status == 403


@pytest.mark.parametrize("args", [["--bind", "10.1.2.3"], ["--protected-mode", "no"],
                                  ["--requirepass", "pw"]])
def test_any_one_of_the_protected_mode_openers_opens_the_dashboard(node, args):
    config = Config.load(None, args)
    server = ServerState(node, config)
    server.set_requirepass(config.requirepass)
    assert run(server, ("10.1.2.3", 5000)).status != 403


def test_with_a_password_a_page_leads_to_the_login(server):
    server.set_requirepass("pw")
    answer = run(server, ("127.0.0.1", 5000))
    assert answer.status == 303 and answer.headers["Location"] == PREFIX + "login"
    assert run(server, ("127.0.0.1", 5000), path=PREFIX + "login").text == "page"


def test_a_post_without_a_csrf_token_is_refused(server):
    answer = run(server, ("127.0.0.1", 5000), method="POST", path=PREFIX + "queue/pause")
    assert answer.status == 403 and "CSRF" in answer.text
