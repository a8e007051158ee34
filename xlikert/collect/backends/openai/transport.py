"""How requests travel: one pooled ``httpx`` client, retries, and errors that name no secret.

``httpx`` keeps a pool of keep-alive connections shared by the worker threads,
applies the timeout, and reads the proxy (``HTTPS_PROXY``, ``NO_PROXY``, ...) and
TLS (``SSL_CERT_FILE``, ``SSL_CERT_DIR``) settings from the environment as other
HTTP tools do. xlikert adds the retry rule: transient statuses
(:data:`RETRY_STATUS`), timeouts and dropped connections are retried with
exponential backoff, or after the server's ``Retry-After`` (seconds or an HTTP
date), capped at a minute; the same HTTP 500 twice in a row is the server's
answer, not a passing fault. Every other status is final at once.

The API key is read from its environment variable for each request and goes only
into that request's ``Authorization`` header: it is not kept here, and an error
message never holds it, nor the URL's password or query.
"""

from __future__ import annotations

import base64
import email.utils
import functools
import json
import os
import random
import ssl
import threading
import time
import urllib.parse
from collections.abc import Generator
from typing import Any

import httpx

from ....core.errors import CollectionError
from .spec import OpenAISpec

__all__ = ["RETRY_STATUS", "HTTPStatusFailure", "Transport", "Unreachable"]

#: Statuses that say "try again later"; any other error status is final.
RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
#: The longest wait before a retry, whatever the backoff or ``Retry-After`` say (s).
MAX_WAIT = 60.0


class HTTPStatusFailure(Exception):
    """The server answered with an error status (or with a body that is not JSON)."""

    def __init__(self, status: int, message: str, retry_after: float | None = None):
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.message = message
        self.retry_after = retry_after


class Unreachable(Exception):
    """No answer after the retries: refused or dropped connections, timeouts."""


def _retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: delay-seconds or an HTTP date.

    Examples
    --------
    >>> _retry_after("3")
    3.0
    >>> _retry_after("Wed, 21 Oct 2015 07:28:10 GMT", now=1445412480.0)
    10.0
    >>> _retry_after("soon") is None
    True
    """
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    now = time.time() if now is None else now
    return max(0.0, when.timestamp() - now)


class _Auth(httpx.Auth):
    """``Bearer $api_key_env`` read at request time, else Basic from the URL's user."""

    def __init__(self, env: str, basic: str | None):
        self._env = env
        self._basic = basic

    def __repr__(self) -> str:
        return f"<auth from ${self._env}>"

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        key = os.environ.get(self._env)
        if key:
            request.headers["Authorization"] = f"Bearer {key}"
        elif self._basic:
            request.headers["Authorization"] = self._basic
        yield request


def _error_message(raw: bytes) -> str:
    try:
        obj = json.loads(raw)
        err = obj.get("error", obj) if isinstance(obj, dict) else obj
        if isinstance(err, dict):
            return str(err.get("message") or err.get("detail") or err)
        return str(err)
    except ValueError:
        return raw[:300].decode(errors="replace")


@functools.cache
def _tls(cert_file: str | None, cert_dir: str | None) -> ssl.SSLContext:
    """The TLS settings, built once per ``SSL_CERT_FILE``/``SSL_CERT_DIR`` (tens of ms each).

    httpx reads the two variables itself; they are the arguments only to key the cache.
    """
    return httpx.create_ssl_context(trust_env=True)


