"""The measurement layer's one seam: how the runner talks to a backend.

A backend is a package ``xlikert.collect.backends.<name>`` whose ``__init__.py``
defines three functions, typed by :class:`Backend`:

``check(spec, options) -> dict``
    Validate a model entry before anything runs (no heavy imports, no network)
    and return the part of it that identifies the results (it goes into the
    run's fingerprint; secrets and transport settings are left out).
``inputs(spec, options) -> CellInputs``
    What determines the entry's numbers, known without loading weights or
    reaching a server (the tokenizer at most): the model's identity and each
    prompt's exact token ids, or the exact request for a server. The runner
    keys every cell by them (:mod:`xlikert.collect.run.identity`) and copies a cell
    whose key an earlier results file or saved progress holds instead of
    computing it again.
``open(spec, options, probe, *, prepared=None) -> Model``
    Load the model or connect to it; ``probe`` is one ``(system, user)`` prompt
    a backend may use to detect what the engine supports; ``prepared`` is what
    its ``inputs`` resolved for the same entry in this run (``CellInputs.prepared``:
    the checked weights, the tokenizer), so they are not resolved twice.

A :class:`Model` scores a list of ``(system, user)`` prompts into one
:class:`~xlikert.collect.record.UnitResult`, reads the next units with other
answer labels when asked (:meth:`Model.relabel`), and describes itself in
:meth:`Model.provenance`. What a backend can do beyond that is a protocol of its own,
checked with ``isinstance`` where it is needed, so a backend that lacks a capability
says so by its type:

=========================  ==============================================  ==================
capability                 protocol (its members)                          backends
=========================  ==============================================  ==================
one-token reading          :class:`Model` (``score``, ``relabel``)         every backend
multi-token reading        :class:`MultiTokenModel` (``read_prompts``      transformers, vllm
                           and the answer rule it reads with)
prefix groups              :class:`PrefixGroupModel` (``read_groups``)     transformers
the labels' walk           :class:`LabelWalkingModel` (``node_reader``,    transformers, vllm
                           ``walk_progress``)
the tree reader            :class:`ConversationModel` (``context_reader``  transformers, vllm
                           -> :class:`ContextReader`)
elicitation (in process)   :class:`ElicitingModel` (``greedy_reply``,      transformers, vllm
                           ``next_token_reader``)
elicitation (on a server)  :class:`ServerElicitingModel`                   openai
                           (``score_elicited``)
levels, before loading     :class:`ElicitingBackend`                       every backend
                           (``check_elicitation``)
=========================  ==============================================  ==================

A :class:`ConversationModel` reads whole conversations exactly (sequential
administration, :mod:`xlikert.collect.context`): it renders a conversation to token
ids and hands out a :class:`ContextReader` that reads the answer after many token-id
contexts, reusing their shared prefixes. This module declares everything the run machinery
(:mod:`xlikert.collect.run`) calls; the backends import it, never the run, and
never one another (the import-linter contracts of ``pyproject.toml``; the seam of
lm-evaluation-harness's ``api/model.py``). The backends, side by side under
:mod:`xlikert.collect.backends`:

============  ==================================================  ===============
``backend``   module                                              selected by
============  ==================================================  ===============
transformers  :mod:`xlikert.collect.backends.transformers`        default
vllm          :mod:`xlikert.collect.backends.vllm` (in process)   ``backend = "vllm"``
openai        :mod:`xlikert.collect.backends.openai` (HTTP)       ``source = "openai:..."``
                                                                  or ``backend = "openai"``
============  ==================================================  ===============

The two in-process backends share a base
(:mod:`xlikert.collect.backends.inprocess`). Every backend's ``check`` refuses
model-entry keys it does not know (:func:`~xlikert.collect.entries.check_entry_keys`),
and the run-wide options (:class:`~xlikert.collect.options.CollectOptions`) are
validated when built, before any model loads.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, runtime_checkable

import numpy as np

from ..core.errors import CollectionError
from .foreign import Tokenizer

if TYPE_CHECKING:
    from .answers.sequences import AnswerSequences
    from .answers.tokens import ValidTokens
    from .answers.walk import NodeReader
    from .options import CollectOptions
    from .progress import CellProgressFn
    from .record import UnitResult
    from .templates import PromptTemplate

__all__ = [
    "BACKENDS",
    "AnswerArrays",
    "Backend",
    "CellInputs",
    "ContextReader",
    "ConversationModel",
    "CountingReader",
    "ElicitingBackend",
    "ElicitingModel",
    "LabelWalkingModel",
    "Model",
    "MultiTokenModel",
    "PrefixGroupModel",
    "Sent",
    "ServerElicitingModel",
    "backend_module",
    "backend_of",
    "conversation_model",
    "eliciting_model",
]

#: A readout: the answer's arrays after each prompt or context, by name (``pmf (B, S)``,
#: ``valid_mass (B,)``, ``decoding_pmf (B, T, P, S)``, ... as
#: :meth:`~xlikert.collect.answers.sequences.AnswerSequences.readout` names them).
AnswerArrays: TypeAlias = dict[str, np.ndarray]
#: What a prompt sends to the model: its exact token ids, or the exact request (a JSON
#: object) for a server that tokenises itself (:attr:`CellInputs.sent`).
Sent: TypeAlias = Sequence[int] | np.ndarray | dict[str, Any]

#: Backend name -> the package implementing it (a :class:`Backend`).
BACKENDS = {
    "transformers": "xlikert.collect.backends.transformers",
    "vllm": "xlikert.collect.backends.vllm",
    "openai": "xlikert.collect.backends.openai",
}


@dataclass(frozen=True)
class CellInputs:
    """What determines a model entry's numbers, known before it loads (a backend's ``inputs``).

    Attributes
    ----------
    identity
        The model's identity as JSON values: the entry's fields that identify the
        results (its backend's ``check``) and what they resolve to that changes the
        numbers (the folder's revision and checksum, the dtype the weights load in),
        without the model's name.
    sent
        ``(system, user)`` prompts -> what the model is sent for each: its exact
        token ids (a sequence of ints), or the exact request (a JSON object) for a
        server that tokenises itself.
    prepared
        What the backend resolved on the way (for an in-process entry its
        :class:`~xlikert.collect.backends.inprocess.ModelFiles`: the folder, its checksum, the
        tokenizer), handed to its ``open`` in the same run; None: nothing to hand on.
    """

    identity: dict[str, Any]
    sent: Callable[[Sequence[tuple[str, str]]], Sequence[Sent]]
    prepared: object = None


@runtime_checkable
class Backend(Protocol):
    """A backend: the package ``xlikert.collect.backends.<name>`` with these three functions.

    The run (:mod:`xlikert.collect.run`) reaches a backend only through them: it checks
    every entry before anything runs, keys the entry's cells by its ``inputs``, and
    opens it only when a cell is left to compute. A module satisfies the protocol by
    defining the functions (``isinstance(module, Backend)``; :func:`backend_module`).

    Examples
    --------
    >>> import xlikert.collect.backends.transformers as transformers
    >>> isinstance(transformers, Backend)
    True
    """

    def check(self, spec: dict[str, Any], options: CollectOptions) -> dict[str, Any]:
        """Validate a model entry before anything runs (no heavy imports, no network).

        Returns the entry's fields that identify the results (the run's fingerprint),
        defaults filled in, secrets and transport settings left out.

        Raises
        ------
        CollectionError
            An unknown key, a value out of range, a source that cannot be found.
        """
        ...

    def inputs(self, spec: dict[str, Any], options: CollectOptions) -> CellInputs:
        """What determines the entry's numbers, known before it loads (:class:`CellInputs`)."""
        ...

    def open(
        self,
        spec: dict[str, Any],
        options: CollectOptions,
        probe: tuple[str, str],
        *,
        prepared: object = None,
    ) -> Model:
        """Load the model (or connect to it), ready to score.

        ``probe`` is one ``(system, user)`` prompt of the run a backend may send to
        find what the engine supports; ``prepared`` is the entry's
        :attr:`CellInputs.prepared` from :meth:`inputs` in this run (None: resolve
        it here).

        Raises
        ------
        CollectionError
            A model that cannot be loaded or reached, named.
        """
        ...


@runtime_checkable
class Model(Protocol):
    """A loaded model (or a connection to one) that scores prompts.

    Everything the runner uses is declared here.
    """

    #: The model's name in the results (the ``model`` coordinate).
    name: str
    #: ``"exact"`` or ``"topk"`` (bounded): a resumed run must measure in the same mode.
    mode: str
    #: The run-wide options the model reads with (its answer labels among them).
    options: CollectOptions

    def score(self, prompts: Sequence[tuple[str, str]]) -> UnitResult:
        """Score ``(system, user)`` prompts: one row per prompt, every variable of the schema.

        Parameters
        ----------
        prompts : sequence of (str, str)
            The unit's prompts, each a system prompt (``""``: none) and a user
            prompt, already templated.

        Returns
        -------
        UnitResult
            One row per prompt, in order: every variable of
            :data:`~xlikert.core.schema.VARIABLES` (with the bounds in mode ``"topk"``,
            with the traces in reasoning mode), sized by :attr:`options`; the runner
            checks it with :meth:`UnitResult.check <xlikert.collect.UnitResult.check>`.

        Raises
        ------
        CollectionError
            Where the model cannot score the prompts (e.g. out of memory even on a
            batch of one prompt), naming the model.

        Examples
        --------
        A toy backend that finds every answer equally likely:

        >>> from xlikert.collect import CollectOptions, UnitResult
        >>> class Uniform:
        ...     options = CollectOptions(scale=(1, 2, 3, 4, 5))
        ...
        ...     def score(self, prompts):
        ...         result = UnitResult.empty(len(prompts), self.options.sizes)
        ...         result.data["pmf"][:] = 1 / 5
        ...         result.data["valid_mass"][:] = 1.0
        ...         return result
        >>> prompts = [("", "I am the life of the party."), ("", "I talk to a lot of people.")]
        >>> result = Uniform().score(prompts)
        >>> result.check(len(prompts), Uniform.options.sizes)  # as the runner checks it
        >>> result.data["pmf"].shape
        (2, 5)
        """
        ...

    def relabel(self, labels: tuple[str, ...] | None) -> None:
        """Read the next units' answers with these labels (one per score; None: the digits).

        The runner calls it between units whose response format changes the answer
        labels; the model then reads with :attr:`options` whose ``answer_labels``
        are ``labels``.

        Parameters
        ----------
        labels : tuple of str or None
            One answer label per scale value, lowest first (``("A", "B", ...)``);
            ``None``: the scale's digits.

        Raises
        ------
        AnswerLabelError
            Labels the model's tokenizer cannot read as answers.

        Examples
        --------
        A toy backend that only records the labels:

        >>> from xlikert.collect import CollectOptions
        >>> class Relabelled:
        ...     options = CollectOptions(scale=(1, 2, 3))
        ...
        ...     def relabel(self, labels):
        ...         self.options = self.options.replace(answer_labels=labels)
        >>> model = Relabelled()
        >>> model.relabel(("A", "B", "C"))
        >>> model.options.labels_by_score
        {1: 'A', 2: 'B', 3: 'C'}
        """
        ...

    def provenance(self) -> dict[str, Any]:
        """What to record about the model in ``attrs["models"][name]``.

        Called once the model has scored its units, so it can name every answer
        rule it read with.

        Returns
        -------
        dict of str to Any
            JSON-serialisable values: the backend's description of the model (what
            it loaded or reached), the answer rule's valid tokens and, in reasoning
            mode, the trace settings; ``ds.likert.attrs["models"]`` gives them back
            from a results file.

        Examples
        --------
        A toy backend's description; the results file stores it as JSON:

        >>> import json
        >>> class Described:
        ...     def provenance(self):
        ...         return {"source": "toy:uniform", "valid_tokens": {"1": ["1"], "2": ["2"]}}
        >>> info = Described().provenance()
        >>> json.loads(json.dumps(info)) == info
        True
        """
        ...

    def close(self) -> None:
        """Release the model's memory (or connections).

        The runner calls it once per model, after the model's last unit or when a
        run stops; the model is not used after it.

        Examples
        --------
        A toy backend holding a session, closed as the runner closes every model:

        >>> class Connected:
        ...     def __init__(self):
        ...         self.session = object()  # the weights, or an HTTP session
        ...
        ...     def close(self):
        ...         self.session = None
        >>> model = Connected()
        >>> try:
        ...     pass  # score the model's units
        ... finally:
        ...     model.close()
        >>> model.session is None
        True
        """
        ...


@runtime_checkable
class ContextReader(Protocol):
    """Reads the answer after token-id contexts, reusing what it ran for earlier ones.

    One reader serves one conversation tree (sequential administration,
    :mod:`xlikert.collect.context`): it may keep the state (the KV cache) of the
    contexts it read and run a later context only from the longest of them that
    it shares a prefix with. What it keeps lives until :meth:`close`, so a unit's
    numbers depend only on that unit's own calls (a resumed run reads as an
    uninterrupted one did).
    """

    def read(
        self, contexts: Sequence[Sequence[int]], keep: Sequence[bool] | None = None
    ) -> AnswerArrays:
        """The readout after each context: ``pmf (B, S)``, ``valid_mass (B,)``,
        ``decoding_pmf (B, T, P, S)`` and ``decoding_valid_mass (B, T, P)`` (the keys of
        :meth:`~xlikert.collect.answers.sequences.AnswerSequences.readout`); ``keep[b]`` False: no
        later context extends context ``b`` (its state need not be kept)."""
        ...

    def close(self) -> None:
        """Drop every kept state."""
        ...


@runtime_checkable
class CountingReader(ContextReader, Protocol):
    """A :class:`ContextReader` that counts the tokens it ran (the transformers backend's
    :class:`~xlikert.collect.backends.transformers.tree.TreeReader`; vLLM's prefix cache
    runs what it does not hold, uncounted): a tree's sequential attrs report it."""

    #: The tokens the reader ran through the model so far (every context's own part).
    tokens_run: int


@runtime_checkable
class MultiTokenModel(Model, Protocol):
    """A :class:`Model` that reads prompts as token ids, exactly, whatever the number of
    tokens an answer is spelled in (multi-token reading: every spelling teacher-forced).

    The in-process backends (transformers, vLLM) are. The openai backend is not: a server
    tokenises the prompts itself, and reads answers of several tokens only where it is a
    vLLM server (found when it connects; refused by name elsewhere).
    """

    #: The model's tokenizer (a foreign object: Hugging Face's or a GGUF file's).
    tokenizer: Tokenizer
    #: How a prompt becomes text and token ids (the model's chat template).
    template: PromptTemplate
    #: The one-token valid set of the answer labels read now.
    valid: ValidTokens
    #: The answer spellings read now (one token each where the rule is one-token).
    answers: AnswerSequences

    def read_prompts(self, texts: list[str], encoded: list[list[int]]) -> AnswerArrays:
        """The readout after each prompt's token ids (exact mode): ``pmf``, ``valid_mass``,
        ``decoding_pmf``, ``decoding_valid_mass`` (one row per prompt), ``topk_id``,
        ``topk_logprob`` (a sequence per prompt); ``texts``: the prompts' texts."""
        ...


@runtime_checkable
class PrefixGroupModel(MultiTokenModel, Protocol):
    """A :class:`MultiTokenModel` that reads a unit's prompts from the prefixes groups of
    them share, each group's prefix run once (:func:`~xlikert.collect.prefixes.prefix_groups`).

    The transformers backend is; vLLM shares prefixes by its own prefix cache.
    """

    def read_groups(
        self, encoded: list[list[int]], start: int, groups: list[tuple[int, list[int]]]
    ) -> AnswerArrays | None:
        """The readout after every prompt of ``encoded`` (in their order), each read from its
        group's prefix; ``start``: the prefix every prompt shares; ``groups``:
        ``(prefix length, prompt indices)`` as :func:`~xlikert.collect.prefixes.prefix_groups`
        cuts them. None where the model cannot keep and pad a cache (the caller reads the
        unit from its common prefix alone)."""
        ...


@runtime_checkable
class LabelWalkingModel(Model, Protocol):
    """A :class:`Model` that reads answers of several tokens (word labels, numbers of several
    digits) by the certified walk over the labels' trie (:mod:`xlikert.collect.answers.walk`)
    instead of listing every spelling: the in-process backends (transformers, vLLM). The
    openai backend walks word labels too, from a server's top-k listings, on its own (its
    bounds widened by what the server does not list; not this protocol).

    The walk itself is backend-agnostic numpy; a backend supplies one :meth:`node_reader`
    per prompt, whose calls are the walk's rounds.
    """

    #: Told after each round of a prompt's walk how far it is (passes read, budget, the
    #: bound reached, unread mass, elapsed seconds): the run shows it on its progress bar
    #: (:mod:`xlikert.collect.progress`); None: nothing told.
    walk_progress: CellProgressFn | None
    #: Trie nodes read by every walk so far.
    walk_passes: int

    def node_reader(self, prompt: Sequence[int]) -> tuple[NodeReader, Callable[[], None]]:
        """A reader of the next-token rows after ``prompt`` followed by each node's tokens
        (:class:`~xlikert.collect.answers.walk.NodeReader`: logits or log-probabilities over
        the whole vocabulary), and a function that releases what it kept."""
        ...


@runtime_checkable
class ConversationModel(Model, Protocol):
    """A :class:`Model` that can read conversations exactly (sequential administration).

    The in-process backends (transformers, vLLM) are; the openai backend (a model behind
    an OpenAI-compatible server) is not (:func:`conversation_model` refuses it by name).
    """

    def conversation(
        self, system: str, turns: Sequence[tuple[str, str]], user: str
    ) -> tuple[str, list[int]]:
        """The exact text and token ids of a conversation: ``system`` as the system
        prompt, each ``(question, answer)`` of ``turns`` as a user turn and the model's
        reply, then ``user`` with the generation prompt
        (:meth:`~xlikert.collect.templates.PromptTemplate.render_conversation`)."""
        ...

    def context_reader(self, session: str) -> ContextReader:
        """A reader for one conversation tree; ``session`` names it (vLLM: its cache salt)."""
        ...


@runtime_checkable
class ElicitingModel(ConversationModel, MultiTokenModel, Protocol):
    """A :class:`ConversationModel` reading token ids (:class:`MultiTokenModel`) that also
    writes replies: the elicitation levels ``prefix``, ``greedy`` and ``own_words``
    (:mod:`xlikert.collect.elicitation`).

    The in-process backends (transformers, vLLM) are: these three members are the only
    backend-specific part of the levels (the reply tree, the parsing rule and the records
    are :mod:`xlikert.collect.elicitation` and :mod:`xlikert.collect.own_words`). A backend
    says which levels it reads with its ``check_elicitation(spec, levels)``, called before
    anything loads (:class:`ElicitingBackend`).
    """

    #: Token ids that end the model's turn (:data:`~.backends.inprocess.END_OF_TURN_RULE`).
    end_of_turn: frozenset[int]

    def greedy_reply(self, ids: Sequence[int], max_new_tokens: int) -> tuple[list[int], str]:
        """The greedy reply after the token ids ``ids``: at each step the token of largest
        logit, up to ``max_new_tokens`` tokens; the reply's ids (an ending end-of-turn token
        left out) and how it ended (``"eos"`` or ``"length"``)."""
        ...

    def next_token_reader(self, session: str) -> ContextReader:
        """A reader of one reply tree (``own_words``): its ``read(contexts, keep)`` returns
        ``{"logprobs": (n, V)}``, the float64 next-token log-probabilities of the whole
        vocabulary after each context; ``session`` names the tree (vLLM: its cache salt)."""
        ...


@runtime_checkable
class ServerElicitingModel(Model, Protocol):
    """A :class:`Model` that reads the elicitation levels its own way: a server, which
    renders and tokenises the prompts itself (the openai backend;
    :mod:`xlikert.collect.backends.openai.elicit`)."""

    def score_elicited(
        self, prompts: Sequence[tuple[str, str]], level: str, options: CollectOptions,
        labels: Sequence[str] | None = None,
    ) -> UnitResult:  # fmt: skip
        """Read one unit of ``(system, user)`` prompts under the elicitation ``level``
        (as :func:`xlikert.collect.elicitation.score_elicited` does in process; ``labels``:
        ``stated``'s answer label of each point of ``options.scale``)."""
        ...


@runtime_checkable
class ElicitingBackend(Backend, Protocol):
    """A :class:`Backend` that reads elicitation levels other than ``first_token``: its
    ``check_elicitation`` refuses the levels it cannot read before anything loads
    (:func:`xlikert.collect.elicitation.check_elicitation_backends`). A backend without it
    reads ``first_token`` only.

    Examples
    --------
    >>> import xlikert.collect.backends.openai as openai
    >>> isinstance(openai, ElicitingBackend)
    True
    """

    def check_elicitation(self, spec: dict[str, Any], levels: tuple[str, ...]) -> None:
        """Refuse, by name, a level of ``levels`` the entry ``spec`` cannot be read with.

        Raises
        ------
        ElicitationLevelError
            A level the backend does not read (a server asked for ``own_words``).
        """
        ...


def conversation_model(model: Model) -> ConversationModel:
    """``model`` if it reads conversations exactly (:class:`ConversationModel`), else an error.

    Raises
    ------
    CollectionError
        The backend cannot read token-id contexts exactly (an OpenAI-compatible
        server: a chat endpoint renders the conversation itself and lists top-k
        log-probabilities only).
    """
    if isinstance(model, ConversationModel):
        return model
    raise CollectionError(
        f"model {getattr(model, 'name', model)!r}: sequential administration reads the exact "
        "answer distribution after every answer history, from token ids with a reused prefix; "
        f"its backend ({type(model).__name__}) cannot do that exactly. Use the transformers "
        'backend or the in-process vLLM backend (backend = "vllm"), or administration = '
        '"isolated"'
    )


def eliciting_model(model: Model, level: str) -> ElicitingModel:
    """``model`` if it reads the elicitation ``level`` in process (:class:`ElicitingModel`),
    else an error naming the level.

    Raises
    ------
    CollectionError
        The backend neither reads token ids nor writes replies (a server reads the levels
        its own way, :class:`ServerElicitingModel`).
    """
    if isinstance(model, ElicitingModel):
        return model
    what = (
        "write replies"
        if level in ("greedy", "own_words", "stated")
        else "read prompts as token ids"
    )
    raise CollectionError(
        f"model {getattr(model, 'name', model)!r}: its backend ({type(model).__name__}) cannot "
        f"{what}; the elicitation level {level!r} needs the transformers or vllm backend"
    )


def backend_of(spec: dict[str, Any]) -> str:
    """The backend name of a model entry.

    Examples
    --------
    >>> backend_of({"name": "m", "source": "openai:gpt-4o-mini"})
    'openai'
    >>> backend_of({"name": "m", "source": "Qwen/Qwen3-8B", "backend": "vllm"})
    'vllm'
    >>> backend_of({"name": "m", "source": "smollm2-135m-instruct"})
    'transformers'
    """
    name = spec.get("backend")
    if name is None:
        return "openai" if str(spec.get("source", "")).startswith("openai:") else "transformers"
    if name not in BACKENDS:
        raise CollectionError(
            f"model {spec.get('name')!r}: unknown backend {name!r}; choose one of {sorted(BACKENDS)}"
        )
    return str(name)


def backend_module(spec: dict[str, Any]) -> Backend:
    """The package implementing the backend of a model entry (imported on first use).

    Examples
    --------
    >>> backend = backend_module({"name": "m", "source": "openai:gpt-4o-mini"})
    >>> backend.__name__, isinstance(backend, Backend)
    ('xlikert.collect.backends.openai', True)
    """
    module = importlib.import_module(BACKENDS[backend_of(spec)])
    if not isinstance(module, Backend):  # a registered backend lacks check, inputs or open
        missing = [f for f in ("check", "inputs", "open") if not callable(getattr(module, f, None))]
        raise CollectionError(f"backend module {module.__name__} does not define {missing}")
    return module
