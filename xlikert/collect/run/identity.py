"""A cell's identity: what determines its numbers, hashed into the cell's key.

A cell of a results file (one model, one condition, one item) is determined by

* the model's identity: its backend's ``check`` of the entry (source, revision,
  checksum, the backend settings that change numbers), what these resolve to
  before anything loads (the folder's revision and checksum, a Hugging Face id's
  commit, the dtype the weights load in) -- :class:`~xlikert.collect.protocol.CellInputs`;
* the collection options that change the stored values (:data:`NUMBER_OPTIONS`);
* the answer labels the cell is read with: each point of its own item's support with its
  label, and each non-substantive option its item offers with its label
  (:func:`key_labels`). Not the run-wide ``score`` axis (the union of the items' points)
  nor the run's ``option`` axis: a study that adds or drops items on other scales keeps
  the keys of every unchanged cell, and a reused cell is placed on the new run's axes
  (zero off its item's support, NaN for an option it does not offer);
* the exact token ids the model reads (or, for a server that tokenises itself,
  the exact request sent).

:data:`KEY_RULE` hashes them into the ``cell_key`` stored with every cell
(:data:`xlikert.core.schema.CELL_VARIABLES`); the identity and options of each model
are stored in ``attrs["models"][name]["cell_identity"]``, so a key can be
recomputed from the file. Left out on purpose: the model's name (a label), the
batch size, the unit size (``chunk_size``), the prefix cache, the device and
how an engine is spread over devices, and the run's ``score`` and ``option`` axes. They change which prompts share a
batch, and so the last bits of float arithmetic (about 2e-6 on SmolLM2 on a
CPU), not what is measured; a reused cell holds the earlier numbers, copied.

Token ids need only the tokenizer: the keys of a model whose every cell is
reused are known without loading its weights (:meth:`RunKeys.predict`). What an
in-process entry resolves to for its identity (the folder, the checksum of its
weights, the tokenizer: :class:`~xlikert.collect.backends.inprocess.ModelFiles`) is
handed on to the backend's ``open`` (``CellInputs.prepared``), so a run hashes the
weights and loads the tokenizer once.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ...core.codecs import decode_token_ids
from ...core.errors import CollectionError
from ..answers.walk import WALK_ROUNDS
from ..protocol import CellInputs, Sent, backend_module

if TYPE_CHECKING:
    from ..options import CollectOptions
    from ..record import UnitResult

__all__ = [
    "KEY_FORMAT",
    "KEY_RULE",
    "NUMBER_OPTIONS",
    "RunKeys",
    "cell_key",
    "key_format",
    "key_labels",
    "model_digest",
    "numbers_options",
]

#: The version of the key rule (part of every key). ``xlikert-cell-1`` hashed the run's
#: ``scale`` (the union of the items' points) and each cell's labels over it, and every
#: option of the run's ``option`` axis: its keys are not today's (:func:`key_format`).
KEY_FORMAT = "xlikert-cell-2"

#: The collection options that change a cell's stored values (a cell's scale is in its
#: answer labels: :func:`key_labels`).
NUMBER_OPTIONS = (
    "top_k", "temperatures", "top_ps", "split_space", "numerals", "answer_tol",
    "answer_max_passes",
)  # fmt: skip

#: The request key of a sequentially administered cell (its conversation, in order).
SEQUENTIAL_KEY = "xlikert-sequential-1"


def _difference(predicted: Sent, read: Sent, width: int = 6) -> str:
    """Where two prompts' token ids (or requests) part, for an error message."""
    a, b = _plain(predicted), _plain(read)
    if isinstance(a, dict) or isinstance(b, dict):
        return f"predicted {json.dumps(a)[:300]}, read {json.dumps(b)[:300]}"
    at = next(
        (n for n, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )
    lo = max(0, at - 2)
    return (
        f"predicted {len(a)} ids, read {len(b)}; first difference at position {at}: "
        f"predicted {a[lo : at + width]}, read {b[lo : at + width]}"
    )


def _plain(sent: Sent) -> list[int] | dict[str, Any]:
    """Token ids as a JSON list (a server's request as it is)."""
    return sent if isinstance(sent, dict) else np.asarray(sent, dtype=np.int64).tolist()


#: How a ``cell_key`` is computed (stored in the results file).
KEY_RULE = (
    "cell_key = sha256(KEY_FORMAT + '\\n' + model_digest + '\\n' + JSON(answer labels) + "
    "'\\n' + sent_digest); model_digest = sha256(JSON({'model': cell_identity['model'], "
    "'options': cell_identity['options']}), keys sorted, no spaces); sent_digest = "
    "sha256(b'ids:' + int64 little-endian token ids) or sha256(b'request:' + JSON(request)); "
    "answer labels = ['<score>=<label>' for each point of the cell's item with a label] + "
    "['<option>=<label>' for each non-substantive option the item offers] (key_labels); "
    f"KEY_FORMAT = {KEY_FORMAT!r} (xlikert.collect.run.identity)"
)

#: Entry keys of an in-process backend that place the model without changing what it
#: measures, or that the identity holds resolved (``dtype``, ``trust_remote_code``).


def _json(obj: object) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str).encode()


