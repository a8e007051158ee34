"""What comes back: a server's log-probabilities, read into a row of a unit's results.

In exact mode every valid token's log-probability is known, so the PMF and the
valid mass are exact. In top-k mode only the listed tokens are known: the
observed numbers are stored as they are, with certified intervals
(:func:`xlikert.kernels.readout.topk_intervals`) around them; nothing unobserved is
imputed. The decoding grid is filled where the nucleus provably lies inside the
known tokens (:func:`xlikert.kernels.readout.nucleus_logprobs`), NaN elsewhere.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from ....core.errors import CollectionError
from ....kernels.readout import nucleus_logprobs, scale_mass, topk_intervals, topk_option_intervals
from ...answers.layout import answer_codes
from ...answers.numerals import read_numeral, rule_scripts
from ...answers.numerals import scripts as all_scripts
from ...answers.tokens import ValidTokens
from ...answers.vocabulary import token_text
from ...foreign import Tokenizer
from ...options import CollectOptions
from ...record import UnitResult
from .spec import OpenAISpec

__all__ = [
    "DECODING_RULE",
    "OUT_OF_ORDER",
    "PADDED_LOGPROB",
    "PROTOCOL",
    "Listing",
    "Readout",
    "entries",
    "token_id",
]

#: What the openai backend does in each mode, recorded per model (``collection_protocol``).
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

#: How the openai backend's decoding grid is made, recorded per model (``decoding_rule``).
DECODING_RULE = (
    "xlikert's tie rule (xlikert.kernels.readout.DECODING_TIE_RULE) applied to the tokens the "
    "server listed (and, in exact mode, every valid token), not the full vocabulary: only "
    "temperature 1 is measured, and only for top-p values whose nucleus provably lies inside "
    "the known tokens; every other grid point is NaN (not measured)"
)

#: Listed entries that may stand outside the rank order (the sampled token, listed first).
OUT_OF_ORDER = 1
#: vLLM's floor for a listed log-probability (it writes -inf as -9999): padding, never a rank.
PADDED_LOGPROB = -9999.0

#: A top-k listing: distinct keys (token ids or texts), shown texts, log-probabilities,
#: most probable first.
Listing = tuple[list[Any], list[str], np.ndarray]


def entries(obj: dict, spec: OpenAISpec) -> list[tuple[str, float]]:
    """``(token, logprob)`` of the ``top_logprobs`` at the generated position."""
    try:
        first = obj["choices"][0]["logprobs"]["content"][0]
    except (KeyError, IndexError, TypeError):
        raise CollectionError(
            f"model {spec.name!r}: server {spec.public_url} returns no logprobs "
            "for chat completions (it ignored logprobs=true/top_logprobs); xlikert needs "
            "next-token log-probabilities: use a server that returns them (vLLM, "
            "llama.cpp server, OpenAI) or a local backend"
        ) from None
    out = [(str(e["token"]), float(e["logprob"])) for e in first.get("top_logprobs") or []]
    if not out:
        raise CollectionError(
            f"model {spec.name!r}: server {spec.public_url} returned an empty top_logprobs list"
        )
    return out


def token_id(token: str) -> int | None:
    """The id in vLLM's ``token_id:ID`` form (``return_tokens_as_token_ids``), else None.

    Examples
    --------
    >>> token_id("token_id:42"), token_id("42")
    (42, None)
    """
    if token.startswith("token_id:"):
        try:
            return int(token[len("token_id:") :])
        except ValueError:
            return None
    return None


def _strip_marker(text: str) -> str:
    return text[1:] if text[:1] in (" ", "▁", "Ġ") else text


class Readout:
    """Reads one model's answers: tokens to scores, listings to PMFs and intervals.

    ``ids_ok``: the server names tokens by id (else by text); ``valid``/``tokenizer``:
    the valid tokens and the tokenizer, or None when there is none. An answer's
    *column* is its score's index on the ``score`` axis, or (a non-substantive
    answer) ``len(scale)`` + its option's index on the ``option`` axis.
    """

    def __init__(self, spec: OpenAISpec, options: CollectOptions, mode: str, ids_ok: bool,
                 valid: ValidTokens | None = None, tokenizer: Tokenizer = None):  # fmt: skip
        self.spec, self.options, self.mode, self.ids_ok = spec, options, mode, ids_ok
        self.valid, self.tokenizer = valid, tokenizer
        self.scale = list(options.known_scale)
        self.n_options = len(options.nonsubstantive)
        codes, labels, layout = answer_codes(
            self.scale, options.labels_by_score, options.nonsubstantive_labels
        )
        column = dict(zip(codes, layout.columns if layout else range(len(codes)), strict=True))
        self.offered = layout.offered if layout else np.zeros(self.n_options, dtype=bool)
        self._by_text = {labels[c]: column[c] for c in codes}
        # a label that is a number is answered by that number in the scripts read
        # (xlikert.collect.answers.numerals): by value, in the valid tokens' scripts
        numbers = {c: read_numeral(labels[c]) for c in codes}
        self._by_number = {n[0]: column[c] for c, n in numbers.items() if n is not None}
        self._scripts = (
            set(valid.numeral_scripts)
            if valid is not None
            else set(rule_scripts(options.numerals, labels.values()) or all_scripts())
        )
        self._by_id = (
            {i: column[y] for i, y in zip(valid.ids, valid.scores, strict=True)} if valid else {}
        )
        self._script_by_id = (
            dict(zip(valid.ids, valid.scripts, strict=True)) if valid is not None else {}
        )
        self.rtol = spec.logprob_rtol if mode == "topk" else 0.0

    def score_of(self, key: int | str) -> int:
        """Column of a listed token (by id with ids, else by text), -1 if not valid."""
        if self.ids_ok:
            return self._by_id.get(key, -1) if isinstance(key, int) else -1
        text = _strip_marker(str(key))
        if text in self._by_text:
            return self._by_text[text]
        number = read_numeral(text)
        if number is not None and number[1] in self._scripts:
            return self._by_number.get(number[0], -1)
        return -1

    def listing(self, obj: dict) -> Listing:
        """Distinct listed tokens (key, shown text, log-probability), most probable first."""
        seen: dict[Any, tuple[str, float]] = {}
        listed = entries(obj, self.spec)
        if any(lp <= PADDED_LOGPROB for _, lp in listed):
            raise CollectionError(
                f"model {self.spec.name!r}: server {self.spec.public_url} answered a top-k "
                "request with padding (log-probabilities of -9999, i.e. -inf), not the k most "
                "probable tokens: vLLM does this when a request with logprob_token_ids is "
                "batched with it. xlikert never sends the two kinds together; is another "
                "client sending logprob_token_ids to this server?"
            )
        for t, lp in listed:
            i = token_id(t) if self.ids_ok else None
            if self.ids_ok and i is None:
                raise CollectionError(f"model {self.spec.name!r}: unexpected token {t!r}")
            key = i if i is not None else t
            shown = token_text(self.tokenizer, i) if i is not None else t
            seen.setdefault(key, (shown, lp))  # a sampled token may be listed twice
        keys = sorted(seen, key=lambda k: -seen[k][1])
        return keys, [seen[k][0] for k in keys], np.array([seen[k][1] for k in keys])

    def exact_valid(self) -> ValidTokens:
        """The valid tokens, which exact mode reads by id (it needs the tokenizer)."""
        if self.valid is None:
            raise CollectionError(
                f"model {self.spec.name!r}: exact mode reads the valid tokens by id, and the "
                "entry has no tokenizer; give its `tokenizer`"
            )
        return self.valid

    def valid_logprobs(self, obj: dict) -> dict[int, float]:
        """Exact mode: the log-probability of every valid token id (``logprob_token_ids``)."""
        got = {i: lp for t, lp in entries(obj, self.spec) if (i := token_id(t)) is not None}
        missing = [i for i in self.exact_valid().ids if i not in got]
        if missing:
            raise CollectionError(
                f"model {self.spec.name!r}: the server stopped returning valid ids "
                f"{missing[:5]} (logprob_token_ids)"
            )
        return got

    def unlisted_valid(self, keys: list[Any]) -> np.ndarray | None:
        """Valid tokens of each score that the list does not hold (None without a tokenizer).

        By id when the server returns ids. By text otherwise: a valid token counts as
        listed when its text is listed and no other valid token has that text (tokens
        of the same text are indistinguishable in a text listing, so both count as
        unlisted: the bound stays valid, only wider).
        """
        if self.valid is None:
            return None
        listed = set(keys)
        cols = [self._by_id[i] for i in self.valid.ids]
        if self.ids_ok:
            gone = [c for i, c in zip(self.valid.ids, cols, strict=True) if i not in listed]
        else:
            texts = [self.tokenizer.decode([i]) for i in self.valid.ids]
            gone = [c for t, c in zip(texts, cols, strict=True)
                    if t not in listed or texts.count(t) > 1]  # fmt: skip
        return np.bincount(
            np.asarray(gone, dtype=np.int64), minlength=len(self.scale) + self.n_options
        )

    def write_listing(self, res: UnitResult, r: int, listing: Listing) -> None:
        """Prompt ``r``'s top-k tokens, ids (when the server names them) and
        log-probabilities, the ``top_k`` most probable of the listing."""
        keys, shown, lps = listing
        n = min(self.options.top_k, len(keys))
        res.data["topk_token"][r, :n] = shown[:n]
        if self.ids_ok:
            res.data["topk_token_id"][r, :n] = np.asarray(keys[:n], dtype=np.int64)
        res.data["topk_logprob"][r, :n] = lps[:n]

    def fill(self, res: UnitResult, r: int, msgs: list, listing: Listing,
             got: dict[int, float] | None) -> None:  # fmt: skip
        """Write prompt ``r``'s numbers from its listing and (exact mode) its valid ids."""
        S = len(self.scale)
        keys, _, lps = listing
        cols = np.array([self.score_of(k) for k in keys], dtype=np.int64)
        self.write_listing(res, r, listing)
        counts = self.unlisted_valid(keys)
        scores = np.where(cols < S, cols, -1)
        b = topk_intervals(np.exp(lps), scores, S, None if counts is None else counts[:S],
                           out_of_order=OUT_OF_ORDER, rtol=self.rtol)  # fmt: skip
        if self.n_options:
            b.update(topk_option_intervals(
                np.exp(lps), np.where(cols >= S, cols - S, -1), self.n_options,
                None if counts is None else counts[S:], out_of_order=OUT_OF_ORDER,
                rtol=self.rtol,
            ))  # fmt: skip
        if got is not None:
            # every valid token exactly; the listed ones besides, for the nucleus threshold
            ids = list(self.exact_valid().ids)
            extra = [k for k in keys if k not in got]
            kn_lps = np.array([got[i] for i in ids] + [lps[keys.index(k)] for k in extra])
            kn_cols = np.array([self.score_of(k) for k in ids + extra], dtype=np.int64)
            mass = scale_mass(np.exp(kn_lps), kn_cols, S + self.n_options)
            res.data["valid_mass"][r] = mass[:S].sum()
            res.data["pmf"][r] = mass[:S] / mass[:S].sum()
            if "script_mass" in res.data:
                res.data["script_mass"][r] = self._script_mass(got)
            b["nonsubstantive_mass"] = mass[S:]
            kn_scores = np.where(kn_cols < S, kn_cols, -1)
        else:
            kn_lps, kn_scores = lps, scores
            for key in ("pmf", "valid_mass", "pmf_lower", "pmf_upper", "valid_mass_lower",
                        "valid_mass_upper"):  # fmt: skip
                res.data[key][r] = b[key]
            if "script_mass_lower" in res.data:
                self._script_intervals(res, r, keys, lps)
        for key in ("nonsubstantive_mass", "nonsubstantive_mass_lower",
                    "nonsubstantive_mass_upper"):  # fmt: skip
            if key in res.data:  # NaN where the item does not offer the option
                res.data[key][r] = np.where(self.offered, b.get(key, b["nonsubstantive_mass"]),
                                            np.nan)  # fmt: skip
        self._fill_decoding(res, r, kn_lps, kn_scores, b["unlisted_max"], counts)
        res.data["prompt_text"][r] = json.dumps(msgs, ensure_ascii=False)

    def _script_mass(self, got: dict[int, float]) -> np.ndarray:
        """Exact mode: the points' mass per numeral script (NaN: a script not read)."""
        names = all_scripts()
        out = np.full(len(names), np.nan)
        valid = self.exact_valid()
        if not valid.numeral_scripts:
            return out
        index = {c: i for i, c in enumerate(names)}
        out[[index[c] for c in valid.numeral_scripts]] = 0.0
        S = len(self.scale)
        for i, c in zip(valid.ids, valid.scripts, strict=True):
            if c and self._by_id[i] < S:
                out[index[c]] += float(np.exp(got[i]))
        return out

    def _script_of(self, key: int | str) -> str | None:
        """The numeral script of a listed answer to a point of the scale (None: another
        token, or a label that is not a number)."""
        if not 0 <= self.score_of(key) < len(self.scale):
            return None
        if self.ids_ok:
            return self._script_by_id.get(key) or None if isinstance(key, int) else None
        number = read_numeral(_strip_marker(str(key)))
        return number[1] if number is not None else None

    def _script_intervals(self, res: UnitResult, r: int, keys: list, lps: np.ndarray) -> None:
        """Top-k mode: each script's listed mass and its certified interval (as a
        non-substantive answer's, :func:`topk_option_intervals`); NaN for a script the
        rule does not read."""
        names = all_scripts()
        index = {c: i for i, c in enumerate(names)}
        read = [c for c in names if c in self._scripts]
        listed = np.array([index.get(self._script_of(k) or "", -1) for k in keys])
        unlisted = None
        if self.valid is not None:  # the tokenizer's point tokens of each script not listed
            held = set(keys) if self.ids_ok else {_strip_marker(str(k)) for k in keys}
            unlisted = np.zeros(len(names))
            for i, c in zip(self.valid.ids, self.valid.scripts, strict=True):
                if c and self._by_id[i] < len(self.scale):
                    text = i if self.ids_ok else _strip_marker(token_text(self.tokenizer, i))
                    unlisted[index[c]] += text not in held
        # a script's answers are a class of answers, bounded as an option's answers are
        b = topk_option_intervals(np.exp(lps), listed, len(names), unlisted,
                                  out_of_order=OUT_OF_ORDER, rtol=self.rtol)  # fmt: skip
        off = np.array([c not in read for c in names])
        res.data["script_mass"][r] = np.where(off, np.nan, b["nonsubstantive_mass"])
        for key in ("lower", "upper"):
            res.data[f"script_mass_{key}"][r] = np.where(
                off, np.nan, b[f"nonsubstantive_mass_{key}"]
            )

    def _fill_decoding(self, res: UnitResult, r: int, lps: np.ndarray, scores: np.ndarray,
                       unlisted_max: np.ndarray | float,
                       counts: np.ndarray | None) -> None:  # fmt: skip
        """The decoding grid: temperature 1, where the nucleus provably lies in the known tokens."""
        opts = self.options
        need = np.flatnonzero(scores >= 0)
        q = nucleus_logprobs(lps, need, opts.temperatures, opts.top_ps, unlisted_max=unlisted_max)
        with np.errstate(invalid="ignore"):
            g = scale_mass(np.exp(q), scores[need], len(self.scale))  # (T, P, S)
        gm = g.sum(-1)
        if self.mode != "exact" and (
            counts is None or counts[: len(self.scale)].any() or self.rtol > 0
        ):
            # top_p = 1 keeps the unlisted valid tokens, whose mass is unknown: not measured
            gm = np.where(np.asarray(opts.top_ps)[None, :] >= 1, np.nan, gm)
        res.data["decoding_valid_mass"][r] = gm
        with np.errstate(invalid="ignore"):
            res.data["decoding_pmf"][r] = np.where(gm[..., None] > 0, g / gm[..., None], np.nan)
