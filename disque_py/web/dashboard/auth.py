"""Who may see the dashboard and act through it: protected mode, login, CSRF.

Rules, checked by guard() (a middleware of the dashboard's application
only: /metrics, /healthz and /readyz are not under it), in this order:

  * Protected mode: the rule RESP connections follow
    (config/protected_mode.allows, on the HTTP peer's address). A node in
    protected mode (no bind, no requirepass) serves the dashboard's pages
    and actions to clients on its own host only; others get 403 and the
    DENIED text. Pages are refused too, not only actions: they show job
    bodies, which such a node shows no other host over RESP either.
  * Sessions: every visitor gets one, kept here (never in the cookie): a
    random token (TOKEN_BYTES) in the cookie SESSION_COOKIE_PREFIX + the
    HTTP port (browsers share cookies between the ports of one host: two
    nodes on one host keep apart) (HttpOnly, SameSite=Strict, Path=the
    dashboard's), stored under its SHA-256, with
    an expiry SESSION_TTL_S after its last use, and a CSRF token of its own.
    At most MAX_SESSIONS are kept: past that, the least recently used
    anonymous one goes first.
  * Password: when requirepass is set, every page and action needs a
    session that logged in (the password compared in constant time); other
    requests are sent to the login form (pages) or refused (POST, 403).
    Logging in makes a new session (the old token is dropped: no fixation);
    a session remembers the password it logged in with, so a CONFIG SET
    requirepass ends every session.
  * CSRF: every POST, the login's included, must carry the session's CSRF
    token in the form field CSRF_FIELD (compared in constant time), or is
    refused with 403. With SameSite=Strict cookies a cross-site form does
    not even carry the session; the token also stops a POST from a client
    that got the cookie another way.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections import OrderedDict

from aiohttp import web

from disque_py.config.protected_mode import DENIED, allows
from disque_py.web.keys import SERVER_KEY

SESSION_COOKIE_PREFIX = "disque_dashboard_"
CSRF_FIELD = "csrf"
TOKEN_BYTES = 32
SESSION_TTL_S = 8 * 3600
MAX_SESSIONS = 1000
LOGIN_PATH = "login"        # relative to the dashboard's prefix
CSRF_REFUSED = "403: the form's CSRF token is missing or wrong: reload the page and try again"
LOGIN_REFUSED = "403: log in first"


class DashboardSession:
    __slots__ = ("key", "csrf", "password", "expires", "flash")

    def __init__(self, key: str, password: bytes | None, expires: float) -> None:
        self.key = key                     # SHA-256 of the cookie's token
        self.csrf = secrets.token_urlsafe(TOKEN_BYTES)
        self.password = password           # fingerprint logged in with; None: anonymous
        self.expires = expires
        self.flash: list[tuple[str, str]] = []    # (kind, message) for the next page

    def logged_in(self, fingerprint: bytes) -> bool:
        return self.password is not None and hmac.compare_digest(self.password, fingerprint)


# Where a request carries its session: a typed key where aiohttp has them
# (3.14 warns of plain string keys), the string before.
SESSION_REQUEST_KEY = web.RequestKey("dashboard_session", DashboardSession) \
    if hasattr(web, "RequestKey") else "dashboard_session"


def fingerprint(password: bytes) -> bytes:
    return hashlib.sha256(b"disque-dashboard:" + password).digest()


def _key(token: str) -> str:
    return hashlib.sha256(token.encode("latin-1", "replace")).hexdigest()


class SessionStore:
    """The dashboard's sessions, by the hash of their cookie token."""

    def __init__(self, cookie: str = SESSION_COOKIE_PREFIX + "0", clock=time.monotonic,
                 ttl_s: float = SESSION_TTL_S, max_sessions: int = MAX_SESSIONS) -> None:
        self.cookie = cookie                # the cookie's name
        self.clock = clock
        self.ttl_s = ttl_s
        self.max_sessions = max_sessions
        self._sessions: OrderedDict[str, DashboardSession] = OrderedDict()

    def __len__(self) -> int:
        return len(self._sessions)

    def find(self, token: str | None) -> DashboardSession | None:
        """The live session of a cookie token (its expiry pushed back)."""
        if not token:
            return None
        session = self._sessions.get(_key(token))
        if session is None:
            return None
        now = self.clock()
        if session.expires <= now:
            del self._sessions[session.key]
            return None
        session.expires = now + self.ttl_s
        self._sessions.move_to_end(session.key)
        return session

    def create(self, password: bytes | None = None) -> tuple[str, DashboardSession]:
        """A new session and the token its cookie carries."""
        token = secrets.token_urlsafe(TOKEN_BYTES)
        session = DashboardSession(_key(token), password, self.clock() + self.ttl_s)
        self._sessions[session.key] = session
        while len(self._sessions) > self.max_sessions:
            self._evict_one()
        return token, session

    def drop(self, session: DashboardSession) -> None:
        self._sessions.pop(session.key, None)

    def _evict_one(self) -> None:
        """The least recently used anonymous session, else the least recently used."""
        for key, session in self._sessions.items():
            if session.password is None:
                del self._sessions[key]
                return
        self._sessions.popitem(last=False)