def numbers_options(options: CollectOptions) -> dict[str, Any]:
    """The options that change a cell's stored values (:data:`NUMBER_OPTIONS`) as JSON, and
    the version of the rule that picks a walk's rounds
    (:data:`~xlikert.collect.answers.walk.WALK_ROUNDS`: which nodes a walk to ``answer_tol``
    reads).

    Examples
    --------
    >>> from xlikert.collect.options import CollectOptions
    >>> numbers_options(CollectOptions(scale=(1, 2, 3), top_k=5))["top_k"]
    5
    """
    out = {k: (list(v) if isinstance(v, tuple) else v) for k in NUMBER_OPTIONS
           if (v := getattr(options, k)) is not None}  # fmt: skip
    out["answer_walk_rounds"] = WALK_ROUNDS  # which nodes a walk to answer_tol reads
    return out


def key_labels(
    scale: Sequence[int], options: Sequence[str], labels: Sequence[str] | None
) -> tuple[str, ...]:
    """A cell's answer labels as its key holds them: ``"<score>=<label>"`` for each point
    of its item that has a label (its support), then ``"<option>=<label>"`` for each
    non-substantive option it offers.

    Parameters
    ----------
    scale
        The run's ``score`` axis.
    options
        The run's ``option`` axis (its non-substantive options).
    labels
        The cell's labels: one per point of ``scale`` (``""`` off the item's support),
        then one per option of ``options`` (``""`` where not offered); None: the digits
        of ``scale``, no option.

    Examples
    --------
    >>> key_labels((0, 1, 2, 3), ("Don't know", "Refused"), ("", "1", "2", "3", "8", ""))
    ('1=1', '2=2', '3=3', "Don't know=8")
    >>> key_labels((1, 2, 3), (), None) == key_labels((0, 1, 2, 3, 4), (), ("", "1", "2", "3", ""))
    True
    """
    if not labels:
        labels = tuple(str(y) for y in scale)
    n = len(scale)
    points = (f"{y}={x}" for y, x in zip(scale, labels[:n], strict=True) if x)
    offered = (f"{o}={x}" for o, x in zip(options, labels[n:], strict=False) if x)
    return (*points, *offered)


def key_format(identity: dict[str, Any] | None) -> str:
    """The key rule's version a stored ``cell_identity`` was keyed by (``""``: none).

    Examples
    --------
    >>> key_format({"key_format": KEY_FORMAT}) == KEY_FORMAT
    True
    >>> key_format({"key_rule": "... KEY_FORMAT = 'xlikert-cell-1' (...)"})
    'xlikert-cell-1'
    """
    if not identity:
        return ""
    if identity.get("key_format"):
        return str(identity["key_format"])
    import re

    found = re.search(r"KEY_FORMAT = '([^']+)'", str(identity.get("key_rule", "")))
    return found.group(1) if found else ""


def model_digest(identity: dict[str, Any], options: dict[str, Any]) -> str:
    """sha256 of a model's identity and the run's number-changing options (:data:`KEY_RULE`)."""
    return hashlib.sha256(_json({"model": identity, "options": options})).hexdigest()


