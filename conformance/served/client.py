"""HTTP to the server on 127.0.0.1: JSON requests, the health probe, the errors they raise.

The standard library only (``urllib.request``), proxies bypassed (never a proxy
for 127.0.0.1), and every request has a timeout.

Out of scope: starting or stopping the server (:mod:`conformance.served.server`),
what the answers mean (:mod:`conformance.served.checks`).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

REQUEST_TIMEOUT = 60.0  # one HTTP request (a 1 MB probe tokenizes in well under a second)
#: What a request raises when the server cannot be reached: refused, reset, timed out.
UNREACHABLE = (urllib.error.URLError, OSError)

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never a proxy for 127.0.0.1


class HttpError(Exception):
    """The server answered with an error status (``code``, ``body``)."""

    def __init__(self, code: int, body: str) -> None:
        super().__init__(f"HTTP {code}: {body[:300]}")
        self.code, self.body = code, body


def request_json(url: str, path: str, body: Any = None, *, timeout: float = REQUEST_TIMEOUT) -> Any:
    """GET ``url + path`` (``body`` None) or POST ``body`` as JSON; the decoded JSON answer.

    Raises :class:`HttpError` on an error status, one of :data:`UNREACHABLE` otherwise.
    """
    data = None if body is None else json.dumps(body).encode("utf-8")
    req = urllib.request.Request(url + path, data=data, method="GET" if data is None else "POST")
    req.add_header("Content-Type", "application/json")
    try:
        with _OPENER.open(req, timeout=timeout) as resp:
            return json.loads(resp.read().decode("utf-8"))
    except urllib.error.HTTPError as exc:
        raise HttpError(exc.code, exc.read().decode("utf-8", "replace")) from None


def healthy(url: str, *, timeout: float = 2) -> bool:
    """Whether ``url/health`` answers 200 within ``timeout`` (False when nothing answers)."""
    try:
        with _OPENER.open(url + "/health", timeout=timeout) as resp:
            return resp.status == 200
    except UNREACHABLE:
        return False
