"""The server model: connects, picks the mode, and scores prompts in waves of requests."""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

import numpy as np

from ....core.errors import AnswerLabelError, CollectionError, ElicitationLevelError
from ....core.schema import (
    BOUND_VARIABLES,
    NONSUBSTANTIVE_BOUND_VARIABLES,
    SCRIPT_BOUND_VARIABLES,
    WALK_VARIABLES,
)
from ....kernels.readout import TOPK_BOUNDS_RULE
from ...answers.sequences import AnswerSequences
from ...answers.spellings import ONE_TOKEN_RULE, answer_rule
from ...answers.tokens import ValidTokens
from ...answers.vocabulary import token_text, vocabulary
from ...foreign import Tokenizer
from ...options import CollectOptions, labels_key
from ...record import UnitResult
from ...templates import PromptTemplate
from ..inprocess import walk_prompts
from .contexts import MULTI_TOKEN_PROTOCOL, ContextReads, read_ids
from .plan import PROMPT_CACHE, RequestPlan, messages
from .readout import DECODING_RULE, OUT_OF_ORDER, PROTOCOL, Readout
from .spec import SERVER_KINDS, OpenAISpec
from .transport import Transport
from .walk import SERVER_WALK_PROTOCOL, WALK_SERVERS, ServerWalk, WalkSetup

__all__ = ["OpenAIModel", "tokenizer_name"]


def tokenizer_name(spec: OpenAISpec) -> tuple[str | None, str]:
    """The tokenizer to load (None: none can be) and, when None, why."""
    if spec.tokenizer is not None:
        return spec.tokenizer, ""
    m = spec.model
    if os.path.isdir(os.path.expanduser(m)) or (m.count("/") == 1 and " " not in m):
        return m, ""
    return None, f"the served name {m!r} is not a tokenizer id or folder"


def _load_tokenizer(spec: OpenAISpec) -> tuple[Any, str]:
    """The tokenizer of a server model entry and what to record about it.

    ``tokenizer``, else the served model's name when it looks like a Hugging Face id
    or a folder; ``revision`` picks the Hugging Face revision. Without ``tokenizer``
    and ``revision``, a served name that cannot be loaded gives no tokenizer (None):
    valid tokens are then recognised by their text.

    Raises
    ------
    CollectionError
        A given ``tokenizer`` (or one pinned by ``revision``) that cannot be loaded;
        ``revision`` with a local folder, which has no revisions.
    """
    name, why = tokenizer_name(spec)
    required = spec.tokenizer is not None or spec.revision is not None
    where = f"model {spec.name!r}"
    if name is None:
        if spec.revision is not None:
            raise CollectionError(
                f"{where}: revision {spec.revision!r} given, but {why}: name the tokenizer's "
                "Hugging Face id with `tokenizer`"
            )
        return None, f"no tokenizer: {why}; valid tokens recognised by their text"
    path = os.path.expanduser(name)
    if spec.revision is not None and os.path.isdir(path):
        raise CollectionError(
            f"{where}: revision {spec.revision!r} given, but the tokenizer {name!r} is a local "
            "folder, which has no revisions: drop `revision` or name a Hugging Face id"
        )
    try:
        tok = _pretrained(path, spec.revision, spec.trust_remote_code, _folder_stamp(path))
    except Exception as exc:
        if not required:  # the served name need not be a loadable tokenizer: top-k by text
            return None, (
                f"no tokenizer loaded for {name!r} ({type(exc).__name__}); valid tokens "
                "recognised by their text"
            )
        raise CollectionError(f"{where}: cannot load tokenizer {name!r}: {exc}") from exc
    return tok, f"{type(tok).__name__}:{name}" + (f"@{spec.revision}" if spec.revision else "")


def _folder_stamp(path: str) -> tuple[tuple[str, int, int], ...] | None:
    """A local folder's files as (name, mtime, size): a tokenizer changed on disk is
    loaded again; None for a Hugging Face id."""
    if not os.path.isdir(path):
        return None
    return tuple(
        sorted(
            (e.name, e.stat().st_mtime_ns, e.stat().st_size)
            for e in os.scandir(path)
            if e.is_file()
        )
    )


