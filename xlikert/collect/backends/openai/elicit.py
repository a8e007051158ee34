"""The elicitation levels ``prefix``, ``greedy`` and ``stated`` on an OpenAI-compatible server.

A server lists the top-k log-probabilities of the tokens it writes, so ``prefix`` and
``greedy`` are read from top-k listings, with the certified intervals of top-k mode
(:func:`~xlikert.kernels.readout.topk_intervals`; ``pmf_lower``/``pmf_upper`` and
``valid_mass_lower``/``valid_mass_upper`` stored) whatever the model's mode:

``prefix`` (:data:`PREFIX_PROTOCOL`)
    A chat endpoint cannot be asked to continue the model's turn on every server
    (llama-cpp-python closes a final assistant message and opens a new turn), so the
    prompt is rendered with the entry's tokenizer's chat template
    (:class:`~xlikert.collect.templates.PromptTemplate`, as the in-process backends
    render it), the run's ``answer_prefix`` appended, and sent as text to
    ``/completions`` with ``max_tokens=1`` and ``logprobs=top_k+1``. It needs the
    tokenizer (the entry's ``tokenizer``, or a served name that is a Hugging Face id or
    a folder), checked before anything runs.
``greedy`` (:data:`GREEDY_PROTOCOL`)
    One chat-completions request, templated by the server like every request of the
    backend, with ``temperature=0``, ``max_tokens=reply_tokens`` and
    ``top_logprobs=top_k+1``: the reply, and the listing at each of its positions. The
    answer is parsed by the run's rule
    (:func:`~xlikert.collect.elicitation.parse_answer`), on token ids where the server
    returns them, else on the listed texts; the in-text PMF is the listing at the
    answer's position, bounded.

``stated`` (:data:`STATED_PROTOCOL`)
    The greedy reply of ``greedy``, asked of the user's text with the run's
    ``stated_instruction`` after a blank line (:func:`~xlikert.collect.stated.stated_user`,
    the cell's answer labels for ``{options}``), ``max_tokens=stated_tokens``: the reply
    is stored as ``greedy`` stores it and parsed by
    :func:`~xlikert.collect.stated.parse_stated`. The stated PMF is read exactly (no
    token mass), so its certified bounds equal it.

``own_words`` reads the full next-token distribution after every reply prefix, which a
server does not give; it is refused by name before anything runs
(:func:`~xlikert.collect.backends.openai.check_elicitation`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from ....core.codecs import encode_token_ids
from ....core.errors import CollectionError, ElicitationLevelError
from ....core.schema import ELICITATION_VARIABLES
from ...foreign import Tokenizer
from ...options import CollectOptions
from ...record import UnitResult
from .plan import RequestPlan, messages
from .readout import OUT_OF_ORDER, Readout, token_id
from .spec import OpenAISpec


class ServerModel(Protocol):
    """What the levels read of an open server model (:class:`~.model.OpenAIModel`, which
    imports this module): its name, options, tokenizer, request plan, readout and threads."""

    name: str
    options: CollectOptions
    spec: OpenAISpec
    tokenizer: Tokenizer
    plan: RequestPlan
    readout: Readout

    @property
    def pool(self) -> ThreadPoolExecutor:
        """The worker threads that send the requests."""
        ...


__all__ = [
    "GREEDY_PROTOCOL",
    "PREFIX_PROTOCOL",
    "STATED_PROTOCOL",
    "ServerModel",
    "score_elicited_on_server",
]

#: How ``prefix`` is read from a server; stored in the model's provenance.
PREFIX_PROTOCOL = (
    "the prompt rendered by the entry's tokenizer's chat template (as the in-process "
    "backends render it), answer_prefix appended, sent as text to /completions (max_tokens=1, "
    "logprobs=top_k+1; vLLM: add_special_tokens=false); pmf from the top-k listing with "
    "certified intervals (top-k mode's rule)"
)

#: How ``greedy`` is read from a server; stored in the model's provenance.
GREEDY_PROTOCOL = (
    "one chat completion templated by the server (temperature=0, max_tokens=reply_tokens, "
    "top_logprobs=top_k+1): the reply and the listing at each position; the answer parsed by "
    "answer_parse on token ids where the server returns them, else on the listed texts; the "
    "in-text pmf is the listing at the answer's position, with certified intervals (top-k "
    "mode's rule)"
)


#: How ``stated`` is read from a server; stored in the model's provenance.
STATED_PROTOCOL = (
    "one chat completion templated by the server (temperature=0, max_tokens=stated_tokens, "
    "top_logprobs=top_k+1) of the user's text with stated_instruction after a blank line "
    "({options}: the cell's answer labels); the reply stored as greedy stores it and parsed "
    "by stated_parse_rule; the stated pmf is exact, its certified bounds equal to it"
)


def score_elicited_on_server(
    model: ServerModel, prompts: Sequence[tuple[str, str]], level: str, options: CollectOptions,
    labels: Sequence[str] | None = None,
) -> UnitResult:  # fmt: skip
    """Read one unit of prompts under ``prefix``, ``greedy`` or ``stated`` on the model's
    server.

    Parameters
    ----------
    model : ServerModel
        The open server model.
    prompts : sequence of (str, str)
        The unit's ``(system, user)`` prompts.
    level : str
        ``prefix``, ``greedy`` or ``stated``.
    options : CollectOptions
        The run's options (``answer_prefix``, ``reply_tokens``, ``answer_parse``,
        ``stated_instruction``, ``stated_tokens``).
    labels : sequence of str, optional
        ``stated``: the answer label of each point of ``options.scale`` (``""`` off the
        item's support; default the scores' digits).

    Returns
    -------
    UnitResult
        A bounded unit (top-k intervals), with
        :data:`~xlikert.core.schema.ELICITATION_VARIABLES`.

    Raises
    ------
    ElicitationLevelError
        ``own_words``, or ``prefix`` without a tokenizer to render the prompt.
    """
    res = UnitResult.empty(len(prompts), model.options.sizes, bounded=True)
    for name, var in ELICITATION_VARIABLES.items():
        res.data[name] = var.full((len(prompts),))
    if level == "prefix":
        _prefix(model, prompts, options, res)
    elif level == "greedy":
        _greedy(model, prompts, options, res)
    elif level == "stated":
        _stated(model, prompts, options, labels, res)
    else:
        raise ElicitationLevelError(
            f"model {model.name!r}: an OpenAI-compatible server reads the elicitation levels "
            f"prefix, greedy and stated, not {level!r}"
        )
    return res


def _listing_obj(entry: dict) -> dict:
    """A chat-completions answer holding one position's listing (what the readout reads)."""
    return {"choices": [{"logprobs": {"content": [entry]}}]}


