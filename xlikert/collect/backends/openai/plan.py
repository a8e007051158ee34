"""What is sent: the request bodies, the probe that picks the mode, and the waves of requests.

One chat-completions request per prompt with ``max_tokens=1``, ``logprobs=true``
and ``top_logprobs=k+1`` (a server may list its sampled token first whatever its
rank, so one entry more than ``k`` is asked for). In exact mode a second request
per prompt carries vLLM's ``logprob_token_ids`` with every valid token id. The two
kinds go in two waves, never in flight together (see :meth:`RequestPlan.waves`).
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from ....core.errors import CollectionError
from .readout import OUT_OF_ORDER, entries, token_id
from .spec import OpenAISpec
from .transport import HTTPStatusFailure, Transport, Unreachable

__all__ = ["CACHE_RESET", "RequestPlan", "messages"]

T = TypeVar("T")
U = TypeVar("U")

#: The completion sent to a llama-cpp-python server before every request (see
#: :meth:`RequestPlan.post`): it shares no token but BOS with a chat prompt.
CACHE_RESET = {"prompt": "\n", "max_tokens": 1, "temperature": 0.0}

#: How each server kind's prompt cache is kept out of the numbers (for the provenance).
PROMPT_CACHE = {
    "llama.cpp": "off: cache_prompt=false sent with every request",
    "vllm": "isolated: a fresh cache_salt with every request (vLLM's prefix cache "
    "would make the numbers depend on which requests came before)",
    "llama-cpp-python": "reset before every request: the one-token completion "
    f"{json.dumps(CACHE_RESET)}, then the request, one pair at a time (the server "
    "reuses the token prefix of the previous request, and its numbers depend on it)",
}


def messages(system: str, user: str) -> list[dict[str, str]]:
    """The chat messages of one prompt (no system message when ``system`` is empty)."""
    msgs = [{"role": "user", "content": user}]
    if system:
        msgs.insert(0, {"role": "system", "content": system})
    return msgs


class RequestPlan:
    """The requests for one model on one server: bodies, mode detection, waves.

    ``kind`` is the server kind (``vllm``, ``llama.cpp``, ``llama-cpp-python`` or
    ``other``), which decides how its prompt cache is kept out of the numbers.
    """

    def __init__(self, spec: OpenAISpec, transport: Transport | None, top_k: int, kind: str):
        self.spec = spec
        self._transport = transport
        self.top_k = top_k
        self.kind = kind
        self._serial = threading.Lock()

    @property
    def transport(self) -> Transport:
        """The connection the requests go through (a plan built without one, to write the
        requests' bodies only, sends nothing)."""
        if self._transport is None:
            raise CollectionError(
                f"model {self.spec.name!r}: internal error: a request plan without a "
                "connection was asked to send; please report it"
            )
        return self._transport

    def body(self, msgs: list, *, ids: Sequence[int] | None = None, as_ids: bool = False) -> dict:
        """One request: the top-k listing, or (``ids``) the log-probabilities of ``ids``."""
        body: dict[str, Any] = {
            "model": self.spec.model,
            "messages": msgs,
            "max_tokens": 1,
            "temperature": self.spec.temperature,
            "top_p": 1.0,
            "logprobs": True,
            "top_logprobs": self.top_k + OUT_OF_ORDER,
            "n": 1,
            "stream": False,
        }
        if self.spec.seed is not None:
            body["seed"] = self.spec.seed
        if ids is not None:
            body["logprob_token_ids"] = list(ids)
        if as_ids:
            body["return_tokens_as_token_ids"] = True
        if self.kind == "llama.cpp":
            body["cache_prompt"] = False  # its cached prefix changes the numbers
        elif self.kind == "vllm":  # a salt of its own: no cached prefix of another request
            body["cache_salt"] = uuid.uuid4().hex
        body.update(self.spec.extra_body)
        return body

    def post(self, body: dict) -> dict:
        """POST a chat completion, keeping the server's prompt cache out of the numbers.

        llama-cpp-python reuses the longest token prefix shared with the previous
        request, and its log-probabilities depend on that prefix (up to 0.6% of a
        probability on the offline Qwen). It has no switch, so every request is
        preceded by the same one-token completion (:data:`CACHE_RESET`), one pair at
        a time: each request then starts from the same cache state, whatever came
        before it. llama.cpp's own server gets ``cache_prompt: false`` instead.
        """
        send = self.transport.request
        if self.kind != "llama-cpp-python":
            return send("POST", "/chat/completions", body)
        with self._serial:
            send("POST", "/completions", {"model": self.spec.model, **CACHE_RESET})
            return send("POST", "/chat/completions", body)

    def complete(self, body: dict, what: str = "a completion") -> dict:
        """POST a text completion (``/completions``; the elicitation level ``prefix``), the
        server's prompt cache kept out of the numbers as for :meth:`post`; its failures
        told as a :class:`~xlikert.core.errors.CollectionError`."""
        body = dict(body)
        if self.kind == "llama.cpp":
            body["cache_prompt"] = False
        elif self.kind == "vllm":
            body["cache_salt"] = uuid.uuid4().hex
        body.update(self.spec.extra_body)
        send = self.transport.request

        def post() -> dict:
            if self.kind != "llama-cpp-python":
                return send("POST", "/completions", body)
            with self._serial:
                send("POST", "/completions", {"model": self.spec.model, **CACHE_RESET})
                return send("POST", "/completions", body)

        return self.told(what, post)

    def request(self, body: dict, what: str = "a request") -> dict:
        """:meth:`post`, its failures told as a :class:`~xlikert.core.errors.CollectionError`."""
        return self.told(what, self.post, body)

    def told(self, what: str, send: Callable[..., Any], *args: Any) -> Any:
        """``send(*args)``, an HTTP failure (after the transport's retries) told as a
        :class:`~xlikert.core.errors.CollectionError` naming ``what`` was sent."""
        try:
            return send(*args)
        except HTTPStatusFailure as exc:
            raise self.transport.failure(what, exc) from exc
        except Unreachable as exc:
            raise self.transport.failure(f"{what} after retries", exc) from exc

    def served_model(self) -> dict[str, Any] | None:
        """The ``GET /models`` entry of the served model; None without that endpoint.

        Raises
        ------
        CollectionError
            The server cannot be reached, or does not serve the model.
        """
        try:
            obj = self.transport.request("GET", "/models", retries=min(2, self.spec.max_retries))
        except HTTPStatusFailure as exc:
            if exc.status in (404, 405) and self.spec.public_url.endswith("/v1"):
                return None
            raise self.transport.failure("GET /models", exc) from exc
        except Unreachable as exc:
            raise self.transport.failure("GET /models", exc) from exc
        data = obj.get("data") if isinstance(obj, dict) else None
        listed = [m for m in data or [] if isinstance(m, dict)]
        served = [str(m.get("id")) for m in listed]
        if served and self.spec.model not in served:
            raise CollectionError(
                f"model {self.spec.name!r}: server {self.spec.public_url} does not serve model "
                f"{self.spec.model!r}; it serves {served}"
            )
        return next((m for m in listed if m.get("id") == self.spec.model), {})

    def detect(self, msgs: list, valid_ids: Sequence[int] | None, tokenized: bool):
        """Pick the mode with one probe prompt: ``(mode, ids_ok, why exact is unavailable)``.

        Exact when the server answers ``logprob_token_ids`` with every valid id;
        else top-k, with token ids when the server returns them and a tokenizer
        can name them (``tokenized``), by text otherwise.
        """
        want, why = self.spec.mode, ""
        if want == "topk":
            why = "mode='topk' requested"
        elif valid_ids is None:
            why = "no tokenizer: the valid token ids are unknown (give `tokenizer`)"
        else:
            why = self._probe_exact(msgs, valid_ids)
            if not why:
                return "exact", True, ""
        if want == "exact":
            raise CollectionError(
                f"model {self.spec.name!r}: mode='exact' but {why}; exact mode needs a vLLM "
                "server with the logprob_token_ids extension (or use mode='topk')"
            )
        return "topk", self._probe_ids(msgs, tokenized), why

    def _probe_exact(self, msgs: list, ids: Sequence[int]) -> str:
        """Why exact mode is unavailable; empty when the server honours the extension."""
        try:
            obj = self.post(self.body(msgs, ids=ids, as_ids=True))
        except HTTPStatusFailure as exc:
            if exc.status not in (400, 422):
                raise self.transport.failure("the probe request", exc) from exc
            return f"the server rejected logprob_token_ids ({exc})"
        except Unreachable as exc:
            raise self.transport.failure("the probe request", exc) from exc
        got = {token_id(t) for t, _ in entries(obj, self.spec)}
        if set(ids) <= got:
            return ""
        return "the server ignored logprob_token_ids (its reply lacks some valid ids)"

    def _probe_ids(self, msgs: list, tokenized: bool) -> bool:
        """Top-k mode: whether the server lists token ids (``return_tokens_as_token_ids``)."""
        for as_ids in [True, False] if tokenized else [False]:
            try:
                obj = self.transport.request(
                    "POST", "/chat/completions", self.body(msgs, as_ids=as_ids)
                )
            except HTTPStatusFailure as exc:
                if as_ids and exc.status in (400, 422):
                    continue
                raise self.transport.failure("the probe request", exc) from exc
            except Unreachable as exc:
                raise self.transport.failure("the probe request", exc) from exc
            return as_ids and all(token_id(t) is not None for t, _ in entries(obj, self.spec))
        return False

    def waves(
        self,
        pool: ThreadPoolExecutor,
        msgs: list[list],
        ids_ok: bool,
        ids: Sequence[int] | None,
        read_listing: Callable[[dict], T],
        read_ids: Callable[[dict], U],
    ) -> tuple[list[T], list[U] | None]:
        """Every prompt's top-k listing, then (given ``ids``) its valid ids' log-probabilities.

        Each answer is read (``read_listing``, ``read_ids``) in the worker thread
        that got it. The listings all come back before the first
        ``logprob_token_ids`` request goes out: vLLM answers every request of a batch
        that holds both kinds with the id lists (its sampler prefers
        ``logprob_token_ids`` for the whole batch), which would replace a listing by
        the sampled token and padding.
        """

        def listing(m: list) -> T:
            return read_listing(self.request(self.body(m, as_ids=ids_ok)))

        def valid(m: list) -> U:
            return read_ids(self.request(self.body(m, ids=ids, as_ids=True)))

        listings = list(pool.map(listing, msgs))
        return listings, (None if ids is None else list(pool.map(valid, msgs)))
