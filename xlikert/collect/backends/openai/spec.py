"""A server model entry: its fields, their checks, and the part that identifies results."""

from __future__ import annotations

import os
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

from ....core.errors import CollectionError
from ...entries import check_entry_keys

__all__ = ["SERVER_KINDS", "TRANSPORT_KEYS", "OpenAISpec", "parse_openai_spec"]

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
    "walk_logprobs",
}

#: Server kinds with a known prompt cache (see :class:`~.plan.RequestPlan`), and how
#: ``GET /models`` names its owner on each.
SERVER_KINDS = {"vllm": "vllm", "llamacpp": "llama.cpp", "me": "llama-cpp-python"}

#: Server model fields that change how requests travel, not what comes back.
TRANSPORT_KEYS = ("concurrency", "timeout", "max_retries", "backoff")


@dataclass(frozen=True)
class OpenAISpec:
    """A model behind an OpenAI-compatible server (see :func:`parse_openai_spec`).

    ``base_url`` may hold a user and password; it is left out of the repr, which
    shows :attr:`public_url` instead.
    """

    name: str
    model: str
    base_url: str = field(repr=False)
    api_key_env: str = "OPENAI_API_KEY"
    mode: str = "auto"
    concurrency: int = 8
    timeout: float = 120.0
    max_retries: int = 6
    backoff: float = 0.5
    tokenizer: str | None = None
    revision: str | None = None
    temperature: float = 1.0
    seed: int | None = 0
    extra_body: dict[str, Any] = field(default_factory=dict)
    trust_remote_code: bool = False
    server: str = "auto"
    logprob_rtol: float = 2e-4
    walk_logprobs: int = 20

    @property
    def public_url(self) -> str:
        """``base_url`` without user, password, query or fragment (safe to record)."""
        u = urllib.parse.urlsplit(self.base_url)
        host = u.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        netloc = host + (f":{u.port}" if u.port else "")
        return urllib.parse.urlunsplit((u.scheme, netloc, u.path.rstrip("/"), "", ""))

    def __repr__(self) -> str:
        return f"OpenAISpec(name={self.name!r}, model={self.model!r}, url={self.public_url!r})"


def _secret_fields(obj: object, prefix: str = "") -> list[str]:
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


def _refuse(spec: dict[str, Any], where: str) -> None:
    """Refuse secrets in the file, reasoning mode and unknown fields."""
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


def _build(spec: dict[str, Any], name: str, model: str, base: str) -> OpenAISpec:
    seed = spec.get("seed", 0)
    revision = spec.get("revision")
    return OpenAISpec(
        name=name,
        model=str(model),
        base_url=str(base),
        api_key_env=str(spec.get("api_key_env", "OPENAI_API_KEY")),
        mode=spec.get("mode", "auto"),
        concurrency=int(spec.get("concurrency", 8)),
        timeout=float(spec.get("timeout", 120.0)),
        max_retries=int(spec.get("max_retries", 6)),
        backoff=float(spec.get("backoff", 0.5)),
        tokenizer=spec.get("tokenizer"),
        revision=None if revision in (None, "") else str(revision),
        temperature=float(spec.get("temperature", 1.0)),
        seed=None if seed is None else int(seed),
        extra_body=dict(spec.get("extra_body") or {}),
        trust_remote_code=bool(spec.get("trust_remote_code", False)),
        server=str(spec.get("server", "auto")),
        logprob_rtol=float(spec.get("logprob_rtol", 2e-4)),
        walk_logprobs=int(spec.get("walk_logprobs", 20)),
    )


def _check_values(out: OpenAISpec, where: str) -> None:
    if out.mode not in ("auto", "exact", "topk"):
        raise CollectionError(f"{where}: mode must be 'auto', 'exact' or 'topk', got {out.mode!r}")
    kinds = ("auto", *SERVER_KINDS.values(), "other")
    if out.server not in kinds:
        raise CollectionError(f"{where}: server must be one of {list(kinds)}, got {out.server!r}")
    if not 0 <= out.logprob_rtol < 0.1:
        raise CollectionError(f"{where}: logprob_rtol must be in [0, 0.1), got {out.logprob_rtol}")
    if out.walk_logprobs < 1:
        raise CollectionError(f"{where}: walk_logprobs must be >= 1, got {out.walk_logprobs}")
    if out.concurrency < 1 or out.timeout <= 0 or out.max_retries < 0 or out.backoff < 0:
        raise CollectionError(
            f"{where}: need concurrency >= 1, timeout > 0, max_retries >= 0, backoff >= 0"
        )


def parse_openai_spec(spec: dict[str, Any]) -> OpenAISpec:
    """Validate a server model entry.

    Keys: ``source = "openai:MODEL"`` (or ``backend = "openai"`` and ``model``),
    ``base_url`` (default ``$OPENAI_BASE_URL`` or ``https://api.openai.com/v1``),
    ``api_key_env``, ``mode`` (``auto``/``exact``/``topk``), ``concurrency``,
    ``timeout`` (s), ``max_retries``, ``backoff`` (s), ``tokenizer`` (Hugging Face
    id or local path: gives the valid token ids), ``revision`` (the Hugging Face
    revision of that tokenizer, or of the served model's id when it is loaded as the
    tokenizer; the server's own weights are whatever it serves), ``temperature``,
    ``seed``, ``extra_body`` (merged into every request, e.g.
    ``{"chat_template_kwargs": {"enable_thinking": false}}``), ``server``
    (``auto``/``vllm``/``llama.cpp``/``llama-cpp-python``/``other``: how the server's
    prompt cache is kept out of the numbers; ``auto`` reads ``GET /models``) and
    ``logprob_rtol`` (relative error of a reported probability, widening top-k
    intervals; default 2e-4 for float32 servers) and ``walk_logprobs`` (the tokens listed
    per node when word answers are read by the labels' walk, :mod:`.walk`; default 20, as
    many as the server allows: the more, the narrower the certified bounds).

    Raises
    ------
    CollectionError
        Unknown keys, a key given in the file instead of the environment, bad values.

    Examples
    --------
    >>> s = parse_openai_spec({"name": "L", "source": "openai:m", "base_url": "http://h:8000/v1"})
    >>> s.model, s.public_url, s.mode
    ('m', 'http://h:8000/v1', 'auto')
    """
    name = str(spec.get("name") or spec.get("source"))
    where = f"model {name!r}"
    _refuse(spec, where)
    source = str(spec.get("source") or "")
    model = spec.get("model") or (source[len("openai:") :] if source.startswith("openai:") else "")
    if not model:
        raise CollectionError(f"{where}: give source = 'openai:MODEL' or model = 'MODEL'")
    base = spec.get("base_url") or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
    u = urllib.parse.urlsplit(str(base))
    if u.scheme not in ("http", "https") or not u.hostname:
        raise CollectionError(f"{where}: base_url must be http(s)://host[:port]/path, got {base!r}")
    try:
        out = _build(spec, name, model, base)
    except (TypeError, ValueError) as exc:
        raise CollectionError(f"{where}: bad value: {exc}") from exc
    _check_values(out, where)
    return out