def _prefix(
    model: ServerModel, prompts: Sequence[tuple[str, str]], options: CollectOptions, res: UnitResult
) -> None:
    tok = model.tokenizer
    if tok is None:
        raise ElicitationLevelError(
            f"model {model.name!r}: the elicitation level 'prefix' renders the prompt with the "
            "model's chat template and continues it: give the entry's `tokenizer`"
        )
    from ...templates import PromptTemplate

    template = PromptTemplate(tok, model.name)
    texts = [template.render(s, u) + options.answer_prefix for s, u in prompts]
    rd, plan = model.readout, model.plan

    def one(text: str) -> dict:
        body: dict[str, Any] = {
            "model": model.spec.model, "prompt": text, "max_tokens": 1,
            "temperature": model.spec.temperature, "top_p": 1.0,
            "logprobs": plan.top_k + OUT_OF_ORDER, "n": 1, "stream": False,
        }  # fmt: skip
        if rd.ids_ok:
            body["return_tokens_as_token_ids"] = True
        if plan.kind == "vllm":
            body["add_special_tokens"] = False  # the template wrote them
        obj = plan.complete(body, "a prefix request")
        return _listing_obj(_legacy_entry(obj, model))

    for r, obj in enumerate(model.pool.map(one, texts)):
        rd.fill(res, r, [], rd.listing(obj), None)
        res.data["prompt_text"][r] = texts[r]  # the server tokenises it


def _legacy_entry(obj: dict, model: ServerModel) -> dict:
    """The first position of a ``/completions`` answer's ``logprobs`` (``tokens``,
    ``token_logprobs``, ``top_logprobs``: a dict per position) as a chat-completions entry."""
    try:
        lp = obj["choices"][0]["logprobs"]
        top = lp["top_logprobs"][0]
        entry = {"token": lp["tokens"][0], "logprob": lp["token_logprobs"][0]}
    except (KeyError, IndexError, TypeError):
        raise CollectionError(
            f"model {model.spec.name!r}: server {model.spec.public_url} returns no logprobs "
            "for /completions; the elicitation level 'prefix' reads them"
        ) from None
    entry["top_logprobs"] = [{"token": k, "logprob": v} for k, v in (top or {}).items()]
    return entry


