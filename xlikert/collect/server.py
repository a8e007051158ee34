"""OpenAI-compatible server backend: vLLM, llama.cpp server, hosted chat-completions APIs.

One chat-completions request per (condition, item) with ``max_tokens=1``,
``logprobs=true`` and ``top_logprobs=k``. Two modes, detected at run time:

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
    ``valid_mass_lower``/``valid_mass_upper`` hold certified intervals (see
    :func:`topk_bounds`). Nothing unobserved is imputed.

The decoding grid needs the full vocabulary; from a server only temperature 1 is
known, for the top-p values whose nucleus lies inside the observed top-k; every
other grid point is NaN (``decoding_valid_mass`` NaN too: not measured).

The API key is read from an environment variable (``api_key_env``, default
``OPENAI_API_KEY``) when each connection is made; it is never stored, logged or
put in the fingerprint. Only the standard library is used (``http.client``).
"""

from __future__ import annotations

import base64
import http.client
import json
import math
import os
import random
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import CollectionError

__all__ = [
    "BOUNDS_RULE",
    "ServerModel",
    "ServerSpec",
    "is_server_spec",
    "parse_server_spec",
    "topk_bounds",
]

#: How top-k intervals are derived; stored in the results' attrs.
BOUNDS_RULE = (
    "top-k mode: observed tokens O (the k most probable, raw log-probabilities as reported), "
    "s = sum of their probabilities, R = max(0, 1 - s) the unobserved mass, p_k = the smallest "
    "observed probability; every unobserved token has probability <= p_k and all together <= R. "
    "For score y with observed valid mass a_y and m_y unobserved valid tokens (m_y from the "
    "tokenizer when known, else unbounded) the unobserved valid mass is u_y in [0, U_y], "
    "U_y = min(m_y * p_k, R), sum_y u_y <= R. valid mass in [A, A + min(sum_y U_y, R)] with "
    "A = sum_y a_y; renormalised pmf_y in [a_y / (A + W_y), (a_y + U_y) / (A + U_y)] with "
    "W_y = min(sum_{z != y} U_z, R) (0/0 read as 0 below and 1 above). The stored pmf is a_y / A."
)

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
}
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
    ``{"chat_template_kwargs": {"enable_thinking": false}}``).

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
    unknown = sorted(set(spec) - _KEYS)
    if unknown:
        raise CollectionError(f"{where}: unknown field(s) {unknown} for the openai backend")
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
        )
    except (TypeError, ValueError) as exc:
        raise CollectionError(f"{where}: bad value: {exc}") from exc
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
        self.retries = 0
        self.requests = 0

    def _conn(self):
        c = getattr(self._local, "conn", None)
        if c is None:
            cls = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
            c = cls(self.host, self.port, timeout=self.spec.timeout)
            self._local.conn = c
        return c

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
            if resp.status in _RETRY_STATUS:
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
def topk_bounds(
    observed_valid: np.ndarray, unobserved_counts: np.ndarray | None, observed_total: float, p_k
) -> dict[str, np.ndarray]:
    """Certified intervals for one prompt from its top-k list (see :data:`BOUNDS_RULE`).

    Parameters
    ----------
    observed_valid
        ``(S,)`` observed valid probability per score, ``a_y``.
    unobserved_counts
        ``(S,)`` number of valid tokens of each score not in the list, or None
        when unknown (no tokenizer): then only the total unobserved mass bounds them.
    observed_total
        Sum of the probabilities of every observed token.
    p_k
        Smallest observed probability.

    Examples
    --------
    >>> b = topk_bounds(np.array([0.5, 0.3]), np.array([0, 1]), 0.95, 0.01)
    >>> b["valid_mass_lower"], round(float(b["valid_mass_upper"]), 6)
    (np.float64(0.8), 0.81)
    """
    a = np.asarray(observed_valid, dtype=np.float64)
    R = max(0.0, 1.0 - float(observed_total))
    if unobserved_counts is None:
        U = np.full(a.shape, R)
    else:
        U = np.minimum(np.asarray(unobserved_counts, dtype=np.float64) * float(p_k), R)
    A = float(a.sum())
    tot = min(float(U.sum()), R)
    W = np.minimum(U.sum() - U, R)
    with np.errstate(invalid="ignore", divide="ignore"):
        lo = np.where(A + W > 0, a / (A + W), 0.0)
        hi = np.where(A + U > 0, (a + U) / (A + U), 1.0)
    return {
        "pmf_lower": lo,
        "pmf_upper": np.minimum(hi, 1.0),
        "valid_mass_lower": np.float64(A),
        "valid_mass_upper": np.float64(min(A + tot, 1.0)),
    }


