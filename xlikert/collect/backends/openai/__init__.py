"""The openai backend: a model behind an OpenAI-compatible server (vLLM, llama.cpp, hosted APIs).

Selected by ``source = "openai:MODEL"`` or ``backend = "openai"``; ``server`` in the
entry names the program behind the endpoint (``SERVER_KINDS``), not the backend.

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
    (:func:`xlikert.kernels.readout.topk_intervals`). Servers may list the sampled
    token first whatever its rank (vLLM does), so xlikert asks for ``k + 1``
    entries and certifies with the rule that allows one entry out of rank order.
    Nothing unobserved is imputed.

Answers of several tokens (a number the tokenizer spells in more than one token: 0-10,
a full-width digit in byte tokens) are read in exact mode by the multi-token rule teacher
forced on a vLLM server (:mod:`.contexts`). Word labels of several tokens, and such numbers
in top-k mode, are read by the certified walk over the labels' trie from top-k listings, one
teacher-forced ``/completions`` request per node, on vLLM and llama-cpp-python servers
(:mod:`.walk`; the unlisted mass widens the stored bounds), and refused by name on other
servers.

The decoding grid needs the full vocabulary; from a server only temperature 1 is
known, for the top-p values whose nucleus provably lies inside the listed tokens
(:func:`xlikert.kernels.readout.nucleus_logprobs` with ``unlisted_max``); every other
grid point is NaN (``decoding_valid_mass`` NaN too: not measured).

The API key is read from an environment variable (``api_key_env``, default
``OPENAI_API_KEY``) for each request; it is never stored, logged or put in the
fingerprint. HTTP goes through ``httpx`` (a pool of keep-alive connections; proxy
and TLS settings from the environment).

The backend's three functions (:class:`~xlikert.collect.protocol.Backend`: :func:`check`,
:func:`inputs`, :func:`open`) are here; the backend in seven parts:

================  =====================================================================
:mod:`.spec`      the model entry: :class:`OpenAISpec`, :func:`parse_openai_spec`
:mod:`.transport` how requests travel: HTTP client, retries, ``Retry-After``, errors
:mod:`.plan`      what is sent: request bodies, the mode probe, the waves of requests
:mod:`.readout`   what comes back: log-probabilities to PMFs and certified intervals
:mod:`.contexts`  answers of several tokens: one request per answer context (vLLM)
:mod:`.walk`      word labels of several tokens: the labels' walk from top-k listings
:mod:`.model`     :class:`OpenAIModel`, which joins them
================  =====================================================================
"""

from __future__ import annotations

from typing import Any

from ....core.errors import ElicitationLevelError
from ...options import CollectOptions
from ...protocol import CellInputs
from .model import OpenAIModel
from .plan import CACHE_RESET, RequestPlan, messages
from .readout import DECODING_RULE, OUT_OF_ORDER, PADDED_LOGPROB, PROTOCOL
from .spec import SERVER_KINDS, TRANSPORT_KEYS, OpenAISpec, parse_openai_spec

__all__ = [
    "CACHE_RESET",
    "DECODING_RULE",
    "OUT_OF_ORDER",
    "PADDED_LOGPROB",
    "PROTOCOL",
    "SERVER_KINDS",
    "TRANSPORT_KEYS",
    "OpenAIModel",
    "OpenAISpec",
    "check",
    "check_elicitation",
    "inputs",
    "open",
    "parse_openai_spec",
]


#: Request fields that keep a server's prompt cache out of the numbers (a fresh salt per
#: request): not part of what a cell is measured with.
_CACHE_FIELDS = ("cache_salt", "cache_prompt")


def check(spec: dict[str, Any], options: CollectOptions) -> dict[str, Any]:
    """Validate an openai model entry (no network); the fields that identify the results.

    The transport settings (:data:`TRANSPORT_KEYS`) are left out, so changing them
    resumes a run; ``base_url`` is recorded without credentials or query.
    """
    sspec = parse_openai_spec(spec)
    kept = {k: v for k, v in spec.items() if k not in TRANSPORT_KEYS}
    return {**kept, "base_url": sspec.public_url}


#: The elicitation levels a server reads (:mod:`xlikert.collect.elicitation`).
ELICITATION_LEVELS = ("first_token", "prefix", "greedy", "stated")


def check_elicitation(spec: dict[str, Any], levels: tuple[str, ...]) -> None:
    """A server reads ``prefix``, ``greedy`` and ``stated`` (:mod:`.elicit`); ``own_words`` is
    refused by name before anything runs.

    Raises
    ------
    ElicitationLevelError
        ``own_words`` (or an unknown level), naming the model and why.
    """
    name = spec.get("name")
    if "own_words" in levels:
        raise ElicitationLevelError(
            f"model {name!r}: the elicitation level 'own_words' reads the exact next-token "
            "distribution over the full vocabulary after every reply prefix; an "
            "OpenAI-compatible server lists top-k log-probabilities of the tokens it writes "
            "only, so it cannot. Use the transformers or vllm backend, or drop 'own_words' "
            "from the factor"
        )
    if "prefix" in levels:
        from .model import tokenizer_name

        name_, why = tokenizer_name(parse_openai_spec(spec))
        if name_ is None:
            raise ElicitationLevelError(
                f"model {name!r}: the elicitation level 'prefix' renders the prompt with the "
                f"model's chat template and continues it (a chat endpoint cannot be asked to "
                f"on every server), so it needs the tokenizer: {why}; give `tokenizer`"
            )
    other = [lv for lv in levels if lv not in ELICITATION_LEVELS]
    if other:
        raise ElicitationLevelError(
            f"model {name!r}: an OpenAI-compatible server reads the elicitation levels "
            f"{list(ELICITATION_LEVELS)}, not {other}"
        )


def inputs(spec: dict[str, Any], options: CollectOptions) -> CellInputs:
    """What determines the entry's numbers, without reaching the server: its identity (the
    checked entry: served model, base URL, revision, request settings) and each prompt's
    exact chat-completions request (its cache fields left out)."""
    sspec = parse_openai_spec(spec)
    identity = {k: v for k, v in check(spec, options).items() if k != "name"}
    identity["backend"] = "openai"
    plan = RequestPlan(sspec, None, int(options.top_k), sspec.server)

    def sent(prompts):
        bodies = (plan.body(messages(s, u)) for s, u in prompts)
        return [{k: v for k, v in b.items() if k not in _CACHE_FIELDS} for b in bodies]

    return CellInputs(identity, sent)


def open(
    spec: dict[str, Any],
    options: CollectOptions,
    probe: tuple[str, str],
    *,
    prepared: object = None,
) -> OpenAIModel:
    """Connect to the server of a model entry and detect its mode with ``probe``
    (``prepared``: unused, the server loads its model itself)."""
    return OpenAIModel.open(parse_openai_spec(spec), options, probe)
