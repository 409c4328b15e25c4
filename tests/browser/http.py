"""``Http``: a session on mqdashboard's JSON API over real HTTP (urllib, no event loop).

The browser tests run Playwright's sync API on the test thread, so the API checks beside
them use a blocking client: a cookie jar for the session and the session's CSRF token on
every state-changing request.
"""

from __future__ import annotations

import http.cookiejar
import json
import urllib.error
import urllib.request
from typing import Any


class Http:
    """A session on the dashboard at ``base`` (``http://host:port``)."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
        self.csrf = self.call("GET", "/api/session")["csrf_token"]

    def raw(self, method: str, path: str, body: Any = None, *, timeout: float = 120
            ) -> tuple[int, dict[str, str], bytes]:
        """Status, headers and body bytes of one request."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method)
        if body is not None:
            request.add_header("Content-Type", "application/json")
        if method != "GET":
            request.add_header("X-CSRF-Token", self.csrf)
        try:
            with self.opener.open(request, timeout=timeout) as resp:
                return resp.status, dict(resp.headers), resp.read()
        except urllib.error.HTTPError as exc:
            return exc.code, dict(exc.headers), exc.read()

    def call(self, method: str, path: str, body: Any = None, *, status: int = 200,
             timeout: float = 120) -> Any:
        """The JSON answer; the status must be ``status``."""
        got, _headers, payload = self.raw(method, path, body, timeout=timeout)
        data = json.loads(payload)
        assert got == status, (got, data)
        if status >= 400:
            assert isinstance(data.get("error"), str) and data["error"]
        return data