def set_cookie(response: web.StreamResponse, store: SessionStore, token: str,
               path: str) -> None:
    response.set_cookie(store.cookie, token, path=path, httponly=True, samesite="Strict")


def password_of(request: web.Request) -> bytes:
    return request.config_dict[SERVER_KEY].requirepass


def check_password(request: web.Request, given: str) -> bool:
    required = password_of(request)
    return bool(required) and hmac.compare_digest(given.encode("latin-1", "replace"), required)


def make_guard(store: SessionStore, prefix: str):
    """The dashboard application's middleware (rules in the module's docstring)."""

    @web.middleware
    async def guard(request: web.Request, handler):
        server = request.config_dict[SERVER_KEY]
        if not allows(request.transport.get_extra_info("peername") if request.transport
                      else None, server.config):
            return web.Response(status=403, text=DENIED.decode().removeprefix("-")
                                .rstrip("\r\n") + "\n")
        session = store.find(request.cookies.get(store.cookie))
        new_token = None
        if session is None:
            new_token, session = store.create()
        request[SESSION_REQUEST_KEY] = session
        response = await _admit(request, handler, session, prefix)
        if new_token is not None:
            set_cookie(response, store, new_token, prefix)
        return response

    return guard


async def _admit(request: web.Request, handler, session: DashboardSession, prefix: str):
    password = password_of(request)
    is_login = request.path == prefix + LOGIN_PATH
    if request.method == "POST":
        form = await request.post()
        given = form.get(CSRF_FIELD)
        if not isinstance(given, str) or not hmac.compare_digest(given, session.csrf):
            return web.Response(status=403, text=CSRF_REFUSED + "\n")
    if password and not is_login and not session.logged_in(fingerprint(password)):
        if request.method != "GET":
            return web.Response(status=403, text=LOGIN_REFUSED + "\n")
        return see_other(prefix + LOGIN_PATH)
    return await handler(request)


def see_other(location: str) -> web.Response:
    """303: after a POST, or to the login form (returned, so that the
    middleware can still set the session's cookie on it)."""
    return web.Response(status=303, headers={"Location": location})


def log_in(request: web.Request, store: SessionStore, prefix: str) -> web.StreamResponse:
    """After a right password: a new logged-in session replaces the visitor's."""
    store.drop(request[SESSION_REQUEST_KEY])
    token, _ = store.create(fingerprint(password_of(request)))
    response = see_other(prefix)
    set_cookie(response, store, token, prefix)
    return response


def log_out(request: web.Request, store: SessionStore, prefix: str) -> web.StreamResponse:
    store.drop(request[SESSION_REQUEST_KEY])
    response = see_other(prefix)
    response.del_cookie(store.cookie, path=prefix)
    return response
