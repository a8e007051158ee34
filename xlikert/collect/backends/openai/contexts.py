"""Multi-token answers on a vLLM server: exact, teacher forced, one request per answer context.

A scale whose answers need several tokens (``0..10``: "1" is a prefix of "10"; a label
the tokenizer spells in bytes, as SmolLM2 spells the full-width digit "１" in two byte
tokens) is read by the multi-token rule (:mod:`xlikert.collect.answers.spellings`): the
probability of each spelling is the product of its tokens' conditional probabilities,
each read after the prompt followed by the spelling's earlier tokens, times the
probability of stopping after it. A chat endpoint takes text, and the earlier tokens
of a spelling may be part of a character, so the contexts are sent as token ids:

1. the prompt's token ids as the server templates a chat request: vLLM's
   ``POST /tokenize`` with the messages (``add_generation_prompt``, the chat
   endpoint's default; the server's root, not ``/v1``), so the ids are those a chat
   completion runs;
2. per answer context (:attr:`~xlikert.collect.answers.sequences.AnswerSequences.contexts`)
   one ``/completions`` request with the prompt's ids followed by the context's,
   ``max_tokens=1`` and vLLM's ``logprob_token_ids`` with every token the rule reads
   there: the spellings' tokens and the tokens that would continue a number (summed
   here in float64, the rule's pooled column).

Every request carries a fresh ``cache_salt`` (as every request of the backend to a vLLM
server): no number depends on which requests came before. The rows are read by
:meth:`~xlikert.collect.answers.sequences.AnswerSequences.readout`, as the in-process backends read
theirs. The top-k listing after the prompt is the chat-completions listing of exact mode.
Exact mode only: a top-k listing after the prompt cannot bound the later tokens.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from ....core.errors import CollectionError
from ...answers.sequences import AnswerSequences
from .plan import RequestPlan
from .readout import PADDED_LOGPROB, token_id

__all__ = ["MULTI_TOKEN_PROTOCOL", "ContextReads", "read_ids"]

#: What the openai backend does for multi-token answers, recorded per model
#: (``collection_protocol``).
MULTI_TOKEN_PROTOCOL = (
    "multi-token answers on a vLLM server (exact, teacher forced): per (condition, item) one "
    "chat-completions request for the top-k listing, the prompt's token ids as the server "
    "templates the chat request (POST /tokenize with the messages, add_generation_prompt=true), "
    "then one /completions request per answer context (the prompt's ids and the context's; "
    "max_tokens=1, logprob_token_ids=the spellings' tokens and the number-continuing tokens, "
    "return_tokens_as_token_ids, a fresh cache_salt each); the answers read by "
    "xlikert.collect.answers.sequences.AnswerSequences.readout (the in-process backends' rule)"
)


def _server_root(public_url: str) -> str:
    """The server's root URL: ``base_url`` without its ``/v1`` (vLLM serves ``/tokenize``
    there).

    Examples
    --------
    >>> _server_root("http://127.0.0.1:8000/v1"), _server_root("http://h/api/v1/")
    ('http://127.0.0.1:8000', 'http://h/api')
    """
    url = public_url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


def read_ids(answers: AnswerSequences) -> list[int]:
    """The token ids each context's request asks for: the spellings' tokens
    (:attr:`~AnswerSequences.need`) and the continuation tokens (:attr:`~AnswerSequences.pooled`).

    Examples
    --------
    >>> ans = AnswerSequences(((5,), (9, 6)), (1, 2), (("1",), ("▁", "2")), (5, 7), (1, 2))
    >>> read_ids(ans)
    [5, 6, 7, 9]
    """
    return sorted({*answers.need, *(answers.pooled or ())})


class ContextReads:
    """One model's multi-token reads on a vLLM server (:mod:`this module <.contexts>`)."""

    def __init__(self, plan: RequestPlan, answers: AnswerSequences):
        self.plan, self.answers = plan, answers
        self.ids = read_ids(answers)
        self.root = _server_root(plan.spec.public_url)

    def prompt_ids(self, msgs: list) -> list[int]:
        """The prompt's token ids, templated by the server (``POST /tokenize``).

        Raises
        ------
        CollectionError
            The server has no ``/tokenize`` (not a vLLM server) or answers without ids.
        """
        body = {"model": self.plan.spec.model, "messages": msgs, "add_generation_prompt": True}
        what = "POST /tokenize (multi-token answers need the prompt's token ids; vLLM serves it)"
        # the server's root, not /v1
        obj = self.plan.told(what, self.plan.transport.request, "POST", f"{self.root}/tokenize",
                             body)  # fmt: skip
        tokens = obj.get("tokens") if isinstance(obj, dict) else None
        if not isinstance(tokens, list) or not tokens:
            raise CollectionError(
                f"model {self.plan.spec.name!r}: server {self.plan.spec.public_url} answered "
                f"/tokenize without token ids ({str(obj)[:200]})"
            )
        return [int(t) for t in tokens]

    def body(self, ids: list[int]) -> dict[str, Any]:
        """The ``/completions`` request that reads the tokens after ``ids`` (the salt and
        ``extra_body`` are added when it is sent, :meth:`RequestPlan.complete`)."""
        spec = self.plan.spec
        body: dict[str, Any] = {
            "model": spec.model, "prompt": ids, "max_tokens": 1,
            "temperature": spec.temperature, "top_p": 1.0, "logprobs": 1,
            "logprob_token_ids": self.ids, "return_tokens_as_token_ids": True,
            "add_special_tokens": False, "n": 1, "stream": False,
        }  # fmt: skip
        if spec.seed is not None:
            body["seed"] = spec.seed
        return body

    def row(self, obj: dict) -> np.ndarray:
        """One context's readout row: the log-probability of each token of
        :attr:`~AnswerSequences.need`, then (a stop check) of any continuation token."""
        name = self.plan.spec.name
        try:
            top = obj["choices"][0]["logprobs"]["top_logprobs"][0]
            got = {token_id(str(t)): float(lp) for t, lp in top.items()}
        except (KeyError, IndexError, TypeError, AttributeError):
            raise CollectionError(
                f"model {name!r}: server {self.plan.spec.public_url} returns no logprobs for "
                "/completions; multi-token answers read them (logprob_token_ids)"
            ) from None
        missing = [i for i in self.ids if i not in got]
        if missing:
            raise CollectionError(
                f"model {name!r}: the server did not return the log-probabilities of the "
                f"token ids {missing[:5]} (logprob_token_ids on /completions)"
            )
        with np.errstate(divide="ignore"):  # vLLM writes -inf as -9999
            lp = {i: (-np.inf if v <= PADDED_LOGPROB else v) for i, v in got.items()}
        cols = [lp[i] for i in self.answers.need]
        if self.answers.pooled is not None:
            cols.append(float(np.logaddexp.reduce([lp[i] for i in self.answers.pooled])))
        return np.array(cols, dtype=np.float64)

    def read(self, pool: ThreadPoolExecutor, prompts: list[list[int]]) -> np.ndarray:
        """``(prompts, contexts, width)``: the readout rows after each prompt's ids followed
        by each answer context, all requests in flight together (``concurrency``)."""
        contexts = self.answers.contexts
        jobs = [list(p) + [int(t) for t in c] for p in prompts for c in contexts]

        def one(ids: list[int]) -> np.ndarray:
            return self.row(self.plan.complete(self.body(ids), "a context request"))

        rows = list(pool.map(one, jobs))
        return np.array(rows, dtype=np.float64).reshape(len(prompts), len(contexts), -1)