@functools.lru_cache(maxsize=4)
def _pretrained(path: str, revision: str | None, trust_remote_code: bool, stamp: object) -> Any:
    """``AutoTokenizer.from_pretrained``, once per process for the same tokenizer: a
    session's runs against one server share it, and with it the vocabulary's valid sets
    (:func:`xlikert.collect.answers.vocabulary.vocabulary` is cached per tokenizer object)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(
        path, revision=revision, trust_remote_code=trust_remote_code
    )


class OpenAIModel:
    """A model behind an OpenAI-compatible server, ready to score prompts.

    Built by :meth:`open`, which checks the server, the model name and the
    logprob support before any work is done. Three parts do the work: the
    :class:`~.transport.Transport` (HTTP, retries), the
    :class:`~.plan.RequestPlan` (which requests, in which waves) and the
    :class:`~.readout.Readout` (log-probabilities to PMFs and intervals).
    """

    def __init__(self, spec: OpenAISpec, options: CollectOptions):
        self.spec = spec
        self.name = spec.name
        self.options = options
        self.transport = Transport(spec)
        self.plan = RequestPlan(spec, self.transport, int(options.top_k), spec.server)
        self.tokenizer: Tokenizer = None
        self.valid: ValidTokens | None = None
        #: The answer spellings when some answer needs several tokens (else None: the
        #: one-token rule, :attr:`valid`), read by :class:`~.contexts.ContextReads`.
        self.answers: AnswerSequences | None = None
        #: Each label set read (with a tokenizer) -> its answer rule (:meth:`_answer_rule`):
        #: worked out once, and named in the provenance.
        self._rules: dict[
            tuple[str, ...] | None, tuple[ValidTokens, AnswerSequences | None, str]
        ] = {}
        #: Numbers of several digits read by the labels' walk: top-k mode on a
        #: :data:`~.walk.WALK_SERVERS` server (known once the mode is detected).
        self._walk_numbers = False
        self.mode = "topk"
        self.readout = Readout(spec, options, "topk", False)
        self._prov: dict[str, Any] = {}
        self._pool: ThreadPoolExecutor | None = None

    def __repr__(self) -> str:
        return (
            f"<OpenAIModel {self.spec.name!r} model={self.spec.model!r} "
            f"url={self.spec.public_url} mode={self.mode}>"
        )

    @property
    def pool(self) -> ThreadPoolExecutor:
        """The worker threads that send the requests (``concurrency`` of them), started on
        first use and stopped by :meth:`close`."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self.spec.concurrency)
        return self._pool

    @property
    def kind(self) -> str:
        """The server kind (``vllm``, ``llama.cpp``, ``llama-cpp-python``, ``other``)."""
        return self.plan.kind

    @classmethod
    def open(cls, spec: OpenAISpec, options: CollectOptions, probe: tuple[str, str]) -> OpenAIModel:
        """Connect, check the model and detect the mode with one probe prompt.

        Answers that need several tokens are read exactly on a vLLM server in exact mode
        (:mod:`.contexts`); in top-k mode on a :data:`~.walk.WALK_SERVERS` server by the
        labels' walk (:mod:`.walk`, certified bounds); elsewhere they are refused, naming why.
        """
        if spec.mode == "topk" and spec.server not in (*WALK_SERVERS, "auto"):
            _check_one_token(options, spec.name)  # refused before the server is reached
        self = cls(spec, options)
        try:
            self._check_models()
            if spec.mode == "topk" and self.kind not in WALK_SERVERS:
                _check_one_token(options, spec.name)  # refused before any prompt is sent
            self._load_tokenizer()
            if self.tokenizer is None:
                _check_one_token(options, spec.name)
            mode, ids_ok, why = self._detect(probe)
        except BaseException:
            self.close()
            raise
        if why:
            self._prov["exact_unavailable"] = why
        self.mode = mode
        # numbers of several digits read next (relabel) go by the walk too
        self._walk_numbers = mode == "topk" and self.kind in WALK_SERVERS
        self.readout = Readout(spec, options, mode, ids_ok, self.valid, self.tokenizer)
        return self

    def _detect(self, probe: tuple[str, str]) -> tuple[str, bool, str]:
        """The mode (:meth:`~.plan.RequestPlan.detect`) with the probe prompt; answers read by
        the labels' walk are top-k listings per node, checked on the probe instead
        (:meth:`_probe_walk`)."""
        if self._walking:
            self._probe_walk(probe)
            return "topk", self.kind == "vllm", "word answers read by the labels' walk"
        asked: Sequence[int] | None = None
        if self.answers is not None:
            asked = read_ids(self.answers)
        elif self.valid is not None:
            asked = self.valid.ids
        mode, ids_ok, why = self.plan.detect(messages(*probe), asked, self.tokenizer is not None)
        if self.answers is not None:
            if mode != "exact" and self.kind in WALK_SERVERS:
                return self._walk_numbers_instead(probe, why)
            self._check_multi_token(mode, why)
            ContextReads(self.plan, self.answers).prompt_ids(messages(*probe))
        return mode, ids_ok, why

    def _walk_numbers_instead(self, probe: tuple[str, str], why: str) -> tuple[str, bool, str]:
        """Numbers of several digits in top-k mode on a :data:`~.walk.WALK_SERVERS` server:
        the answers built again with the labels' trie (:meth:`_answer_rule`), read by the
        labels' walk, and the probe checked as for word labels (:meth:`_probe_walk`)."""
        self._walk_numbers = True
        labels = self.options.answer_labels
        self._rules[labels] = self._answer_rule(self.options)
        self.valid, self.answers, _ = self._rules[labels]
        if self.answers is not None:
            self._prov["answer_spellings"] = self.answers.as_records(self.tokenizer)
        if self._walking:
            self._probe_walk(probe)
        return "topk", self.kind == "vllm", f"{why}; numbers of several digits read by the walk"

    @property
    def _walking(self) -> bool:
        """Whether the answers are read by the labels' walk (:mod:`.walk`)."""
        return self.answers is not None and self.answers.trie is not None

    def _check_walk_server(self, options: CollectOptions) -> None:
        """Word answers of several tokens are read by the labels' walk on the servers whose
        node reads it can certify (:data:`~.walk.WALK_SERVERS`); elsewhere refused by name."""
        if self.plan.kind in WALK_SERVERS:
            return
        raise AnswerLabelError(
            f"model {self.name!r}: the answer labels {list(options.answer_labels or ())} need "
            "several tokens; a server reads them by the labels' walk (teacher-forced "
            f"completions of token prefixes, certified from top-k listings) on {list(WALK_SERVERS)} "
            f"servers only, and this one is {self.plan.kind!r} (a node must be sent as the exact "
            "token ids, or as text the server is asked to tokenise back): set `server` if it is "
            "one of them, use the transformers or vllm backend, or answer with codes or letters"
        )

    def _probe_walk(self, probe: tuple[str, str]) -> None:
        """Check on the probe prompt that the server gives what the walk reads: the prompt's
        ids (vLLM's ``/tokenize``), or (llama-cpp-python) its ids from ``/extras/tokenize``
        equal to the entry's tokenizer's, so that the walk's nodes are the server's tokens, and
        its names of tokens their bytes (:meth:`~.walk.WalkSetup.check_names`)."""
        if self.kind == "vllm":
            ContextReads(self.plan, self.answers).prompt_ids(messages(*probe))  # type: ignore[arg-type]
            return
        template = PromptTemplate(self.tokenizer, self.name)
        text = template.render(*probe)
        setup = self._walk_setup()
        setup.check_names()
        if setup.server_ids(text) != template.encode(text):
            raise CollectionError(
                f"model {self.name!r}: the entry's tokenizer makes other token ids of the probe "
                f"prompt than server {self.spec.public_url} does (/extras/tokenize); the labels' "
                "walk sends its nodes as text and needs both to agree: give the served model's "
                "own tokenizer"
            )

    def _walk_setup(self) -> WalkSetup:
        """What the prompts' walks on this server share (:class:`~.walk.WalkSetup`)."""
        assert self.answers is not None and self.answers.trie is not None
        return WalkSetup(self.plan, self.pool, self.answers.trie, self.tokenizer,
                         self.spec.walk_logprobs, self.spec.logprob_rtol,
                         max(len(self.tokenizer), 1 + max(vocabulary(self.tokenizer).raw)))  # fmt: skip

    def _check_models(self) -> None:
        info = self.plan.served_model()
        if info is None:
            self._prov["models_endpoint"] = "absent"
            info = {}
        for k in ("root", "owned_by", "max_model_len"):
            if info.get(k) is not None:
                self._prov[f"served_{k}"] = info[k]
        if self.plan.kind == "auto":
            self.plan.kind = SERVER_KINDS.get(str(info.get("owned_by")), "other")

    def _load_tokenizer(self) -> None:
        tok, what = _load_tokenizer(self.spec)
        if tok is None:
            self._prov["tokenizer_note"] = what
            return
        self.tokenizer = tok
        self.valid, self.answers, rule = self._answer_rule(self.options)
        self._rules = {self.options.answer_labels: (self.valid, self.answers, rule)}
        if self.answers is not None:
            self._prov["answer_spellings"] = self.answers.as_records(tok)
        self._prov["tokenizer"] = what

    def _answer_rule(
        self, options: CollectOptions
    ) -> tuple[ValidTokens, AnswerSequences | None, str]:
        """``(valid, answers, rule)``: the valid tokens of the answer labels (the
        non-substantive ones among them); the answer spellings when some answer needs
        several tokens (else None: the one-token rule, a server cannot condition on an
        appended space token); the rule's description
        (:func:`~xlikert.collect.answers.spellings.answer_rule`). Word labels of several tokens
        are read by the labels' walk (on :data:`~.walk.WALK_SERVERS` servers, else
        AnswerLabelError, naming them); numbers of several digits too once the mode is known to
        be top-k on such a server (:meth:`_walk_numbers_instead`), else in exact mode."""
        from ...answers.layout import answer_codes
        from ...answers.numerals import read_numeral
        from ...answers.tokens import find_label_tokens

        scale = list(options.scale or ())
        codes, labels, _ = answer_codes(
            scale, options.labels_by_score, options.nonsubstantive_labels
        )
        if not all(read_numeral(str(labels[c])) for c in codes):
            plain = options.answer_labels is None
            try:
                valid = find_label_tokens(
                    self.tokenizer, list(codes), None if plain else labels,
                    scripts=options.numeral_scripts,
                )  # fmt: skip
            except AnswerLabelError:  # several tokens: the labels' walk, where it is bounded
                self._check_walk_server(options)
                return answer_rule(
                    self.tokenizer, scale, split_space=False, labels=options.labels_by_score,
                    nonsubstantive=options.nonsubstantive_labels, scripts=options.numeral_scripts,
                    max_positions=options.max_answer_positions, walk=True,
                )  # fmt: skip
            return valid, None, ONE_TOKEN_RULE
        valid, answers, rule = answer_rule(
            self.tokenizer, scale, split_space=False, labels=options.labels_by_score,
            nonsubstantive=options.nonsubstantive_labels, scripts=options.numeral_scripts,
            max_positions=options.max_answer_positions, walk=self._walk_numbers,
        )  # fmt: skip
        return valid, (None if answers.is_one_token else answers), rule

    def _check_multi_token(self, mode: str, why: str) -> None:
        """Multi-token answers are read in exact mode (a vLLM server) or by the labels' walk
        (top-k mode on a :data:`~.walk.WALK_SERVERS` server); elsewhere refused by name."""
        if mode == "exact":
            return
        raise CollectionError(
            f"model {self.name!r}: some answers need several tokens "
            f"({_spelled(self.answers, self.tokenizer)}); a server reads them exactly, teacher "
            f"forced, in exact mode only (a vLLM server with logprob_token_ids), and it is in "
            f"top-k mode: {why}; nor can the labels' walk bound them from top-k listings, "
            f"which runs on {list(WALK_SERVERS)} servers only, and this one is {self.kind!r}. "
            "Use such a server (set `server` if it is one) or the transformers or vllm backend"
        )

    def relabel(self, labels: tuple[str, ...] | None) -> None:
        """Read the next units' answers with these labels (score order; None: the digits).

        The valid tokens (with a tokenizer) and the readout of listed tokens by
        their text follow the labels; the mode detected at :meth:`open` stays.
        """
        if labels == self.options.answer_labels:
            return
        options = self.options.replace(where=f"model {self.name!r}", answer_labels=labels)
        valid, answers = None, None
        if self.tokenizer is None:
            _check_one_token(options, self.name)
        else:
            if labels not in self._rules:
                self._rules[labels] = self._answer_rule(options)
            valid, answers, _ = self._rules[labels]
            if answers is not None and answers.trie is None:
                self.answers = answers
                self._check_multi_token(self.mode, self._prov.get("exact_unavailable", ""))
                self._prov.setdefault("answer_spellings", answers.as_records(self.tokenizer))
        by_labels = self._prov.setdefault("valid_tokens_by_labels", {})
        if self.valid is not None and not by_labels:
            by_labels[labels_key(self.options.answer_labels, self.options.known_scale)] = (
                self.valid.as_records(self.tokenizer)
            )
        if valid is not None:
            by_labels[labels_key(options.answer_labels, options.known_scale)] = valid.as_records(
                self.tokenizer
            )
        self.options, self.valid, self.answers = options, valid, answers
        self.readout = Readout(
            self.spec, options, self.mode, self.readout.ids_ok, valid, self.tokenizer
        )

    def provenance(self) -> dict[str, Any]:
        """What to record about the model: server, mode, request, bounds, valid tokens."""
        prov = dict(self._prov)
        skip = ("messages", "model", "stream", "n", "cache_salt")  # the salt: fresh per request
        request = {k: v for k, v in self.plan.body([]).items() if k not in skip}
        one_token = ONE_TOKEN_RULE + (
            " (a server cannot condition on an appended space token, so an answer whose "
            "leading space is a token of its own counts as a failure)"
        )
        by_labels = {labels_key(labels, self.options.known_scale): r if r.startswith("multi-token")
                     else one_token for labels, (_, _, r) in self._rules.items()}  # fmt: skip
        rules = list(by_labels.values())
        walked = any("certified walk" in r for r in rules)
        multi = any(r.startswith("multi-token") and "certified walk" not in r for r in rules)
        prov.update(
            backend="openai-compatible chat completions",
            source=f"openai:{self.spec.model}",
            server=self.spec.public_url,
            served_model=self.spec.model,
            mode=self.mode,
            collection_protocol=PROTOCOL[self.mode]
            + (f"; {MULTI_TOKEN_PROTOCOL}" if multi else "")
            + (f"; {SERVER_WALK_PROTOCOL}" if walked else ""),
            decoding_rule=DECODING_RULE,
            api_key_env=self.spec.api_key_env,
            request=json.dumps(request, sort_keys=True)
            + (" + logprob_token_ids=<valid ids>" if self.mode == "exact" else ""),
            prompt_format="chat messages (JSON), templated by the server",
            concurrency=self.spec.concurrency,
            answers=rules[0] if rules else one_token,
            topk_listing=f"asked for top_k + {OUT_OF_ORDER} entries, kept the top_k most "
            "probable: a server may list its sampled token first whatever its rank",
            http_requests_last_session=self.transport.requests,
            http_retries_last_session=self.transport.retries,
        )
        if len(set(rules)) > 1:  # a response format read under two rules: each label set's
            prov["answers_by_labels"] = by_labels
        prov["server_kind"] = self.kind
        prov["prompt_cache"] = PROMPT_CACHE.get(self.kind, "not controlled by xlikert")
        if walked:
            prov["walk_logprobs"] = self.spec.walk_logprobs
        if self.mode == "topk":
            prov["bounds"] = TOPK_BOUNDS_RULE
            prov["logprob_rtol"] = self.spec.logprob_rtol
        if self.spec.revision is not None:
            prov["revision"] = self.spec.revision
        prov["valid_tokens"] = (
            self.valid.as_records(self.tokenizer) if self.valid is not None else []
        )
        prov.setdefault("tokenizer", "none (valid tokens recognised by their text)")
        return prov

    def score(self, prompts: Sequence[tuple[str, str]]) -> UnitResult:
        """Score the prompts concurrently (``concurrency`` requests in flight).

        All top-k listings first, then (exact mode) all ``logprob_token_ids``
        requests (:meth:`~.plan.RequestPlan.waves`): two requests per prompt in
        exact mode, one in top-k mode.
        """
        if self._walking:
            return self._score_walk(prompts)
        res = UnitResult.empty(len(prompts), self.options.sizes, bounded=self.mode == "topk")
        msgs = [messages(*p) for p in prompts]
        if self.answers is not None:
            return self._score_contexts(res, msgs, self.answers, self.pool)
        ids = list(self.readout.exact_valid().ids) if self.mode == "exact" else None
        rd = self.readout
        listings, got = self.plan.waves(
            self.pool, msgs, rd.ids_ok, ids, rd.listing, rd.valid_logprobs
        )
        for r, m in enumerate(msgs):
            rd.fill(res, r, m, listings[r], got[r] if got is not None else None)
        return res

    def _score_contexts(self, res: UnitResult, msgs: list[list], answers: AnswerSequences,
                        pool: ThreadPoolExecutor) -> UnitResult:  # fmt: skip
        """Multi-token answers (:mod:`.contexts`): every top-k listing first, then the
        prompts' token ids (``/tokenize``), then one ``logprob_token_ids`` request per
        (prompt, answer context). The decoding grid is measured at temperature 1 and top-p 1
        only (the full distribution: the PMF itself); NaN elsewhere."""
        rd = self.readout
        reads = ContextReads(self.plan, answers)
        listings = list(pool.map(lambda m: rd.listing(self.plan.request(
            self.plan.body(m, as_ids=rd.ids_ok))), msgs))  # fmt: skip
        ids = list(pool.map(reads.prompt_ids, msgs))
        raw = reads.read(pool, ids)
        opts = self.options
        grid = np.full((len(msgs), len(opts.temperatures), len(opts.top_ps), *raw.shape[1:]),
                       np.nan)  # fmt: skip
        for t, temp in enumerate(opts.temperatures):
            for p, top_p in enumerate(opts.top_ps):
                if temp == 1.0 and top_p >= 1.0:
                    grid[:, t, p] = raw
        out = answers.readout(raw, grid)
        for key in ("pmf", "valid_mass", "decoding_pmf", "decoding_valid_mass",
                    "nonsubstantive_mass", "script_mass"):  # fmt: skip
            if key in out and key in res.data:  # else NaN (an item without options)
                res.data[key][:] = out[key]
        for r, m in enumerate(msgs):
            rd.write_listing(res, r, listings[r])
            res.data["prompt_text"][r] = json.dumps(m, ensure_ascii=False)
        return res

    def _score_walk(self, prompts: Sequence[tuple[str, str]]) -> UnitResult:
        """Word answers by the labels' walk on the server (:mod:`.walk`): each prompt's
        nodes read from top-k listings, the unlisted mass added to the certified bounds;
        temperature 1 with no nucleus measured, the rest of the decoding grid NaN."""
        o, answers = self.options, self.answers
        assert answers is not None and answers.trie is not None
        setup = self._walk_setup()
        if self.kind == "vllm":
            reads = ContextReads(self.plan, answers)
            texts = [json.dumps(messages(*p), ensure_ascii=False) for p in prompts]
            heads: list[Any] = list(
                self.pool.map(reads.prompt_ids, [messages(*p) for p in prompts])
            )
        else:
            template = PromptTemplate(self.tokenizer, self.name)
            texts = heads = [template.render(s, u) for s, u in prompts]
        layout = answers.layout
        points = None if layout is None else np.asarray(layout.columns) < layout.n_scores
        out, walks = walk_prompts(
            self.name, o, answers, self.tokenizer, (ServerWalk(setup, h) for h in heads),
            grid=((1.0,), (1.0,)), finish=lambda r, w: cast(ServerWalk, r).widen(w, o.answer_tol, points),
        )  # fmt: skip
        res = UnitResult.empty(len(prompts), o.sizes, bounded=True, walk=True)
        for key in ("pmf", "valid_mass", "nonsubstantive_mass", "script_mass", *BOUND_VARIABLES,
                    *NONSUBSTANTIVE_BOUND_VARIABLES, *SCRIPT_BOUND_VARIABLES, *WALK_VARIABLES):  # fmt: skip
            if key in out and key in res.data:
                res.data[key][:] = out[key]
        for t, temp in enumerate(o.temperatures):
            for p, top_p in enumerate(o.top_ps):
                if temp == 1.0 and top_p >= 1.0:  # measured: the full distribution
                    res.data["decoding_pmf"][:, t, p] = out["decoding_pmf"][:, 0, 0]
                    res.data["decoding_valid_mass"][:, t, p] = out["decoding_valid_mass"][:, 0, 0]
        for b, w in enumerate(walks):
            n = min(o.top_k, len(w.topk_id))
            res.data["topk_token"][b, :n] = [
                token_text(self.tokenizer, int(i)) for i in w.topk_id[:n]
            ]
            res.data["topk_token_id"][b, :n] = w.topk_id[:n]
            res.data["topk_logprob"][b, :n] = w.topk_logprob[:n]
            res.data["prompt_text"][b] = texts[b]
        return res

    def score_elicited(
        self, prompts: Sequence[tuple[str, str]], level: str, options: CollectOptions,
        labels: Sequence[str] | None = None,
    ) -> UnitResult:  # fmt: skip
        """Read the prompts under the elicitation level ``prefix``, ``greedy`` or ``stated``
        (:func:`~.elicit.score_elicited_on_server`; ``prefix`` and ``greedy``: one-token
        answers only; ``labels``: ``stated``'s answer labels).

        Raises
        ------
        ElicitationLevelError
            ``prefix`` or ``greedy`` with answers that need several tokens: both read one
            top-k listing.
        """
        from .elicit import (
            GREEDY_PROTOCOL,
            PREFIX_PROTOCOL,
            STATED_PROTOCOL,
            score_elicited_on_server,
        )

        if self.answers is not None and level != "stated":  # stated reads no listing
            raise ElicitationLevelError(
                f"model {self.name!r}: the elicitation level {level!r} reads the answer from "
                "one top-k listing on a server, and some answers need several tokens "
                f"({_spelled(self.answers, self.tokenizer)}): use the transformers or vllm "
                "backend, or first_token"
            )

        rule = {"prefix": PREFIX_PROTOCOL, "greedy": GREEDY_PROTOCOL,
                "stated": STATED_PROTOCOL}.get(level)  # fmt: skip
        if rule is not None:
            self._prov[f"elicitation_{level}_protocol"] = rule
        return score_elicited_on_server(self, prompts, level, options, labels)

    def close(self) -> None:
        """Stop the worker threads and close every connection."""
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
        self.transport.close()


