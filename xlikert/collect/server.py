"""OpenAI-compatible server backend: vLLM, llama.cpp server, hosted chat-completions APIs.

One chat-completions request per (condition, item) with ``max_tokens=1``,
``logprobs=true`` and ``top_logprobs=k+1``. Two modes, detected at run time:

``exact``
    The server honours vLLM's request extension ``logprob_token_ids`` (a list of
    token ids whose log-probabilities are returned at the generated position
    whatever their rank; vLLM pull request #43463) together with
    ``return_tokens_as_token_ids``. Every valid token's log-probability is then
    known, so the item PMF and the failure rate are exact, as with the local
    transformers backend. A second request per prompt fetches the natural top-k.
``topk``
    Only the ``k`` most probable tokens are known (OpenAI caps ``k`` at 20). The
    observed probabilities are stored as they are (``pmf`` is renormalised over the
    *observed* valid tokens, ``valid_mass`` is the observed valid mass) and the PMF
    is marked bounded: ``pmf_lower``/``pmf_upper`` and
    ``valid_mass_lower``/``valid_mass_upper`` hold certified intervals
    (:func:`xlikert.constraint.topk_intervals`). Servers may list the sampled
    token first whatever its rank (vLLM does), so xlikert asks for ``k + 1``
    entries and certifies with the rule that allows one entry out of rank order.
    Nothing unobserved is imputed.

The decoding grid needs the full vocabulary; from a server only temperature 1 is
known, for the top-p values whose nucleus provably lies inside the listed tokens
(:func:`xlikert.constraint.nucleus_logprobs` with ``unlisted_max``); every other
grid point is NaN (``decoding_valid_mass`` NaN too: not measured).

The API key is read from an environment variable (``api_key_env``, default
``OPENAI_API_KEY``) when each connection is made; it is never stored, logged or
put in the fingerprint. Only the standard library is used (``http.client``).
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import random
import threading
import time
import urllib.parse
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..constraint import TOPK_BOUNDS_RULE, nucleus_logprobs, scale_mass, topk_intervals
from ..errors import CollectionError
from .protocol import CollectOptions, check_entry_keys
from .schema import UnitResult
from .tokens import ONE_TOKEN_RULE

__all__ = ["ServerModel", "ServerSpec", "check", "is_server_spec", "open", "parse_server_spec"]

_KEYS = {
    "name",
    "source",
    "backend",
    "model",
    "base_url",
    "api_key_env",
    "mode",
    "concurrency",
    "timeout",
    "max_retries",
    "backoff",
    "tokenizer",
    "temperature",
    "seed",
    "extra_body",
    "revision",
    "trust_remote_code",
    "server",
    "logprob_rtol",
}

#: Server kinds with a known prompt cache (see :meth:`ServerModel._post`), and how
#: ``GET /models`` names its owner on each.
SERVER_KINDS = {"vllm": "vllm", "llamacpp": "llama.cpp", "me": "llama-cpp-python"}

#: The completion sent to a llama-cpp-python server before every request (see
#: :meth:`ServerModel._post`): it shares no token but BOS with a chat prompt.
CACHE_RESET = {"prompt": "\n", "max_tokens": 1, "temperature": 0.0}
_RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


def is_server_spec(spec: dict[str, Any]) -> bool:
    """True for a model entry served over an OpenAI-compatible API.

    Examples
    --------
    >>> is_server_spec({"name": "m", "source": "openai:meta-llama/Llama-3.3-70B-Instruct"})
    True
    >>> is_server_spec({"name": "m", "source": "smollm2-135m-instruct"})
    False
    """
    return spec.get("backend") == "openai" or str(spec.get("source", "")).startswith("openai:")


@dataclass(frozen=True)
class ServerSpec:
    """A model behind an OpenAI-compatible server (see :func:`parse_server_spec`)."""

    name: str
    model: str
    base_url: str
    api_key_env: str = "OPENAI_API_KEY"
    mode: str = "auto"
    concurrency: int = 8
    timeout: float = 120.0
    max_retries: int = 6
    backoff: float = 0.5
    tokenizer: str | None = None
    temperature: float = 1.0
    seed: int | None = 0
    extra_body: dict[str, Any] = field(default_factory=dict)
    trust_remote_code: bool = False
    server: str = "auto"
    logprob_rtol: float = 2e-4

    @property
    def public_url(self) -> str:
        """``base_url`` without user, password, query or fragment (safe to record)."""
        u = urllib.parse.urlsplit(self.base_url)
        host = u.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        netloc = host + (f":{u.port}" if u.port else "")
        return urllib.parse.urlunsplit((u.scheme, netloc, u.path.rstrip("/"), "", ""))


def _secret_fields(obj: Any, prefix: str = "") -> list[str]:
    """Dotted names of fields, at any depth (``extra_body`` too), that look like secrets."""
    out = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            name = f"{prefix}{k}"
            low = str(k).lower()
            if ("key" in low and low != "api_key_env") or low in ("token", "password", "secret"):
                out.append(name)
            out += _secret_fields(v, name + ".")
    return out


def parse_server_spec(spec: dict[str, Any]) -> ServerSpec:
    """Validate a server model entry.

    Keys: ``source = "openai:MODEL"`` (or ``backend = "openai"`` and ``model``),
    ``base_url`` (default ``$OPENAI_BASE_URL`` or ``https://api.openai.com/v1``),
    ``api_key_env``, ``mode`` (``auto``/``exact``/``topk``), ``concurrency``,
    ``timeout`` (s), ``max_retries``, ``backoff`` (s), ``tokenizer`` (Hugging Face
    id or local path: gives the valid token ids), ``temperature``, ``seed``,
    ``extra_body`` (merged into every request, e.g.
    ``{"chat_template_kwargs": {"enable_thinking": false}}``), ``server``
    (``auto``/``vllm``/``llama.cpp``/``llama-cpp-python``/``other``: how the server's
    prompt cache is kept out of the numbers; ``auto`` reads ``GET /models``) and
    ``logprob_rtol`` (relative error of a reported probability, widening top-k
    intervals; default 2e-4 for float32 servers).

    Raises
    ------
    CollectionError
        Unknown keys, a key given in the file instead of the environment, bad values.

    Examples
    --------
    >>> s = parse_server_spec({"name": "L", "source": "openai:m", "base_url": "http://h:8000/v1"})
    >>> s.model, s.public_url, s.mode
    ('m', 'http://h:8000/v1', 'auto')
    """
    name = str(spec.get("name") or spec.get("source"))
    where = f"model {name!r}"
    secrets = _secret_fields(spec)
    if secrets:
        raise CollectionError(
            f"{where}: field {secrets[0]!r} looks like a secret; put the API key in an "
            "environment variable and name it with api_key_env (default OPENAI_API_KEY)"
        )
    if "reasoning" in spec:
        raise CollectionError(
            f"{where}: reasoning mode is not implemented for the openai backend; run the "
            "model in process with backend = 'transformers' or 'vllm'"
        )
    check_entry_keys(spec, _KEYS, "openai")
    source = str(spec.get("source") or "")
    model = spec.get("model") or (source[len("openai:") :] if source.startswith("openai:") else "")
    if not model:
        raise CollectionError(f"{where}: give source = 'openai:MODEL' or model = 'MODEL'")
    base = spec.get("base_url") or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
    u = urllib.parse.urlsplit(str(base))
    if u.scheme not in ("http", "https") or not u.hostname:
        raise CollectionError(f"{where}: base_url must be http(s)://host[:port]/path, got {base!r}")
    mode = spec.get("mode", "auto")
    if mode not in ("auto", "exact", "topk"):
        raise CollectionError(f"{where}: mode must be 'auto', 'exact' or 'topk', got {mode!r}")
    try:
        out = ServerSpec(
            name=name,
            model=str(model),
            base_url=str(base),
            api_key_env=str(spec.get("api_key_env", "OPENAI_API_KEY")),
            mode=mode,
            concurrency=int(spec.get("concurrency", 8)),
            timeout=float(spec.get("timeout", 120.0)),
            max_retries=int(spec.get("max_retries", 6)),
            backoff=float(spec.get("backoff", 0.5)),
            tokenizer=spec.get("tokenizer"),
            temperature=float(spec.get("temperature", 1.0)),
            seed=None if spec.get("seed", 0) is None else int(spec.get("seed", 0)),
            extra_body=dict(spec.get("extra_body") or {}),
            trust_remote_code=bool(spec.get("trust_remote_code", False)),
            server=str(spec.get("server", "auto")),
            logprob_rtol=float(spec.get("logprob_rtol", 2e-4)),
        )
    except (TypeError, ValueError) as exc:
        raise CollectionError(f"{where}: bad value: {exc}") from exc
    kinds = ("auto", *SERVER_KINDS.values(), "other")
    if out.server not in kinds:
        raise CollectionError(f"{where}: server must be one of {list(kinds)}, got {out.server!r}")
    if not 0 <= out.logprob_rtol < 0.1:
        raise CollectionError(f"{where}: logprob_rtol must be in [0, 0.1), got {out.logprob_rtol}")
    if out.concurrency < 1 or out.timeout <= 0 or out.max_retries < 0 or out.backoff < 0:
        raise CollectionError(
            f"{where}: need concurrency >= 1, timeout > 0, max_retries >= 0, backoff >= 0"
        )
    return out


# ---------------------------------------------------------------------------- http
class _HTTPError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.message = message


class _Client:
    """Thread-safe JSON client: one keep-alive connection per thread, retries with backoff."""

    def __init__(self, spec: ServerSpec):
        self.spec = spec
        u = urllib.parse.urlsplit(spec.base_url)
        self.https = u.scheme == "https"
        self.host, self.port = u.hostname, u.port
        self.path = u.path.rstrip("/")
        # a query in base_url (e.g. ?api-version=...) goes with every request, never on record
        self.query = f"?{u.query}" if u.query else ""
        self._basic = None
        if u.username:
            cred = f"{urllib.parse.unquote(u.username)}:{urllib.parse.unquote(u.password or '')}"
            self._basic = "Basic " + base64.b64encode(cred.encode()).decode()
        self._local = threading.local()
        self._lock = threading.Lock()
        self._open: list[http.client.HTTPConnection] = []
        self.retries = 0
        self.requests = 0

    def _conn(self):
        c = getattr(self._local, "conn", None)
        if c is None:
            cls = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
            c = cls(self.host, self.port, timeout=self.spec.timeout)
            self._local.conn = c
            with self._lock:
                self._open.append(c)
        return c

    def close(self) -> None:
        """Close every connection this client opened (in any thread)."""
        with self._lock:
            for c in self._open:
                c.close()
            self._open.clear()

    def _drop(self) -> None:
        c = getattr(self._local, "conn", None)
        if c is not None:
            c.close()
        self._local.conn = None

    def _headers(self) -> dict[str, str]:
        h = {"Content-Type": "application/json", "Accept": "application/json"}
        key = os.environ.get(self.spec.api_key_env)
        if key:
            h["Authorization"] = f"Bearer {key}"
        elif self._basic:
            h["Authorization"] = self._basic
        return h

    def request(self, method: str, route: str, body: dict | None = None, retries=None) -> Any:
        """Send one request; retry 429/5xx/timeouts/dropped connections with backoff."""
        retries = self.spec.max_retries if retries is None else retries
        data = None if body is None else json.dumps(body).encode()
        last: Exception | None = None
        for attempt in range(retries + 1):
            if attempt:
                with self._lock:
                    self.retries += 1
                delay = self.spec.backoff * 2 ** (attempt - 1)
                if isinstance(last, _HTTPError) and getattr(last, "retry_after", None):
                    delay = max(delay, min(float(last.retry_after), 60.0))
                time.sleep(min(delay, 60.0) * (1 + 0.1 * random.random()))
            try:
                conn = self._conn()
                conn.request(
                    method, self.path + route + self.query, body=data, headers=self._headers()
                )
                resp = conn.getresponse()
                raw = resp.read()
                with self._lock:
                    self.requests += 1
            except (OSError, http.client.HTTPException) as exc:  # refused, reset, timeout
                self._drop()
                last = exc
                continue
            if resp.status == 200:
                try:
                    return json.loads(raw)
                except ValueError:
                    last = _HTTPError(200, f"response is not JSON: {raw[:200]!r}")
                    continue
            msg = _error_message(raw)
            err = _HTTPError(resp.status, msg)
            # the same 500 twice in a row is the server's answer, not a passing fault
            repeated = resp.status == 500 and isinstance(last, _HTTPError) and last.message == msg
            if resp.status in _RETRY_STATUS and not repeated:
                err.retry_after = resp.getheader("Retry-After")  # type: ignore[attr-defined]
                if resp.getheader("Connection", "").lower() == "close":
                    self._drop()
                last = err
                continue
            raise err
        assert last is not None
        raise last


def _error_message(raw: bytes) -> str:
    try:
        obj = json.loads(raw)
        err = obj.get("error", obj) if isinstance(obj, dict) else obj
        if isinstance(err, dict):
            return str(err.get("message") or err.get("detail") or err)
        return str(err)
    except ValueError:
        return raw[:300].decode(errors="replace")


# ---------------------------------------------------------------------------- bounds


# ---------------------------------------------------------------------------- protocol
#: Server model fields that change how requests travel, not what comes back.
TRANSPORT_KEYS = ("concurrency", "timeout", "max_retries", "backoff")


def check(spec: dict[str, Any], options: CollectOptions) -> dict[str, Any]:
    """Validate a server model entry (no network); the fields that identify the results.

    The transport settings (:data:`TRANSPORT_KEYS`) are left out, so changing them
    resumes a run; ``base_url`` is recorded without credentials or query.
    """
    sspec = parse_server_spec(spec)
    kept = {k: v for k, v in spec.items() if k not in TRANSPORT_KEYS}
    return {**kept, "base_url": sspec.public_url}


def open(spec: dict[str, Any], options: CollectOptions, probe: tuple[str, str]) -> ServerModel:
    """Connect to the server of a model entry and detect its mode with ``probe``."""
    return ServerModel.open(parse_server_spec(spec), options, probe)


def _strip_marker(text: str) -> str:
    return text[1:] if text[:1] in (" ", "▁", "Ġ") else text


#: What the server backend does in each mode, recorded per model (``collection_protocol``).
PROTOCOL = {
    "exact": "chat completions over HTTP, the prompt templated by the server: per (condition, "
    "item) one request for the top-k listing and one with logprob_token_ids for every valid "
    "token's log-probability (max_tokens=1; vLLM's extension); the item PMF exact over the "
    "valid tokens",
    "topk": "chat completions over HTTP, the prompt templated by the server: per (condition, "
    "item) one request with max_tokens=1 and top_logprobs=top_k+1; only the listed tokens are "
    "known: pmf is the listed valid mass renormalised, with certified intervals (pmf_lower, "
    "pmf_upper, valid_mass_lower, valid_mass_upper; bounds_rule)",
}

#: How the server backend's decoding grid is made, recorded per model (``decoding_rule``).
DECODING_RULE = (
    "xlikert's tie rule (xlikert.constraint.DECODING_TIE_RULE) applied to the tokens the "
    "server listed (and, in exact mode, every valid token), not the full vocabulary: only "
    "temperature 1 is measured, and only for top-p values whose nucleus provably lies inside "
    "the known tokens; every other grid point is NaN (not measured)"
)

#: Listed entries that may stand outside the rank order (the sampled token, listed first).
OUT_OF_ORDER = 1
#: vLLM's floor for a listed log-probability (it writes -inf as -9999): padding, never a rank.
PADDED_LOGPROB = -9999.0


# ---------------------------------------------------------------------------- model
class ServerModel:
    """A model behind an OpenAI-compatible server, ready to score prompts.

    Built by :meth:`open`, which checks the server, the model name and the
    logprob support before any work is done.
    """

    def __init__(self, spec: ServerSpec, options: CollectOptions):
        self.spec = spec
        self.name = spec.name
        self.options = options
        self.scale = list(options.scale)
        self.top_k = int(options.top_k)
        self.client = _Client(spec)
        self.tokenizer = None
        self.valid = None
        self.mode = "topk"
        self.ids_ok = False
        self._prov: dict[str, Any] = {}
        self._pool: ThreadPoolExecutor | None = None
        self.kind = spec.server
        self._serial = threading.Lock()

    def __repr__(self) -> str:
        return (
            f"<ServerModel {self.spec.name!r} model={self.spec.model!r} "
            f"url={self.spec.public_url} mode={self.mode}>"
        )

    # -------------------------------------------------------------- set up
    @classmethod
    def open(cls, spec: ServerSpec, options: CollectOptions, probe: tuple[str, str]) -> ServerModel:
        """Connect, check the model and detect the mode with one probe prompt."""
        from .tokens import needs_sequences

        if needs_sequences(options.scale):
            raise CollectionError(
                f"model {spec.name!r}: the scale {list(options.scale)} needs multi-token answers "
                "(one value's text is a prefix of another's); servers give next-token "
                "log-probabilities only: use the transformers or vllm backend"
            )
        self = cls(spec, options)
        self._check_models()
        if self.kind == "auto":
            self.kind = "other"
        self._load_tokenizer()
        self._detect(*probe)
        return self

    def _fail(self, what: str, exc: Exception) -> CollectionError:
        if isinstance(exc, _HTTPError) and exc.status in (401, 403):
            have = "is set" if os.environ.get(self.spec.api_key_env) else "is NOT set"
            return CollectionError(
                f"model {self.spec.name!r}: server {self.spec.public_url} refused {what} "
                f"({exc}); the API key is read from ${self.spec.api_key_env}, which {have}"
            )
        if isinstance(exc, _HTTPError):
            hint = ""
            path = urllib.parse.urlsplit(self.spec.base_url).path.rstrip("/")
            if exc.status == 404 and not path.endswith("/v1"):
                hint = (
                    f"; base_url has no /v1 — OpenAI-compatible servers (vLLM, llama.cpp) "
                    f"serve the API under it: did you mean {self.spec.public_url}/v1?"
                )
            return CollectionError(
                f"model {self.spec.name!r}: server {self.spec.public_url} answered {what} "
                f"with {exc}{hint}"
            )
        return CollectionError(
            f"model {self.spec.name!r}: cannot reach server {self.spec.public_url} ({what}): "
            f"{type(exc).__name__}: {exc}"
        )

    def _check_models(self) -> None:
        try:
            obj = self.client.request("GET", "/models", retries=min(2, self.spec.max_retries))
        except _HTTPError as exc:
            if exc.status in (404, 405) and urllib.parse.urlsplit(self.spec.base_url).path.rstrip(
                "/"
            ).endswith("/v1"):
                self._prov["models_endpoint"] = "absent"
                return
            raise self._fail("GET /models", exc) from exc
        except (OSError, http.client.HTTPException) as exc:
            raise self._fail("GET /models", exc) from exc
        data = obj.get("data") if isinstance(obj, dict) else None
        served = [str(m.get("id")) for m in (data or []) if isinstance(m, dict)]
        if served and self.spec.model not in served:
            raise CollectionError(
                f"model {self.spec.name!r}: server {self.spec.public_url} does not serve model "
                f"{self.spec.model!r}; it serves {served}"
            )
        info = next((m for m in data or [] if m.get("id") == self.spec.model), {})
        for k in ("root", "owned_by", "max_model_len"):
            if info.get(k) is not None:
                self._prov[f"served_{k}"] = info[k]
        if self.kind == "auto":
            self.kind = SERVER_KINDS.get(str(info.get("owned_by")), "other")

    def _load_tokenizer(self) -> None:
        from .tokens import find_valid_tokens

        name = self.spec.tokenizer
        auto = name is None
        if auto:
            m = self.spec.model
            looks = os.path.isdir(os.path.expanduser(m)) or (m.count("/") == 1 and " " not in m)
            if not looks:
                self._prov["tokenizer_note"] = (
                    f"no tokenizer: the served name {m!r} is not a tokenizer id or folder; "
                    "valid tokens recognised by their text"
                )
                return
            name = m
        try:
            from transformers import AutoTokenizer

            tok = AutoTokenizer.from_pretrained(
                os.path.expanduser(name), trust_remote_code=self.spec.trust_remote_code
            )
        except Exception as exc:
            if auto:  # the served name need not be a loadable tokenizer: top-k by text
                self._prov["tokenizer_note"] = (
                    f"no tokenizer loaded for {name!r} ({type(exc).__name__}); valid tokens "
                    "recognised by their text"
                )
                return
            raise CollectionError(
                f"model {self.spec.name!r}: cannot load tokenizer {name!r}: {exc}"
            ) from exc
        self.tokenizer = tok
        self.valid = find_valid_tokens(tok, self.scale)
        self._prov["tokenizer"] = f"{type(tok).__name__}:{name}"

    def _messages(self, system: str, user: str) -> list[dict[str, str]]:
        msgs = [{"role": "user", "content": user}]
        if system:
            msgs.insert(0, {"role": "system", "content": system})
        return msgs

    def _body(self, msgs, *, ids: list[int] | None = None, as_ids: bool = False) -> dict:
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
            body["logprob_token_ids"] = ids
        if as_ids:
            body["return_tokens_as_token_ids"] = True
        if self.kind == "llama.cpp":
            body["cache_prompt"] = False  # its cached prefix changes the numbers
        elif self.kind == "vllm":  # a salt of its own: no cached prefix of another request
            body["cache_salt"] = uuid.uuid4().hex
        body.update(self.spec.extra_body)
        return body

    def _entries(self, obj: dict) -> list[tuple[str, float]]:
        try:
            first = obj["choices"][0]["logprobs"]["content"][0]
        except (KeyError, IndexError, TypeError):
            raise CollectionError(
                f"model {self.spec.name!r}: server {self.spec.public_url} returns no logprobs "
                "for chat completions (it ignored logprobs=true/top_logprobs); xlikert needs "
                "next-token log-probabilities: use a server that returns them (vLLM, "
                "llama.cpp server, OpenAI) or a local backend"
            ) from None
        out = [(str(e["token"]), float(e["logprob"])) for e in first.get("top_logprobs") or []]
        if not out:
            raise CollectionError(
                f"model {self.spec.name!r}: server {self.spec.public_url} returned an empty "
                "top_logprobs list"
            )
        return out

    def _to_id(self, token: str) -> int | None:
        if token.startswith("token_id:"):
            try:
                return int(token[len("token_id:") :])
            except ValueError:
                return None
        return None

    def _post(self, body: dict) -> dict:
        """POST a chat completion, keeping the server's prompt cache out of the numbers.

        llama-cpp-python reuses the longest token prefix shared with the previous
        request, and its log-probabilities depend on that prefix (up to 0.6% of a
        probability on the offline Qwen). It has no switch, so every request is
        preceded by the same one-token completion (:data:`CACHE_RESET`), one pair at
        a time: each request then starts from the same cache state, whatever came
        before it. llama.cpp's own server gets ``cache_prompt: false`` instead.
        """
        if self.kind != "llama-cpp-python":
            return self.client.request("POST", "/chat/completions", body)
        with self._serial:
            self.client.request("POST", "/completions", {"model": self.spec.model, **CACHE_RESET})
            return self.client.request("POST", "/chat/completions", body)

    def _request(self, body: dict, what: str) -> dict:
        try:
            return self._post(body)
        except _HTTPError as exc:
            raise self._fail(what, exc) from exc
        except (OSError, http.client.HTTPException) as exc:
            raise self._fail(f"{what} after retries", exc) from exc

    def _detect(self, system: str, user: str) -> None:
        msgs = self._messages(system, user)
        want = self.spec.mode
        if want == "topk":
            why = "mode='topk' requested"
        elif self.valid is None:
            why = "no tokenizer: the valid token ids are unknown (give `tokenizer`)"
        else:
            ids = list(self.valid.ids)
            try:
                obj = self._post(self._body(msgs, ids=ids, as_ids=True))
                got = {self._to_id(t) for t, _ in self._entries(obj)}
                if set(ids) <= got:
                    self.mode, self.ids_ok = "exact", True
                    return
                why = "the server ignored logprob_token_ids (its reply lacks some valid ids)"
            except _HTTPError as exc:
                if exc.status not in (400, 422):
                    raise self._fail("the probe request", exc) from exc
                why = f"the server rejected logprob_token_ids ({exc})"
            except (OSError, http.client.HTTPException) as exc:
                raise self._fail("the probe request", exc) from exc
        if want == "exact":
            raise CollectionError(
                f"model {self.spec.name!r}: mode='exact' but {why}; exact mode needs a vLLM "
                "server with the logprob_token_ids extension (or use mode='topk')"
            )
        self._prov["exact_unavailable"] = why
        self.mode = "topk"
        for as_ids in [True, False] if self.tokenizer is not None else [False]:
            try:
                obj = self.client.request(
                    "POST", "/chat/completions", self._body(msgs, as_ids=as_ids)
                )
            except _HTTPError as exc:
                if as_ids and exc.status in (400, 422):
                    continue
                raise self._fail("the probe request", exc) from exc
            except (OSError, http.client.HTTPException) as exc:
                raise self._fail("the probe request", exc) from exc
            entries = self._entries(obj)
            self.ids_ok = as_ids and all(self._to_id(t) is not None for t, _ in entries)
            return

    def provenance(self) -> dict[str, Any]:
        prov = dict(self._prov)
        skip = ("messages", "model", "stream", "n", "cache_salt")  # the salt: fresh per request
        request = {k: v for k, v in self._body([]).items() if k not in skip}
        prov.update(
            backend="openai-compatible chat completions",
            source=f"openai:{self.spec.model}",
            server=self.spec.public_url,
            served_model=self.spec.model,
            mode=self.mode,
            collection_protocol=PROTOCOL[self.mode],
            decoding_rule=DECODING_RULE,
            api_key_env=self.spec.api_key_env,
            request=json.dumps(request, sort_keys=True)
            + (" + logprob_token_ids=<valid ids>" if self.mode == "exact" else ""),
            prompt_format="chat messages (JSON), templated by the server",
            concurrency=self.spec.concurrency,
            answers=ONE_TOKEN_RULE + " (a server cannot condition on an appended space token, "
            "so an answer whose leading space is a token of its own counts as a failure)",
            topk_listing=f"asked for top_k + {OUT_OF_ORDER} entries, kept the top_k most "
            "probable: a server may list its sampled token first whatever its rank",
            http_requests_last_session=self.client.requests,
            http_retries_last_session=self.client.retries,
        )
        prov["server_kind"] = self.kind
        prov["prompt_cache"] = {
            "llama.cpp": "off: cache_prompt=false sent with every request",
            "vllm": "isolated: a fresh cache_salt with every request (vLLM's prefix cache "
            "would make the numbers depend on which requests came before)",
            "llama-cpp-python": "reset before every request: the one-token completion "
            f"{json.dumps(CACHE_RESET)}, then the request, one pair at a time (the server "
            "reuses the token prefix of the previous request, and its numbers depend on it)",
        }.get(self.kind, "not controlled by xlikert")
        if self.mode == "topk":
            prov["bounds"] = TOPK_BOUNDS_RULE
            prov["logprob_rtol"] = self.spec.logprob_rtol
        prov["valid_tokens"] = self.valid.as_records() if self.valid is not None else []
        prov.setdefault("tokenizer", "none (valid tokens recognised by their text)")
        return prov

    # -------------------------------------------------------------- scoring
    def _score_of(self, key) -> int:
        """Score index of a listed token (by id with a tokenizer, else by text), -1 if not valid."""
        if self.ids_ok:
            if not hasattr(self, "_id_score"):
                sidx = {y: i for i, y in enumerate(self.scale)}
                self._id_score = {
                    i: sidx[y] for i, y in zip(self.valid.ids, self.valid.scores, strict=True)
                }
            return self._id_score.get(key, -1)
        by_text = {str(y): i for i, y in enumerate(self.scale)}
        return by_text.get(_strip_marker(str(key)), -1)

    def _listed(self, obj: dict) -> tuple[list[Any], list[str], np.ndarray]:
        """Distinct listed tokens (key, shown text, log-probability), most probable first."""
        seen: dict[Any, tuple[str, float]] = {}
        entries = self._entries(obj)
        if any(lp <= PADDED_LOGPROB for _, lp in entries):
            raise CollectionError(
                f"model {self.spec.name!r}: server {self.spec.public_url} answered a top-k "
                "request with padding (log-probabilities of -9999, i.e. -inf), not the k most "
                "probable tokens: vLLM does this when a request with logprob_token_ids is "
                "batched with it. xlikert never sends the two kinds together; is another "
                "client sending logprob_token_ids to this server?"
            )
        for t, lp in entries:
            i = self._to_id(t) if self.ids_ok else None
            if self.ids_ok and i is None:
                raise CollectionError(f"model {self.spec.name!r}: unexpected token {t!r}")
            key = i if i is not None else t
            shown = self.tokenizer.convert_ids_to_tokens(i) if i is not None else t
            seen.setdefault(key, (shown, lp))  # a sampled token may be listed twice
        keys = sorted(seen, key=lambda k: -seen[k][1])
        return keys, [seen[k][0] for k in keys], np.array([seen[k][1] for k in keys])

    def _fill(self, res: UnitResult, r: int, msgs: list, listing: tuple, got: dict | None) -> None:
        """Write prompt ``r``'s numbers from its top-k listing and (exact mode) its valid ids."""
        S, K, opts = len(self.scale), self.top_k, self.options
        keys, shown, lps = listing
        probs = np.exp(lps)
        scores = np.array([self._score_of(k) for k in keys], dtype=np.int64)
        n = min(K, len(keys))
        res.data["topk_token"][r, :n] = shown[:n]
        res.data["topk_logprob"][r, :n] = lps[:n]
        counts = self._unlisted_valid(keys)
        rtol = self.spec.logprob_rtol if self.mode == "topk" else 0.0
        b = topk_intervals(probs, scores, S, counts, out_of_order=OUT_OF_ORDER, rtol=rtol)
        if got is not None:
            ids = list(self.valid.ids)
            # every valid token exactly; the listed ones besides, for the nucleus threshold
            extra = [k for k in keys if k not in got]
            kn_keys = ids + extra
            kn_lps = np.array([got[i] for i in ids] + [lps[keys.index(k)] for k in extra])
            kn_scores = np.array([self._score_of(k) for k in kn_keys], dtype=np.int64)
            mass = scale_mass(np.exp(kn_lps), kn_scores, S)
            res.data["valid_mass"][r] = mass.sum()
            res.data["pmf"][r] = mass / mass.sum()
        else:
            kn_lps, kn_scores = lps, scores
            for key in ("pmf", "valid_mass", "pmf_lower", "pmf_upper", "valid_mass_lower",
                        "valid_mass_upper"):  # fmt: skip
                res.data[key][r] = b[key]
        # the decoding grid: temperature 1, where the nucleus provably lies in the known tokens
        need = np.flatnonzero(kn_scores >= 0)
        q = nucleus_logprobs(
            kn_lps, need, opts.temperatures, opts.top_ps, unlisted_max=b["unlisted_max"]
        )
        with np.errstate(invalid="ignore"):
            g = scale_mass(np.exp(q), kn_scores[need], S)  # (T, P, S)
        gm = g.sum(-1)
        if self.mode != "exact" and (counts is None or counts.any() or rtol > 0):
            # top_p = 1 keeps the unlisted valid tokens, whose mass is unknown: not measured
            gm = np.where(np.asarray(opts.top_ps)[None, :] >= 1, np.nan, gm)
        res.data["decoding_valid_mass"][r] = gm
        with np.errstate(invalid="ignore"):
            res.data["decoding_pmf"][r] = np.where(gm[..., None] > 0, g / gm[..., None], np.nan)
        res.data["prompt_text"][r] = json.dumps(msgs, ensure_ascii=False)

    def _valid_ids(self, msgs: list) -> dict[int, float]:
        """Exact mode: the log-probability of every valid token id (``logprob_token_ids``)."""
        ids = list(self.valid.ids)
        obj = self._request(self._body(msgs, ids=ids, as_ids=True), "a request")
        got = dict(self._listed_ids(obj))
        missing = [i for i in ids if i not in got]
        if missing:
            raise CollectionError(
                f"model {self.spec.name!r}: the server stopped returning valid ids "
                f"{missing[:5]} (logprob_token_ids)"
            )
        return got

    def _unlisted_valid(self, keys: list[Any]) -> np.ndarray | None:
        """Valid tokens of each score that the list does not hold (None without a tokenizer).

        By id when the server returns ids. By text otherwise: a valid token counts as
        listed when its text is listed and no other valid token has that text (tokens
        of the same text are indistinguishable in a text listing, so both count as
        unlisted: the bound stays valid, only wider).
        """
        if self.valid is None:
            return None
        sidx = {y: i for i, y in enumerate(self.scale)}
        listed = set(keys)
        if self.ids_ok:
            gone = [sidx[y] for i, y in zip(self.valid.ids, self.valid.scores, strict=True)
                    if i not in listed]  # fmt: skip
        else:
            texts = [self.tokenizer.decode([i]) for i in self.valid.ids]
            gone = [sidx[y] for t, y in zip(texts, self.valid.scores, strict=True)
                    if t not in listed or texts.count(t) > 1]  # fmt: skip
        return np.bincount(np.asarray(gone, dtype=np.int64), minlength=len(self.scale))

    def _listed_ids(self, obj: dict) -> list[tuple[int, float]]:
        return [(self._to_id(t), lp) for t, lp in self._entries(obj)]

    def score(self, prompts: Sequence[tuple[str, str]]) -> UnitResult:
        """Score the prompts concurrently (``concurrency`` requests in flight).

        All top-k listings first, then (exact mode) all ``logprob_token_ids``
        requests: the two kinds are never in flight together, because vLLM answers
        every request of a batch that holds both kinds with the id lists (its
        sampler prefers ``logprob_token_ids`` for the whole batch), which would
        replace a listing by the sampled token and padding. :meth:`_listed` refuses
        such a listing, should another client mix them on the same server.
        """
        res = UnitResult.empty(len(prompts), self.options.sizes, bounded=self.mode == "topk")
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self.spec.concurrency)
        msgs = [self._messages(*p) for p in prompts]

        def listing(m: list) -> tuple:
            return self._listed(self._request(self._body(m, as_ids=self.ids_ok), "a request"))

        listings = list(self._pool.map(listing, msgs))
        got = list(self._pool.map(self._valid_ids, msgs)) if self.mode == "exact" else None
        for r in range(len(prompts)):
            self._fill(res, r, msgs[r], listings[r], got[r] if got is not None else None)
        return res

    def close(self) -> None:
        """Stop the worker threads and close every connection."""
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
        self.client.close()
