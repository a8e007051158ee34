"""The answer spellings: every token sequence that spells a scale value, and the readout.

:class:`AnswerSequences` is the answer rule every backend applies; the spellings are
found by :mod:`xlikert.collect.answers.spellings` (several tokens, a split space) or are the
valid tokens alone (:func:`one_token_answers`; :mod:`xlikert.collect.answers.tokens`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...core.errors import CollectionError
from ...kernels.readout import scale_mass
from ..foreign import Tokenizer
from .layout import AnswerLayout
from .numerals import scripts as all_scripts
from .tokens import ValidTokens
from .vocabulary import token_text

__all__ = ["AnswerSequences", "one_token_answers"]


@dataclass(frozen=True)
class AnswerSequences:
    """Every token spelling of every scale value: the answer rule every backend applies.

    ``sequences[i]`` spells ``scores[i]``; ``continuation`` are the ids of tokens
    that would extend a number (text starting with a digit, no marker): an answer
    counts only when the token after it is not one of them. ``continuation=None``
    means no such check (the one-token and split-space rules: an answer is read
    off its tokens).

    A backend needs the next-token log-probabilities of the tokens :attr:`need`
    after the prompt followed by each of the :attr:`contexts` (``()`` is the
    prompt itself); :meth:`masses` turns them into the probability of each
    scale value.

    ``layout`` (None: the scale is the results' ``score`` axis) places an item's
    answer codes in a results row: its points on the file's ``score`` axis, its
    non-substantive options on the ``option`` axis (:mod:`xlikert.collect.answers.layout`).
    """

    sequences: tuple[tuple[int, ...], ...]
    scores: tuple[int, ...]
    surfaces: tuple[tuple[str, ...], ...]
    continuation: tuple[int, ...] | None
    scale: tuple[int, ...]
    layout: AnswerLayout | None = None
    #: Each spelling's numeral script (``""``: a word); empty: not recorded.
    scripts: tuple[str, ...] = ()
    #: The scripts the numeral rule read (:mod:`xlikert.collect.answers.numerals`).
    numeral_scripts: tuple[str, ...] = ()

    def as_records(self, tokenizer: Tokenizer = None) -> list[dict[str, Any]]:
        """``[{"ids": [...], "tokens": [...], "score": ...}, ...]`` for provenance
        (``tokens``: their text with ``tokenizer``, else the vocabulary strings)."""
        return [
            {
                "ids": list(i),
                "tokens": list(t) if tokenizer is None else [token_text(tokenizer, k) for k in i],
                "score": y,
            }
            for i, t, y in zip(self.sequences, self.surfaces, self.scores, strict=True)
        ]

    @property
    def is_one_token(self) -> bool:
        """True when every answer is one token read right after the prompt."""
        return self.continuation is None and all(len(s) == 1 for s in self.sequences)

    @property
    def need(self) -> tuple[int, ...]:
        """Token ids whose probabilities enter some spelling of an answer."""
        return tuple(sorted({t for seq in self.sequences for t in seq}))

    @property
    def pooled(self) -> tuple[int, ...] | None:
        """The continuation tokens, read as one summed probability (None: no stop check).

        A backend reads them with ``pooled=`` (:func:`~xlikert.kernels.readout.next_token_readout`):
        one column after those of :attr:`need`, the log of their summed probability. A
        word's continuations are a third of a vocabulary; summed where the logits are,
        they cost one column, not thousands.
        """
        return tuple(sorted(self.continuation)) if self.continuation else None

    @property
    def width(self) -> int:
        """Columns of a readout row: :attr:`need`, then one for :attr:`pooled`."""
        return len(self.need) + (self.pooled is not None)

    @property
    def contexts(self) -> tuple[tuple[int, ...], ...]:
        """Token sequences appended to the prompt before a next-token read.

        Every proper prefix of a spelling (its tokens are read there) and, with a
        stop check, every whole spelling (the stop probability is read there).
        """
        extra = 1 if self.continuation is not None else 0
        ctx = {s[:k] for s in self.sequences for k in range(len(s) + extra)}
        return tuple(sorted(ctx, key=lambda c: (len(c), c)))

    @property
    def leaves(self) -> tuple[tuple[int, ...], ...]:
        """Contexts that no other context extends: one teacher-forced row each."""
        ctx = self.contexts
        return tuple(c for c in ctx if not any(len(d) > len(c) and d[: len(c)] == c for d in ctx))

    def spelling_masses(self, logq: np.ndarray) -> np.ndarray:
        """Probability of each spelling (``(..., len(sequences))``), see :meth:`masses`."""
        logq = np.asarray(logq, dtype=np.float64)
        ctx = {c: i for i, c in enumerate(self.contexts)}
        col = {t: j for j, t in enumerate(self.need)}
        if logq.shape[-2:] != (len(ctx), self.width):
            raise CollectionError(
                f"answer log-probabilities have shape {logq.shape[-2:]}, expected "
                f"(contexts, need + pooled) = {(len(ctx), self.width)}"
            )
        if self.continuation is not None:  # P(next token does not continue the answer)
            with np.errstate(divide="ignore"):
                going = np.exp(logq[..., -1]) if self.pooled else np.zeros(logq.shape[:-1])
                log_stop = np.log1p(-np.minimum(going, 1.0))
        cols = []
        for seq in self.sequences:
            lp = sum(logq[..., ctx[seq[:k]], col[t]] for k, t in enumerate(seq))
            if self.continuation is not None:
                lp = lp + log_stop[..., ctx[seq]]
            cols.append(np.exp(lp))
        return np.stack(cols, axis=-1)

    def masses(self, logq: np.ndarray) -> np.ndarray:
        """Probability of each scale value from next-token log-probabilities.

        Parameters
        ----------
        logq : np.ndarray
            ``(..., len(contexts), width)``: log-probability of token ``need[j]``
            after the prompt followed by ``contexts[c]`` (``-inf`` for 0, NaN where
            unknown), then (with :attr:`pooled`) of any continuation token.

        Returns
        -------
        np.ndarray
            ``(..., len(scale))``: P(y) = sum over the spellings of y of the product
            of their tokens' conditional probabilities (times the probability of
            stopping after them, with a stop check), summed per scale value by
            :func:`xlikert.kernels.readout.scale_mass`. The total is the valid mass.

        Examples
        --------
        >>> ans = AnswerSequences(((5,), (9, 6)), (1, 2), (("1",), ("▁", "2")), None, (1, 2))
        >>> ans.contexts, ans.need
        (((), (9,)), (5, 6, 9))
        >>> logq = np.log([[[0.2, 0.1, 0.5], [1e-300, 0.6, 1e-300]]])
        >>> ans.masses(logq)
        array([[0.2, 0.3]])
        """
        score = np.array([self.scale.index(y) for y in self.scores])
        return scale_mass(self.spelling_masses(logq), score, len(self.scale))

    def script_mass(self, logq: np.ndarray) -> np.ndarray:
        """The points' mass per numeral script (the results' ``script_mass``).

        Parameters
        ----------
        logq : np.ndarray
            As for :meth:`masses`.

        Returns
        -------
        np.ndarray
            ``(..., len(numerals.scripts()))``: the summed probability of the spellings
            of the item's points written in each script; NaN for a script the rule did
            not read (:attr:`numeral_scripts`). Over the scripts read it sums to the
            valid mass when every point's label is a number.

        Examples
        --------
        >>> ans = AnswerSequences(((5,), (7,)), (1, 1), (("1",), ("１",)), None, (1, 2),
        ...                       scripts=("ascii", "fullwidth"),
        ...                       numeral_scripts=("ascii", "fullwidth"))
        >>> m = ans.script_mass(np.log([[[0.25, 0.5]]]))
        >>> m[0, :1].tolist(), float(m[0, all_scripts().index("fullwidth")])
        ([0.25], 0.5)
        """
        names = all_scripts()
        logq = np.asarray(logq, dtype=np.float64)
        out = np.full((*logq.shape[:-2], len(names)), np.nan)
        if not self.numeral_scripts:
            return out
        index = {s: i for i, s in enumerate(names)}
        read = [index[s] for s in self.numeral_scripts]
        out[..., read] = 0.0
        points = self._points()
        keep = [k for k, (y, c) in enumerate(zip(self.scores, self.scripts, strict=True))
                if c and y in points]  # fmt: skip
        if keep:
            p = self.spelling_masses(logq)[..., keep]
            col = np.array([index[self.scripts[k]] for k in keep])
            out[..., read] = scale_mass(p, col, len(names))[..., read]
        return out

    def _points(self) -> set[int]:
        """The codes that are the item's points (not a non-substantive option)."""
        if self.layout is None:
            return set(self.scale)
        return {y for y, c in zip(self.scale, self.layout.columns, strict=True)
                if c < self.layout.n_scores}  # fmt: skip

    def readout(self, raw: np.ndarray, grid: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """Item PMFs, valid masses and the decoding grid from answer log-probabilities.

        Parameters
        ----------
        raw : np.ndarray
            ``(B, contexts, need)`` raw log-probabilities (temperature 1, no nucleus).
        grid : np.ndarray, optional
            ``(B, T, P, contexts, need)`` the same under every decoding setting
            (:func:`xlikert.kernels.readout.nucleus_logprobs`); NaN where not measured.

        Returns
        -------
        dict
            ``pmf (B, S)``, ``valid_mass (B,)`` and, with ``grid``,
            ``decoding_pmf (B, T, P, S)`` and ``decoding_valid_mass (B, T, P)``
            (NaN PMF where no valid answer is in the nucleus). With a
            :attr:`layout`, ``S`` is the file's ``score`` axis, ``valid_mass`` the
            item's points' mass, and ``nonsubstantive_mass (B, O)`` is added when
            the file has non-substantive options
            (:meth:`~xlikert.collect.answers.layout.AnswerLayout.readout`).
        """
        if self.layout is not None:
            out = self.layout.readout(self.masses(raw), None if grid is None else self.masses(grid))
            out["script_mass"] = self.script_mass(raw)
            return out
        out = {"script_mass": self.script_mass(raw)}
        with np.errstate(invalid="ignore", divide="ignore"):
            m = self.masses(raw)
            out["valid_mass"] = m.sum(-1)
            out["pmf"] = m / out["valid_mass"][..., None]
            if grid is not None:
                g = self.masses(grid)
                gm = g.sum(-1)
                out["decoding_valid_mass"] = gm
                out["decoding_pmf"] = np.where(gm[..., None] > 0, g / gm[..., None], np.nan)
        return out


def one_token_answers(valid: ValidTokens) -> AnswerSequences:
    """The one-token rule as answer spellings: each valid token alone, no stop check.

    Examples
    --------
    >>> vt = ValidTokens((16, 17), ("1", "2"), (1, 2), (1, 2))
    >>> one_token_answers(vt).contexts
    ((),)
    """
    return AnswerSequences(
        sequences=tuple((i,) for i in valid.ids),
        scores=valid.scores,
        surfaces=tuple((s,) for s in valid.surfaces),
        continuation=None,
        scale=valid.scale,
        scripts=valid.scripts,
        numeral_scripts=valid.numeral_scripts,
    )
