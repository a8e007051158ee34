"""Every elicitation level resumes, and is reused by its cell key, like every run; the
stricter parsing rule (``answer_parse = "standalone"``) is part of the key of the cells it
parses and reads what the default rule misreads."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

pytest.importorskip("torch")
pytest.importorskip("transformers")

from support.results import without_session
from support.tiny import save_answering_tiny, tiny_prompts

from xlikert.collect import collect
from xlikert.collect.elicitation import parse_answer
from xlikert.core.errors import CollectionError

KW = {"progress": False, "batch_size": 4, "chunk_size": 2, "top_k": 3, "reply_tokens": 3,
      "own_words_tol": 0.05, "own_words_max_passes": 12}  # fmt: skip
LEVELS = ["first_token", "prefix", "greedy", "own_words"]


@pytest.fixture(scope="module")
def spec(tmp_path_factory) -> list[dict]:
    return [{"name": "tiny", "source": str(save_answering_tiny(tmp_path_factory.mktemp("er")
                                                                / "model"))}]  # fmt: skip


def prompts() -> xr.Dataset:
    return tiny_prompts(n_targets=1, n_items=2).expand_dims(elicitation=LEVELS)


@pytest.fixture(scope="module")
def clean(spec, tmp_path_factory):
    out = tmp_path_factory.mktemp("clean") / "c.nc"
    collect(prompts(), spec, out, **KW)
    return out


def test_every_level_resumes_to_the_clean_file_and_is_reused_by_its_key(spec, clean, tmp_path):
    out = tmp_path / "r.nc"

    def stop(done, total):
        if done == 2:  # two of the four levels' units saved
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        collect(prompts(), spec, out, on_unit=stop, **KW)
    assert not out.exists() and len(list((tmp_path / "r.nc.partial").glob("m*-u*.npz"))) == 2
    collect(prompts(), spec, out, **KW)
    xr.testing.assert_identical(without_session(out), without_session(clean))
    # every cell of every level found by its key in the clean file, and copied
    again = collect(prompts(), spec, tmp_path / "again.nc", reuse=[clean], **KW)
    assert int(again.attrs["cells_reused"]) == again.cell_key.size == 8
    for v in ("pmf", "valid_mass", "no_answer_mass", "elicitation_error", "reply_answer"):
        np.testing.assert_array_equal(again[v].values, without_session(clean)[v].values)


def test_the_standalone_rule_is_in_the_key_of_the_cells_it_parses(spec, clean, tmp_path):
    levels = ["first_token", "prefix", "greedy"]
    p = prompts().sel(elicitation=levels)
    strict = collect(p, spec, tmp_path / "s.nc", reuse=[clean], answer_parse="standalone", **KW)
    reused = (strict.reused_from != "").sel(model="tiny")
    assert reused.sel(elicitation=["first_token", "prefix"]).all()
    assert not reused.sel(elicitation="greedy").any()
    assert strict.attrs["answer_parse"] == "standalone"
    assert strict.attrs["answer_parse_rule"].startswith("the answer of a reply is the first")
    # where the default rule's answer token stands alone, both rules read the same answer
    base = xr.open_dataset(clean).load().sel(model="tiny", elicitation="greedy")
    g = strict.sel(model="tiny", elicitation="greedy")
    same = (base.reply_token_ids == g.reply_token_ids).values
    assert same.all()  # the reply itself does not depend on the rule
    for cell in zip(*np.nonzero((base.reply_answered == 1).values), strict=True):
        pos_base, pos = int(base.reply_answer_position.values[cell]), \
            int(g.reply_answer_position.values[cell])  # fmt: skip
        assert pos == -1 or pos >= pos_base
    # own_words reads each answer at its token: the stricter rule is refused there, by name
    with pytest.raises(CollectionError, match=r"answer_parse = 'standalone'.*own_words"):
        collect(prompts(), spec, answer_parse="standalone", **KW)


@pytest.mark.parametrize(
    ("texts", "first", "standalone"),
    [
        (["On", " a", " scale", " of", " 1", "-", "7", ",", " I", " say", " 5", "."], 1, 5),
        (["On", " a", " scale", " from", " 1", " to", " 7", ":", " 6"], 1, 6),
        ([" 5", " -", " Strongly", " agree"], 5, 5),
        (["Q", "1", ":", " 3"], 1, 3),
        ([" 1", "st", " choice", ":", " 2"], 1, 2),
        ([" 1", "/", "7", "?", " No", ",", " 4"], 1, 4),
        ([" 1", ".", "5"], 1, None),
        (["I", " would", " rather", " not"], None, None),
    ],
)
def test_what_the_default_rule_misreads_the_standalone_rule_reads(texts, first, standalone):
    digits = {str(d): d for d in range(1, 8)}
    score = {n: digits[t.strip()] for n, t in enumerate(texts) if t.strip() in digits}
    ids = list(range(len(texts)))
    got = parse_answer(ids, score, texts=texts)
    assert (got[1] if got else None) == first
    got = parse_answer(ids, score, texts=texts, rule="standalone")
    assert (got[1] if got else None) == standalone