def _sent_digest(sent: Sent) -> str:
    """sha256 of what one prompt sent: token ids (ints) or a request (a JSON object).

    Examples
    --------
    >>> _sent_digest([1, 2, 3]) == _sent_digest(np.array([1, 2, 3], dtype=np.int32))
    True
    """
    if isinstance(sent, dict):
        return hashlib.sha256(b"request:" + _json(sent)).hexdigest()
    ids = np.asarray(sent, dtype="<i8")
    return hashlib.sha256(b"ids:" + ids.tobytes()).hexdigest()


def cell_key(digest: str, labels: Sequence[str], sent: str) -> str:
    """The key of one cell from its model digest, answer labels and sent digest.

    Examples
    --------
    >>> len(cell_key("m" * 64, ["1", "2"], "s" * 64))
    64
    """
    text = "\n".join([KEY_FORMAT, digest, json.dumps(list(labels)), sent])
    return hashlib.sha256(text.encode()).hexdigest()


#: Cells tokenised at a time when their keys are predicted (their ids are not kept).
_PREDICT_BLOCK = 1024


class RunKeys:
    """The keys of a run's cells, model by model.

    Parameters
    ----------
    models
        The run's model entries.
    options
        The run's options.
    prompts
        ``cells -> [(system, user)]`` of the run's flat cells.
    labels
        ``cell -> answer labels`` as the key holds them (:func:`key_labels`).
    battery
        ``cell -> its conversation's cells in the order asked`` (None: isolated); a
        sequentially administered cell's key hashes what its conversation sent
        (every item's token ids, in order), its position and the reading's
        ``tol`` and ``max_passes`` (:data:`SEQUENTIAL_KEY`), and, where its items have
        answers of their own, every item's answer labels (they are written into the
        conversation as its earlier answers).
    level
        ``cell -> its elicitation level`` (None: every cell ``first_token``); a cell of
        another level hashes its level and the settings it reads with its prompt's ids
        (:func:`~xlikert.collect.elicitation.elicitation_sent`).
    options_of
        ``cell -> the options it is read with`` (None: the run's): a ``stated`` cell's
        own instruction, where the prompts carry one, is what its key hashes.
    """

    def __init__(
        self,
        models: Sequence[dict[str, Any]],
        options: CollectOptions,
        prompts: Callable[[Sequence[int]], list[tuple[str, str]]],
        labels: Callable[[int], tuple[str, ...]],
        battery: Callable[[int], Sequence[int] | None] | None = None,
        level: Callable[[int], str] | None = None,
        options_of: Callable[[int], CollectOptions] | None = None,
    ):
        self.models, self.options = list(models), options
        self.prompts, self.labels = prompts, labels
        self.battery = battery
        self.level = level
        self.options_of = options_of
        self._inputs: dict[int, CellInputs | None] = {}
        self._keys: dict[int, dict[int, str]] = {}

    def inputs(self, mi: int) -> CellInputs | None:
        """The model's :class:`CellInputs` (None: its backend has no ``inputs``)."""
        if mi not in self._inputs:
            spec = self.models[mi]
            get = getattr(backend_module(spec), "inputs", None)
            self._inputs[mi] = None if get is None else get(spec, self.options)
        return self._inputs[mi]

    def identity(self, mi: int) -> dict[str, Any] | None:
        """What the model's keys hash (stored as its ``cell_identity``); None: no keys."""
        inputs = self.inputs(mi)
        if inputs is None:
            return None
        return {"model": inputs.identity, "options": numbers_options(self.options),
                "key_rule": KEY_RULE, "key_format": KEY_FORMAT}  # fmt: skip

    def digest(self, mi: int) -> str:
        ident = self.identity(mi)
        return "" if ident is None else model_digest(ident["model"], ident["options"])

    def _keys_of(self, mi: int, cells: Sequence[int], sent: Sequence[Any]) -> list[str]:
        digest = self.digest(mi)
        return [
            cell_key(digest, self.labels(j), _sent_digest(x))
            for j, x in zip(cells, sent, strict=True)
        ]

    def _sent(self, inputs: CellInputs, cells: Sequence[int]) -> list[Any]:
        """What each cell sent; for a sequentially administered cell, its conversation."""
        sent: list[Any] = list(inputs.sent(self.prompts(cells)))
        for n, j in enumerate(cells):
            battery = None if self.battery is None else self.battery(j)
            if battery is not None:
                items = [_plain(x) for x in inputs.sent(self.prompts(battery))]
                sent[n] = {SEQUENTIAL_KEY: {"items": items, "position": list(battery).index(j),
                           "tol": self.options.tol, "max_passes": self.options.max_passes}}  # fmt: skip
                answers = [list(self.labels(b)) for b in battery]
                if any(a != answers[0] for a in answers):  # items with their own answers
                    sent[n][SEQUENTIAL_KEY]["answers"] = answers
            elif self.level is not None and self.level(j) != "first_token":
                from ..elicitation import elicitation_sent

                read = self.options if self.options_of is None else self.options_of(j)
                sent[n] = elicitation_sent(self.level(j), sent[n], read)
        return sent

    def check_spelled(self, mi: int, label_sets: Iterable[tuple[str, ...] | None]) -> None:
        """Refuse, before any model loads, answer labels that model ``mi``'s tokenizer cannot
        spell at all (its inputs' tokenizer: an in-process entry's; a server's has none
        here). Each label set is checked as its answer rule reads it
        (:func:`~xlikert.collect.answers.spellings.answer_rule`), its spellings counted,
        not listed.

        Raises
        ------
        CollectionError
            Naming the model, the tokenizer and the labels no token sequence spells.
        """
        from ..answers.spellings import answer_rule

        prepared = getattr(self.inputs(mi), "prepared", None)
        get = getattr(prepared, "tokenizer", None)
        if get is None:
            return
        tok = get() if callable(get) else get
        name = self.models[mi]["name"]
        for labels in sorted(set(label_sets), key=lambda x: x or ()):
            opts = self.options.replace(where=f"model {name!r}", answer_labels=labels)
            try:
                answer_rule(tok, list(opts.known_scale), labels=opts.labels_by_score,
                            nonsubstantive=opts.nonsubstantive_labels, scripts=opts.numeral_scripts,
                            max_positions=0, walk=True)  # fmt: skip
            except CollectionError as exc:
                raise CollectionError(
                    f"model {name!r}: {exc} (checked before any model loads)"
                ) from None

    def predict(self, mi: int, cells: Sequence[int]) -> dict[int, str]:
        """The keys of ``cells`` of a model before it loads (its tokenizer at most)."""
        known = self._keys.setdefault(mi, {})
        new = [j for j in cells if j not in known]
        inputs = self.inputs(mi)
        for at in range(0, len(new), _PREDICT_BLOCK):
            if inputs is None:  # no keys for this backend
                break
            block = new[at : at + _PREDICT_BLOCK]  # a block at a time: memory flat in cells
            known.update(zip(block, self._keys_of(mi, block, self._sent(inputs, block)),
                             strict=True))  # fmt: skip
        return {j: known[j] for j in cells if j in known}

    def of_result(self, mi: int, result: UnitResult) -> list[str]:
        """The keys of a scored unit's cells, from the token ids the model read (the request
        for a server); keys predicted before must agree (else the reuse was unsound).

        Raises
        ------
        CollectionError
            A predicted key that differs from the one of the ids the model read.
        """
        cells = [int(j) for j in result.placed_cells]
        inputs = self.inputs(mi)
        if inputs is None:
            return [""] * len(cells)
        ids = [str(x) for x in result.data["prompt_token_ids"]]
        # the ids the engine read; for a server or a conversation, what was sent is a
        # function of the prompts
        elicited = self.level is not None and any(self.level(j) != "first_token" for j in cells)
        sent = (
            [decode_token_ids(x) for x in ids]
            if all(ids) and not elicited
            else self._sent(inputs, cells)
        )
        keys = self._keys_of(mi, cells, sent)
        known = self._keys.setdefault(mi, {})
        bad = [n for n, (j, k) in enumerate(zip(cells, keys, strict=True)) if known.get(j, k) != k]
        if bad:
            j = cells[bad[0]]
            raise CollectionError(
                f"model {self.models[mi]['name']!r}: the token ids read for {len(bad)} prompt(s) "
                f"(e.g. {self.prompts([j])[0]!r}) differ from those xlikert predicted from "
                "the tokenizer before loading, which keyed the reuse of earlier cells ("
                f"{_difference(self._sent(inputs, [j])[0], sent[bad[0]])}); this is "
                "a bug in xlikert: please report it (run without --reuse, after moving the "
                "progress folder aside, meanwhile)"
            )
        known.update(zip(cells, keys, strict=True))
        return keys