def _strip_marker(text: str) -> str:
    return text[1:] if text[:1] in (" ", "▁", "Ġ") else text


# ---------------------------------------------------------------------------- model
class ServerModel:
    """A model behind an OpenAI-compatible server, ready to score prompts.

    Built by :meth:`open`, which checks the server, the model name and the
    logprob support before any work is done.
    """

    def __init__(self, spec: ServerSpec, scale, top_k: int):
        self.spec = spec
        self.scale = [int(v) for v in scale]
        self.top_k = int(top_k)
        self.client = _Client(spec)
        self.tokenizer = None
        self.valid = None
        self.mode = "topk"
        self.ids_ok = False
        self.provenance: dict[str, Any] = {}

    def __repr__(self) -> str:
        return (
            f"<ServerModel {self.spec.name!r} model={self.spec.model!r} "
            f"url={self.spec.public_url} mode={self.mode}>"
        )

    # -------------------------------------------------------------- set up
    @classmethod
    def open(cls, spec: ServerSpec, scale, top_k: int, probe: tuple[str, str]) -> ServerModel:
        """Connect, check the model and detect the mode with one probe prompt."""
        from .tokens import needs_sequences

        if needs_sequences(scale):
            raise CollectionError(
                f"model {spec.name!r}: the scale {list(scale)} needs multi-token answers "
                "(one value's text is a prefix of another's); servers give next-token "
                "log-probabilities only: use the transformers backend"
            )
        self = cls(spec, scale, top_k)
        self._check_models()
        self._load_tokenizer()
        self._detect(*probe)
        self.provenance = self._provenance()
        return self

    def _fail(self, what: str, exc: Exception) -> CollectionError:
        if isinstance(exc, _HTTPError) and exc.status in (401, 403):
            have = "is set" if os.environ.get(self.spec.api_key_env) else "is NOT set"
            return CollectionError(
                f"model {self.spec.name!r}: server {self.spec.public_url} refused {what} "
                f"({exc}); the API key is read from ${self.spec.api_key_env}, which {have}"
            )
        if isinstance(exc, _HTTPError):
            return CollectionError(
                f"model {self.spec.name!r}: server {self.spec.public_url} answered {what} "
                f"with {exc}"
            )
        return CollectionError(
            f"model {self.spec.name!r}: cannot reach server {self.spec.public_url} ({what}): "
            f"{type(exc).__name__}: {exc}"
        )

    def _check_models(self) -> None:
        try:
            obj = self.client.request("GET", "/models", retries=min(2, self.spec.max_retries))
        except _HTTPError as exc:
            if exc.status in (404, 405):
                self.provenance["models_endpoint"] = "absent"
                return
            raise self._fail("GET /models", exc) from exc
        except (OSError, http.client.HTTPException) as exc:
            raise self._fail("GET /models", exc) from exc
        served = [str(m.get("id")) for m in (obj.get("data") or []) if isinstance(m, dict)]
        if served and self.spec.model not in served:
            raise CollectionError(
                f"model {self.spec.name!r}: server {self.spec.public_url} does not serve model "
                f"{self.spec.model!r}; it serves {served}"
            )
        info = next((m for m in obj.get("data") or [] if m.get("id") == self.spec.model), {})
        for k in ("root", "owned_by", "max_model_len"):
            if info.get(k) is not None:
                self.provenance[f"served_{k}"] = info[k]

    def _load_tokenizer(self) -> None:
        from .tokens import find_valid_tokens

        name = self.spec.tokenizer
        auto = name is None
        if auto:
            m = self.spec.model
            looks = os.path.isdir(os.path.expanduser(m)) or (m.count("/") == 1 and " " not in m)
            if not looks:
                return
            name = m
        try:
            from transformers import AutoTokenizer

            tok = AutoTokenizer.from_pretrained(
                os.path.expanduser(name), trust_remote_code=self.spec.trust_remote_code
            )
        except Exception as exc:
            if auto:  # the served name need not be a loadable tokenizer: top-k by text
                self.provenance["tokenizer_note"] = (
                    f"no tokenizer loaded for {name!r} ({type(exc).__name__}); valid tokens "
                    "recognised by their text"
                )
                return
            raise CollectionError(
                f"model {self.spec.name!r}: cannot load tokenizer {name!r}: {exc}"
            ) from exc
        self.tokenizer = tok
        self.valid = find_valid_tokens(tok, self.scale)
        self.provenance["tokenizer"] = f"{type(tok).__name__}:{name}"

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
            "top_logprobs": self.top_k,
            "n": 1,
            "stream": False,
        }
        if self.spec.seed is not None:
            body["seed"] = self.spec.seed
        if ids is not None:
            body["logprob_token_ids"] = ids
        if as_ids:
            body["return_tokens_as_token_ids"] = True
        body.update(self.spec.extra_body)
        return body

    def _entries(self, obj: dict) -> list[tuple[str, float]]:
        try:
            content = obj["choices"][0]["logprobs"]["content"]
            first = content[0]
        except (KeyError, IndexError, TypeError):
            raise CollectionError(
                f"model {self.spec.name!r}: server {self.spec.public_url} returns no logprobs "
                "for chat completions (it ignored logprobs=true/top_logprobs); xlikert needs "
                "next-token log-probabilities: use a server that returns them (vLLM, "
                "llama.cpp server, OpenAI) or the transformers backend"
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

    def _detect(self, system: str, user: str) -> None:
        msgs = self._messages(system, user)
        want = self.spec.mode
        why = ""
        if self.valid is not None and want in ("auto", "exact"):
            ids = list(self.valid.ids)
            try:
                obj = self.client.request(
                    "POST", "/chat/completions", self._body(msgs, ids=ids, as_ids=True)
                )
                got = {self._to_id(t) for t, _ in self._entries(obj)}
                if set(ids) <= got:
                    self.mode, self.ids_ok = "exact", True
                    return
                why = "the server ignored logprob_token_ids (its reply lacks some valid ids)"
            except _HTTPError as exc:
                if exc.status in (401, 403, 404):
                    raise self._fail("the probe request", exc) from exc
                if exc.status != 400 and exc.status != 422:
                    raise self._fail("the probe request", exc) from exc
                why = f"the server rejected logprob_token_ids ({exc})"
            except (OSError, http.client.HTTPException) as exc:
                raise self._fail("the probe request", exc) from exc
        elif want == "exact":
            why = "no tokenizer: give `tokenizer` so the valid token ids are known"
        if want == "exact":
            raise CollectionError(
                f"model {self.spec.name!r}: mode='exact' but {why}; exact mode needs a vLLM "
                "server with the logprob_token_ids extension (or use mode='topk')"
            )
        self.provenance["exact_unavailable"] = why or "mode='topk' requested"
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

    def _provenance(self) -> dict[str, Any]:
        prov = dict(self.provenance)
        prov.update(
            backend="openai-compatible chat completions",
            source=f"openai:{self.spec.model}",
            server=self.spec.public_url,
            served_model=self.spec.model,
            mode=self.mode,
            api_key_env=self.spec.api_key_env,
            request=json.dumps(
                {
                    k: v
                    for k, v in self._body([]).items()
                    if k not in ("messages", "model", "stream", "n")
                },
                sort_keys=True,
            )
            + (" + logprob_token_ids=<valid ids>" if self.mode == "exact" else ""),
            prompt_format="chat messages (JSON), templated by the server",
            concurrency=self.spec.concurrency,
            answers="one token: the next token is a valid token (a server cannot condition on "
            "an appended space token, so an answer whose leading space is a token of its own "
            "counts as a failure)",
        )
        if self.mode == "topk":
            prov["bounds"] = BOUNDS_RULE
        prov.setdefault("tokenizer", "none (valid tokens recognised by their text)")
        return prov

    # -------------------------------------------------------------- scoring
    def _score_one(self, system: str, user: str, options) -> dict[str, Any]:
        msgs = self._messages(system, user)
        K = self.top_k
        S = len(self.scale)
        sidx = {y: i for i, y in enumerate(self.scale)}
        natural = self._entries(
            self.client.request("POST", "/chat/completions", self._body(msgs, as_ids=self.ids_ok))
        )
        keyed: list[tuple[Any, str, float]] = []  # (id or text, stored token, logprob)
        for t, lp in natural:
            i = self._to_id(t) if self.ids_ok else None
            if self.ids_ok and i is None:
                raise CollectionError(f"model {self.spec.name!r}: unexpected token {t!r}")
            shown = self.tokenizer.convert_ids_to_tokens(i) if i is not None else t
            keyed.append((i if i is not None else t, shown, lp))
        keyed.sort(key=lambda e: -e[2])
        keyed = keyed[:K]
        probs = np.exp(np.array([e[2] for e in keyed], dtype=np.float64))

        by_text = {str(y): i for i, y in enumerate(self.scale)}

        def score_of(key) -> int | None:
            if self.ids_ok:
                return self._id_score.get(key)
            return by_text.get(_strip_marker(str(key)))

        scores = [score_of(e[0]) for e in keyed]
        res: dict[str, Any] = {
            "topk_token": [e[1] for e in keyed] + [""] * (K - len(keyed)),
            "topk_logprob": [e[2] for e in keyed] + [math.nan] * (K - len(keyed)),
        }
        if self.mode == "exact":
            ids = list(self.valid.ids)
            obj = self.client.request(
                "POST", "/chat/completions", self._body(msgs, ids=ids, as_ids=True)
            )
            lp = {self._to_id(t): v for t, v in self._entries(obj)}
            missing = [i for i in ids if i not in lp]
            if missing:
                raise CollectionError(
                    f"model {self.spec.name!r}: the server stopped returning valid ids "
                    f"{missing[:5]} (logprob_token_ids)"
                )
            mass = np.zeros(S)
            for i, y in zip(self.valid.ids, self.valid.scores, strict=True):
                mass[sidx[y]] += math.exp(lp[i])
            vm = mass.sum()
            res.update(pmf=mass / vm, valid_mass=vm)
        else:
            a = np.zeros(S)
            for p, j in zip(probs, scores, strict=True):
                if j is not None:
                    a[j] += p
            counts = None
            if self.valid is not None:
                n = np.zeros(S)
                for y in self.valid.scores:
                    n[sidx[y]] += 1
                seen = np.zeros(S)
                for j in scores:
                    if j is not None:
                        seen[j] += 1
                counts = np.maximum(n - seen, 0)
            # the list holds the most probable tokens, so none outside it is above its minimum
            b = topk_bounds(a, counts, probs.sum(), probs.min())
            A = a.sum()
            res.update(pmf=a / A if A > 0 else np.full(S, np.nan), valid_mass=A, **b)
        res.update(self._grid(probs, scores, res, options))
        res["prompt"] = json.dumps(msgs, ensure_ascii=False)
        return res

    @property
    def _id_score(self) -> dict[int, int]:
        if not hasattr(self, "_id_score_cache"):
            sidx = {y: i for i, y in enumerate(self.scale)}
            self._id_score_cache = {
                i: sidx[y] for i, y in zip(self.valid.ids, self.valid.scores, strict=True)
            }
        return self._id_score_cache

    def _grid(self, probs, scores, res, options) -> dict[str, np.ndarray]:
        """Temperature-1 column of the decoding grid where the nucleus is inside the top-k."""
        temps, tops = options["temperatures"], options["top_ps"]
        S = len(self.scale)
        dpmf = np.full((len(temps), len(tops), S), np.nan)
        dvm = np.full((len(temps), len(tops)), np.nan)
        csum = np.cumsum(probs)
        for ti, temp in enumerate(temps):
            if temp != 1.0:
                continue
            for pi, top_p in enumerate(tops):
                if top_p >= 1:
                    dpmf[ti, pi], dvm[ti, pi] = res["pmf"], res["valid_mass"]
                    continue
                j = int(np.searchsorted(csum, top_p))
                if j >= len(probs) or not probs[j] > probs[-1]:
                    continue  # the nucleus may reach unobserved tokens
                keep = probs >= probs[j]
                z = probs[keep].sum()
                m = np.zeros(S)
                for p, s, k in zip(probs, scores, keep, strict=True):
                    if k and s is not None:
                        m[s] += p
                dvm[ti, pi] = m.sum() / z
                if m.sum() > 0:
                    dpmf[ti, pi] = m / m.sum()
        return {"decoding_pmf": dpmf, "decoding_valid_mass": dvm}

    def compute_unit(self, cells, plan, options) -> dict[str, np.ndarray]:
        """Score the prompts of one unit concurrently; arrays as the local backend's."""

        def one(j):
            try:
                return self._score_one(plan.sys_flat[j], plan.user_flat[j], options)
            except CollectionError:
                raise
            except _HTTPError as exc:
                raise self._fail(f"the request for cell {j}", exc) from exc
            except (OSError, http.client.HTTPException) as exc:
                raise self._fail(f"the request for cell {j} after retries", exc) from exc

        with ThreadPoolExecutor(max_workers=self.spec.concurrency) as pool:
            rows = list(pool.map(one, cells))
        res: dict[str, np.ndarray] = {}
        for key in rows[0]:
            res[key] = np.array([r[key] for r in rows])
        res["topk_token"] = res["topk_token"].astype(str)
        res["prompt"] = res["prompt"].astype(str)
        res["cells"] = np.array(cells, dtype=np.int64)
        res["mode"] = np.array(self.mode)
        return res
