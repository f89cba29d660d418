"""A plain HTTP client for the dashboard's tests: cookies kept, redirects not followed.

DashboardClient speaks HTTP/1.1 to 127.0.0.1 with http.client (no proxy),
keeps the cookies the node sets, and reads the CSRF token out of a page's
forms, as a browser would submit it. Replies are (status, headers, text);
a redirect is a reply like any other, so tests see each 303.
"""

from __future__ import annotations

import http.client
import re
from http.cookies import SimpleCookie
from typing import NamedTuple
from urllib.parse import urlencode

from tests.support import HOST

DASHBOARD = "/dashboard/"
CSRF_INPUT = re.compile(r'name="csrf" value="([^"]+)"')


class Reply(NamedTuple):
    status: int
    headers: http.client.HTTPMessage
    text: str

    @property
    def location(self) -> str | None:
        return self.headers.get("Location")


class DashboardClient:
    def __init__(self, port: int, timeout: float = 10.0) -> None:
        self.port = port
        self.timeout = timeout
        self.cookies: dict[str, str] = {}
        self.set_cookie_headers: list[str] = []

    def request(self, method: str, path: str, form: dict | None = None) -> Reply:
        connection = http.client.HTTPConnection(HOST, self.port, timeout=self.timeout)
        headers = {}
        body = None
        if form is not None:
            body = urlencode(form)
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        if self.cookies:
            headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        try:
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            text = response.read().decode("utf-8", "replace")
        finally:
            connection.close()
        for header in response.headers.get_all("Set-Cookie") or []:
            self.set_cookie_headers.append(header)
            for name, morsel in SimpleCookie(header).items():
                if morsel.value:
                    self.cookies[name] = morsel.value
                else:
                    self.cookies.pop(name, None)
        return Reply(response.status, response.headers, text)

    def get(self, path: str = DASHBOARD) -> Reply:
        return self.request("GET", path)

    def post(self, path: str, form: dict) -> Reply:
        return self.request("POST", path, form)

    def csrf(self, path: str = DASHBOARD) -> str:
        """The CSRF token in the forms of a page (fetched with our cookie)."""
        page = self.get(path)
        found = CSRF_INPUT.search(page.text)
        assert found, f"no CSRF token in {path} ({page.status}): {page.text[:300]}"
        return found.group(1)

    def log_in(self, password: str) -> Reply:
        return self.post(DASHBOARD + "login",
                         {"csrf": self.csrf(DASHBOARD + "login"), "password": password})