class Transport:
    """Thread-safe JSON requests to one server, with the retry rule of this module.

    Counts the requests answered (:attr:`requests`) and the retries (:attr:`retries`).
    """

    def __init__(self, spec: OpenAISpec):
        self.spec = spec
        u = urllib.parse.urlsplit(spec.base_url)
        basic = None
        if u.username:
            cred = f"{urllib.parse.unquote(u.username)}:{urllib.parse.unquote(u.password or '')}"
            basic = "Basic " + base64.b64encode(cred.encode()).decode()
        # what an error message must not show: the password and the query of base_url
        self._hide = [s for s in (u.password, u.query) if s]
        self.http = httpx.Client(
            base_url=spec.public_url,
            # a query in base_url (e.g. ?api-version=...) goes with every request
            params=httpx.QueryParams(dict(urllib.parse.parse_qsl(u.query, keep_blank_values=True))),
            headers={"Accept": "application/json"},
            auth=_Auth(spec.api_key_env, basic),
            timeout=spec.timeout,
            limits=httpx.Limits(max_connections=spec.concurrency + 1),
            trust_env=True,
            verify=_tls(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")),
        )
        self._lock = threading.Lock()
        self.requests = 0
        self.retries = 0

    def __repr__(self) -> str:
        return f"<Transport {self.spec.public_url}>"

    def close(self) -> None:
        """Close every pooled connection."""
        self.http.close()

    def _count(self, what: str) -> None:
        with self._lock:
            setattr(self, what, getattr(self, what) + 1)

    def _once(self, method: str, route: str, body: dict | None) -> Any:
        """One attempt: the JSON answer, or :class:`HTTPStatusFailure`; transport errors raise."""
        resp = self.http.request(method, route.lstrip("/"), json=body)
        self._count("requests")
        if resp.status_code == 200:
            try:
                return resp.json()
            except ValueError:
                raise HTTPStatusFailure(
                    200, f"response is not JSON: {resp.content[:200]!r}"
                ) from None
        wait = _retry_after(resp.headers.get("Retry-After"))
        raise HTTPStatusFailure(resp.status_code, _error_message(resp.content), wait)

    def _wait(self, attempt: int, last: Exception | None) -> None:
        self._count("retries")
        delay = self.spec.backoff * 2 ** (attempt - 1)
        if isinstance(last, HTTPStatusFailure) and last.retry_after is not None:
            delay = max(delay, min(last.retry_after, MAX_WAIT))
        time.sleep(min(delay, MAX_WAIT) * (1 + 0.1 * random.random()))

    def request(
        self, method: str, route: str, body: dict | None = None, retries: int | None = None
    ) -> Any:
        """Send one request and return its JSON answer, retrying transient failures.

        Raises
        ------
        HTTPStatusFailure
            A final error status, or the last transient one when the retries ran out.
        Unreachable
            Connections refused or dropped, or timeouts, until the retries ran out.
        """
        retries = self.spec.max_retries if retries is None else retries
        last: Exception | None = None
        for attempt in range(retries + 1):
            if attempt:
                self._wait(attempt, last)
            try:
                return self._once(method, route, body)
            except httpx.TransportError as exc:  # refused, reset, timed out, bad proxy
                last = Unreachable(self._redact(f"{type(exc).__name__}: {exc}"))
            except HTTPStatusFailure as exc:
                # the same 500 twice in a row is the server's answer, not a passing fault
                repeated = exc.status == 500 and getattr(last, "message", None) == exc.message
                if exc.status not in RETRY_STATUS or repeated:
                    raise
                last = exc
        assert last is not None
        raise last

    def _redact(self, text: str) -> str:
        key = os.environ.get(self.spec.api_key_env)
        for secret in [*self._hide, *([key] if key else [])]:
            text = text.replace(secret, "***")
        return text

    def failure(self, what: str, exc: Exception) -> CollectionError:
        """The error to raise for ``exc`` during ``what`` (names the URL, never a secret)."""
        name, url = self.spec.name, self.spec.public_url
        if isinstance(exc, HTTPStatusFailure) and exc.status in (401, 403):
            have = "is set" if os.environ.get(self.spec.api_key_env) else "is NOT set"
            return CollectionError(
                f"model {name!r}: server {url} refused {what} ({self._redact(str(exc))}); the "
                f"API key is read from ${self.spec.api_key_env}, which {have}"
            )
        if isinstance(exc, HTTPStatusFailure):
            hint = ""
            if exc.status == 404 and not url.endswith("/v1"):
                hint = (
                    f"; base_url has no /v1 — OpenAI-compatible servers (vLLM, llama.cpp) "
                    f"serve the API under it: did you mean {url}/v1?"
                )
            return CollectionError(
                f"model {name!r}: server {url} answered {what} with {self._redact(str(exc))}{hint}"
            )
        return CollectionError(f"model {name!r}: cannot reach server {url} ({what}): {exc}")