def _check_one_token(options: CollectOptions, name: str) -> None:
    """A server that cannot walk the labels (no tokenizer, or not a
    :data:`~.walk.WALK_SERVERS` server in top-k mode) reads one-token answers only."""
    from ...answers.layout import answer_codes
    from ...answers.tokens import needs_sequences

    codes, labels, _ = answer_codes(
        options.known_scale, options.labels_by_score, options.nonsubstantive_labels
    )
    if needs_sequences(codes, None if options.answer_labels is None else labels):
        what = (
            f"the scale {list(options.known_scale)}"
            if options.answer_labels is None
            else f"the answer labels {list(options.answer_labels)}"
        )
        raise CollectionError(
            f"model {name!r}: {what} needs multi-token answers (one value's text is a prefix "
            "of another's); this server gives next-token log-probabilities only: use the "
            f"transformers or vllm backend, or (with `tokenizer`) a {' or '.join(WALK_SERVERS)} "
            "server, which reads them by the labels' walk"
        )


def _spelled(answers: AnswerSequences | None, tokenizer: Tokenizer) -> str:
    """The answers that need several tokens, as a short text for a message."""
    from ...answers.vocabulary import token_text

    if answers is None:
        return ""
    long = [(y, s) for y, s in zip(answers.scores, answers.sequences, strict=True) if len(s) > 1]
    shown = [f"{y}: {[token_text(tokenizer, i) for i in s]}" for y, s in long[:3]]
    return "; ".join(shown) + (f"; {len(long) - 3} more spellings" if len(long) > 3 else "")
