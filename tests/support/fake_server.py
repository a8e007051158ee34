"""A loopback chat-completions server answering from a real tiny transformers model."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np


def _token_prompt(body: dict) -> bool:
    """A ``/completions`` prompt of token ids (what the multi-token reads send)."""
    p = body.get("prompt")
    return isinstance(p, list) and all(isinstance(t, int) for t in p)


class FakeServer:
    """OpenAI-compatible ``/v1/chat/completions`` and ``/v1/models`` on 127.0.0.1.

    ``ids``: honour vLLM's ``logprob_token_ids`` and ``return_tokens_as_token_ids``
    (else ignore them, as an older server); ``reject_extras``: answer 400 to them (as
    a strict hosted API); ``logprobs``: False returns ``logprobs: null``;
    ``ids`` also serves vLLM's ``POST /tokenize`` (chat messages, at the root) and
    ``/v1/completions`` on a token-id prompt (listing the top ``logprobs`` tokens and
    the sampled one), the requests of multi-token answers; ``logprob_ids``: False ignores
    ``logprob_token_ids`` alone (a vLLM server without the extension: top-k mode);
    ``fail_every``/``drop_every``: every n-th request gets 429 / a dropped
    connection (the 429 says ``Retry-After: retry_after``, a callable giving the
    value each time); ``break_after``: every request after the n-th gets 503; ``padded``: a
    top-k listing is the best token then token 0 at -9999, as vLLM answers a top-k
    request batched with a ``logprob_token_ids`` request.
    """

    def __init__(self, model_dir, served="tiny", *, ids=True, reject_extras=False,
                 logprobs=True, fail_every=0, drop_every=0, break_after=0, key=None,
                 models_endpoint=True, padded=False, retry_after="0",
                 logprob_ids=True):  # fmt: skip
        from xlikert.collect.backends.transformers import Scorer, load_model

        self.lm = load_model({"name": "srv", "source": str(model_dir)}, range(1, 8))
        self.scorer = Scorer(self.lm, prefix_cache=False)
        self.served, self.ids, self.reject_extras = served, ids, reject_extras
        self.logprobs, self.fail_every, self.drop_every = logprobs, fail_every, drop_every
        self.break_after, self.key, self.models_endpoint = break_after, key, models_endpoint
        self.padded, self.retry_after, self.logprob_ids = padded, retry_after, logprob_ids
        self.count = 0
        self.queries: set[str] = set()  # query strings the client sent
        self.seen_auth: set[str] = set()
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # as real servers (asyncio's TCP transports set TCP_NODELAY): with Nagle's rule
            # the body, written after the headers, waits for the client's delayed ACK
            disable_nagle_algorithm = True

            def log_message(self, *args):
                pass

            def _send(self, status, obj, headers=()):
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in headers:
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def _gate(self) -> bool:
                with outer.lock:
                    outer.count += 1
                    n = outer.count
                    outer.seen_auth.add(self.headers.get("Authorization", ""))
                if outer.break_after and n > outer.break_after:
                    self._send(503, {"error": {"message": "overloaded"}})
                    return False
                if outer.drop_every and n % outer.drop_every == 0:
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return False
                if outer.fail_every and n % outer.fail_every == 0:
                    after = outer.retry_after
                    after = after() if callable(after) else after
                    self._send(429, {"error": {"message": "slow down"}}, [("Retry-After", after)])
                    return False
                if outer.key and self.headers.get("Authorization") != f"Bearer {outer.key}":
                    self._send(401, {"error": {"message": "invalid api key"}})
                    return False
                return True

            def _route(self) -> str:
                route, _, query = self.path.partition("?")
                if query:
                    outer.queries.add(query)
                return route

            def do_GET(self):
                if not self._gate():
                    return
                if self._route() == "/v1/models" and outer.models_endpoint:
                    self._send(200, {"object": "list", "data": [{"id": outer.served}]})
                else:
                    self._send(404, {"error": {"message": "not found"}})

            def do_POST(self):
                n = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(n))
                if not self._gate():
                    return
                route = self._route()
                if outer.ids and route == "/tokenize":  # vLLM's, at the server's root
                    return self._send(200, outer.tokenize(body))
                if outer.ids and route == "/v1/completions" and _token_prompt(body):
                    return self._send(200, outer.complete(body))
                if route != "/v1/chat/completions":
                    return self._send(404, {"error": {"message": "not found"}})
                if body.get("model") != outer.served:
                    msg = f"The model `{body.get('model')}` does not exist."
                    return self._send(404, {"error": {"message": msg}})
                extras = {"logprob_token_ids", "return_tokens_as_token_ids"} & set(body)
                if outer.reject_extras and extras:
                    return self._send(400, {"error": {"message": f"unknown {sorted(extras)}"}})
                self._send(200, outer.answer(body))

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def _logp(self, ids):
        import torch

        with self.lock:
            logits = self.scorer.forward([], None, [ids])[0]
        return torch.log_softmax(logits.double(), -1)

    def tokenize(self, body) -> dict:
        """vLLM's ``POST /tokenize`` with chat messages: the templated prompt's ids."""
        msgs = body["messages"]
        system = next((m["content"] for m in msgs if m["role"] == "system"), "")
        user = next(m["content"] for m in msgs if m["role"] == "user")
        ids = self.lm.encode(self.lm.render(system, user))
        return {"count": len(ids), "max_model_len": 4096, "tokens": ids}

    def complete(self, body) -> dict:
        """``/v1/completions`` on a token-id prompt with ``logprob_token_ids`` (vLLM's
        extension; float32 log-probabilities, as vLLM returns them)."""
        logp = self._logp([int(t) for t in body["prompt"]])
        best = int(logp.argmax())
        chosen = list(body.get("logprob_token_ids") or []) if self.logprob_ids else []
        listed = logp.topk(min(int(body.get("logprobs") or 0), len(logp))).indices.tolist()
        top = {f"token_id:{i}": float(np.float32(logp[i])) for i in [best, *chosen, *listed]}
        lp = {"tokens": [f"token_id:{best}"], "token_logprobs": [float(logp[best])],
              "top_logprobs": [top], "text_offset": [0]}  # fmt: skip
        return {"id": "cmpl-x", "object": "text_completion", "model": self.served,
                "choices": [{"index": 0, "text": "", "logprobs": lp, "finish_reason": "length"}]}  # fmt: skip

    def answer(self, body) -> dict:
        import torch

        msgs = body["messages"]
        system = next((m["content"] for m in msgs if m["role"] == "system"), "")
        user = next(m["content"] for m in msgs if m["role"] == "user")
        ids = self.lm.encode(self.lm.render(system, user))
        with self.lock:
            logits = self.scorer.forward([], None, [ids])[0]
        logp = torch.log_softmax(logits.double(), -1)
        tok = self.lm.tokenizer
        as_ids = self.ids and body.get("return_tokens_as_token_ids")

        def show(i):
            return f"token_id:{i}" if as_ids else tok.decode([i])

        if self.ids and self.logprob_ids and body.get("logprob_token_ids"):
            chosen = list(body["logprob_token_ids"])
        else:
            chosen = logp.topk(int(body.get("top_logprobs", 0))).indices.tolist()
        best = int(logp.argmax())
        listed = [(show(i), float(logp[i])) for i in chosen]
        if self.padded and not body.get("logprob_token_ids"):  # vLLM's mixed-batch answer
            listed = [(show(best), float(logp[best]))] + [(show(0), -9999.0)] * (len(chosen) - 1)
        entry = {
            "token": show(best),
            "logprob": float(logp[best]),
            "top_logprobs": [{"token": t, "logprob": lp} for t, lp in listed],
        }
        return {
            "id": "cmpl-x",
            "object": "chat.completion",
            "model": self.served,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": tok.decode([best])},
                    "logprobs": {"content": [entry]} if self.logprobs else None,
                    "finish_reason": "length",
                }
            ],
        }

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=10)
