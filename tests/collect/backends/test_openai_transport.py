"""The server backend's transport and spec, against a scripted loopback server (no model)."""

from __future__ import annotations

import email.utils
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from xlikert.collect import protocol
from xlikert.collect.backends import openai as server
from xlikert.collect.backends.openai import parse_openai_spec
from xlikert.collect.backends.openai.transport import HTTPStatusFailure, Transport, Unreachable
from xlikert.core.errors import CollectionError

KEY = "sk-xlikert-transport-DO-NOT-STORE-7777"
OK = (200, {}, {"object": "list", "data": [{"id": "m"}]})


class Scripted:
    """Answers requests with ``script`` (status, headers, JSON body) in turn, then 200s.

    Records each request's line (``method path``) and headers; a proxy request (a
    full URL in the request line) is answered the same way.
    """

    def __init__(self, script=()):
        self.script = list(script)
        self.seen: list[tuple[str, dict]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, *args):
                pass

            def _answer(self):
                n = int(self.headers.get("Content-Length", 0))
                self.rfile.read(n)
                outer.seen.append((f"{self.command} {self.path}", dict(self.headers)))
                status, headers, body = outer.script.pop(0) if outer.script else OK
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, v(self) if callable(v) else v)
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _answer

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def scripted():
    made = []

    def make(script=()):
        made.append(Scripted(script))
        return made[-1]

    yield make
    for s in made:
        s.close()


@pytest.fixture
def waits(monkeypatch):
    """The transport's waits before retries, recorded instead of slept."""
    out: list[float] = []
    monkeypatch.setattr(time, "sleep", out.append)
    return out


def transport(url, **kw) -> Transport:
    entry = {"name": "m", "source": "openai:m", "base_url": url, "api_key_env": "XLK_T_KEY"}
    return Transport(parse_openai_spec({"backoff": 0.01, "max_retries": 3, **entry, **kw}))


def err(status, message, **headers):
    return (status, headers, {"error": {"message": message}})


def test_only_transient_statuses_are_retried(scripted, waits):
    srv = scripted([err(503, "busy"), err(429, "slow"), OK])
    t = transport(srv.url)
    assert t.request("GET", "/models")["data"] == [{"id": "m"}]
    assert (t.requests, t.retries, len(waits)) == (3, 2, 2)
    for status in (400, 401, 404, 422):
        srv.script = [err(status, "no")]
        with pytest.raises(HTTPStatusFailure) as e:
            t.request("POST", "/chat/completions", {})
        assert e.value.status == status
    assert len(srv.seen) == 3 + 4 and len(waits) == 2  # one request each, no retry
    # the same 500 twice in a row is the server's answer; another 500 is retried
    srv.script = [err(500, "a"), err(500, "b"), err(500, "b")]
    with pytest.raises(HTTPStatusFailure, match="HTTP 500: b"):
        t.request("POST", "/chat/completions", {})
    assert len(srv.seen) == 7 + 3
    # retries run out on a transient status: that status is raised
    srv.script = [err(503, "busy")] * 4
    with pytest.raises(HTTPStatusFailure, match="HTTP 503: busy"):
        t.request("GET", "/models")
    t.close()


def test_retry_after_seconds_and_http_date_are_honoured(scripted, waits):
    def in_30s(_handler):
        return email.utils.formatdate(time.time() + 30, usegmt=True)

    srv = scripted([err(429, "slow", **{"Retry-After": "7"}),
                    err(503, "busy", **{"Retry-After": in_30s}), OK])  # fmt: skip
    t = transport(srv.url)
    t.request("GET", "/models")
    assert 7 <= waits[0] <= 7 * 1.1
    assert 28 <= waits[1] <= 30 * 1.1  # the date has whole seconds
    # capped at a minute; a malformed header falls back to the backoff
    srv.script = [
        err(429, "x", **{"Retry-After": "3600"}),
        err(429, "y", **{"Retry-After": "soon"}),
    ]
    t.request("GET", "/models")
    assert 60 <= waits[2] <= 66 and waits[3] < 1
    t.close()


def test_unreachable_after_retries(waits):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t = transport(f"http://127.0.0.1:{port}/v1", max_retries=2)
    with pytest.raises(Unreachable, match="ConnectError"):
        t.request("GET", "/models")
    assert t.retries == 2 and t.requests == 0 and len(waits) == 2


def test_key_is_sent_per_request_and_never_shown(scripted, waits, monkeypatch):
    # the server echoes the key in its error (some do): the message xlikert raises hides it
    srv = scripted([err(401, f"invalid key {KEY}")])
    url = srv.url.replace("http://", "http://user:pa55word@") + "?token=q5ecret"
    t = transport(url)
    monkeypatch.setenv("XLK_T_KEY", KEY)
    with pytest.raises(HTTPStatusFailure) as e:
        t.request("GET", "/models")
    msg = str(t.failure("GET /models", e.value))
    assert "which is set" in msg and KEY not in msg and "***" in msg
    assert srv.seen[-1][1]["Authorization"] == f"Bearer {KEY}"
    monkeypatch.delenv("XLK_T_KEY")
    t.request("GET", "/models")  # without the key: Basic from the URL's user
    assert srv.seen[-1][1]["Authorization"].startswith("Basic ")
    assert srv.seen[-1][0] == "GET /v1/models?token=q5ecret"
    shown = repr(t) + repr(t.spec) + repr(t.http) + repr(t.http.auth)
    for secret in (KEY, "pa55word", "q5ecret"):
        assert secret not in shown
    t.close()


def test_proxy_from_the_environment_is_used(scripted, monkeypatch):
    proxy = scripted()
    monkeypatch.setenv("HTTP_PROXY", proxy.url.removesuffix("/v1"))
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    t = transport("http://upstream.invalid:8000/v1")
    assert t.request("GET", "/models")["data"] == [{"id": "m"}]
    assert proxy.seen[-1][0] == "GET http://upstream.invalid:8000/v1/models"
    t.close()


def test_backend_of_is_the_one_rule_for_a_server_entry():
    # `is_server_spec` said True for this entry while backend_of picks vllm: one rule now
    assert not hasattr(server, "is_server_spec")
    entry = {"name": "m", "source": "openai:Qwen/Qwen3-8B", "backend": "vllm"}
    assert protocol.backend_of(entry) == "vllm"
    assert protocol.backend_of({"name": "m", "source": "openai:m"}) == "openai"
    assert protocol.backend_module({"name": "m", "source": "openai:m"}) is server


def test_spec_repr_hides_the_url_password():
    s = parse_openai_spec({"name": "m", "source": "openai:m", "base_url": "http://u:pa55@h/v1"})
    assert "pa55" not in repr(s) and "http://h/v1" in repr(s)
    with pytest.raises(CollectionError, match="looks like a secret"):
        parse_openai_spec({"name": "m", "source": "openai:m", "password": "x"})