def _reply_request(model: ServerModel, msgs: list, tokens: int, what: str) -> dict:
    """The server's greedy reply to ``msgs`` (temperature 0, up to ``tokens`` tokens), with
    the top-k listing at each of its positions."""
    body = model.plan.body(msgs, as_ids=model.readout.ids_ok)
    body.update(max_tokens=int(tokens), temperature=0.0, top_p=1.0)
    return model.plan.request(body, what)


def _reply(model: ServerModel, obj: dict, what: str) -> tuple[dict, list, list[Any], list[str]]:
    """A greedy reply's choice, its positions' listings, each token's key (its id where the
    server names tokens by id, else its text) and each token's text."""
    rd, tok = model.readout, model.tokenizer
    try:
        choice = obj["choices"][0]
        content = choice["logprobs"]["content"] or []
    except (KeyError, IndexError, TypeError):
        raise CollectionError(
            f"model {model.spec.name!r}: server {model.spec.public_url} returns no "
            f"logprobs for {what}'s tokens"
        ) from None
    keys: list[Any] = []
    for e in content:
        k = token_id(str(e["token"])) if rd.ids_ok else str(e["token"])
        keys.append(k if k is not None else str(e["token"]))
    if rd.ids_ok and tok is not None:
        texts = [tok.decode([int(i)]) for i in keys]
    else:
        texts = [str(e["token"]) for e in content]
    return choice, content, keys, texts


def _write_reply(
    model: ServerModel, res: UnitResult, r: int, choice: dict, keys: list[Any], texts: list[str]
) -> str:
    """Store row ``r``'s reply (``reply_text``, ``reply_token_ids``, ``reply_end``); its text
    with special tokens left out, where the server names tokens by id, else as stored."""
    ids = [int(k) for k in keys] if model.readout.ids_ok else None
    tok = model.tokenizer
    text = tok.decode(ids) if ids is not None and tok is not None else "".join(texts)
    d = res.data
    d["reply_text"][r] = text
    d["reply_token_ids"][r] = encode_token_ids(ids) if ids is not None else ""
    d["reply_end"][r] = "length" if choice.get("finish_reason") == "length" else "eos"
    if ids is not None and tok is not None:
        return str(tok.decode(ids, skip_special_tokens=True))
    return text


def _greedy(
    model: ServerModel, prompts: Sequence[tuple[str, str]], options: CollectOptions, res: UnitResult
) -> None:
    from ...elicitation import parse_answer

    rd = model.readout
    S = len(rd.scale)
    msgs = [messages(s, u) for s, u in prompts]

    def one(m: list) -> dict:
        return _reply_request(model, m, options.reply_tokens, "a greedy reply")

    for r, obj in enumerate(model.pool.map(one, msgs)):
        choice, content, keys, texts = _reply(model, obj, "the greedy reply")
        _write_reply(model, res, r, choice, keys, texts)
        d = res.data
        d["prompt_text"][r] = json.dumps(msgs[r], ensure_ascii=False)
        cols = [rd.score_of(k) for k in keys]
        score = {k: rd.scale[c] for k, c in zip(keys, cols, strict=True) if 0 <= c < S}
        found = parse_answer(keys, score, texts=texts, rule=options.answer_parse)
        if found is None:
            d["reply_answered"][r] = 0
            continue
        t, y = found
        d["reply_answered"][r] = 1
        d["reply_answer"][r] = y
        d["reply_answer_position"][r] = t
        rd.fill(res, r, msgs[r], rd.listing(_listing_obj(content[t])), None)
        d["prompt_text"][r] = json.dumps(msgs[r], ensure_ascii=False)


def _stated(
    model: ServerModel, prompts: Sequence[tuple[str, str]], options: CollectOptions,
    labels: Sequence[str] | None, res: UnitResult,
) -> None:  # fmt: skip
    from ...stated import stated_options, stated_user, write_stated

    shown, scores = stated_options(options, labels)
    msgs = [messages(s, stated_user(u, options.stated_instruction, shown)) for s, u in prompts]

    def one(m: list) -> dict:
        return _reply_request(model, m, options.stated_tokens, "a stated reply")

    for r, obj in enumerate(model.pool.map(one, msgs)):
        choice, _, keys, texts = _reply(model, obj, "the stated reply")
        text = _write_reply(model, res, r, choice, keys, texts)
        res.data["prompt_text"][r] = json.dumps(msgs[r], ensure_ascii=False)
        write_stated(res, r, text, shown, scores, options)
