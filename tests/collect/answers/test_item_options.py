"""Each item read on its own options: its points, its non-substantive answers, word labels.

A tiny random-weight model (:mod:`support.tiny`, one token per character) answers the
survey of :mod:`support.survey`; every number is checked against plain forward passes of
the stored token ids, written here without xlikert's readout.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import torch
from support.fake_server import FakeServer
from support.survey import (
    GERMAN,
    GERMAN_USER,
    IN_TWO_LANGUAGES,
    SURVEY,
    german_by_hand,
    survey_experiment,
)
from support.tiny import save_tiny

from xlikert.collect import collect, read_sequence
from xlikert.collect.answers.layout import AnswerLayout, answer_codes
from xlikert.core.errors import AnswerLabelError, CollectionError, LabelMappingError
from xlikert.core.io import open_results

MARKERS = (" ", "▁", "Ġ")
FORMAT = '[factors.fmt]\nkind = "format"\nlevels = ["original", "letters"]\n'


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return save_tiny(tmp_path_factory.mktemp("items") / "model", seed=2)


@pytest.fixture(scope="module")
def prompts(tmp_path_factory):
    return survey_experiment(tmp_path_factory.mktemp("survey"), FORMAT).build_prompts()


@pytest.fixture(scope="module")
def collected(tiny_dir, prompts, tmp_path_factory):
    out = tmp_path_factory.mktemp("res") / "results.nc"
    ds = collect(prompts, [{"name": "t", "source": str(tiny_dir)}], out, progress=False,
                 batch_size=4, chunk_size=4)  # fmt: skip
    return ds, out


@pytest.fixture(scope="module")
def reference(tiny_dir):
    """Next-token probabilities after a token sequence: a plain transformers forward pass."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_dir, dtype=torch.float32).eval()

    def probs(ids) -> np.ndarray:
        with torch.no_grad():
            z = model(torch.tensor([list(ids)])).logits[0].double()
        return torch.softmax(z, -1).numpy()  # (positions, vocab)

    return tok, probs


def _vocab(tok):
    special = set(tok.all_special_ids)
    return {i: t for t, i in tok.get_vocab().items() if i not in special}


def one_token_mass(tok, probs, ids, label: str) -> float:
    """The one-token rule with a split leading space, written plainly: a token whose text is
    the label with at most one leading marker, or a bare space token then the label."""
    vocab = _vocab(tok)
    p0 = probs(ids)[-1]
    mass = sum(
        p0[i] for i, t in vocab.items() if t == label or (t[:1] in MARKERS and t[1:] == label)
    )
    for s in (i for i, t in vocab.items() if t == " "):
        p1 = probs([*ids, s])[-1]
        mass += p0[s] * sum(p1[i] for i, t in vocab.items() if t == label)
    return float(mass)


def word_mass(tok, probs, ids, label: str) -> float:
    """The multi-token rule for a word, written plainly: every spelling of the label by the
    tiny vocabulary (a leading bare space token allowed), each followed by a token whose text
    does not start with a letter, digit or '_'."""
    vocab = _vocab(tok)
    # a marker ("Ġ5" is " 5") is a space: such a token does not go on with the word
    goes_on = np.zeros(len(tok), dtype=bool)
    for i, t in vocab.items():
        goes_on[i] = t[:1] not in MARKERS and (t[:1].isalnum() or t[:1] == "_")

    def spell(rest: str, first: bool):
        if not rest:
            yield ()
            return
        for i, t in vocab.items():
            body = t[1:] if first and t[:1] in MARKERS and len(t) > 1 else t
            if body and rest.startswith(body):
                yield from (((i, *s)) for s in spell(rest[len(body) :], False))

    spellings = list(spell(label, True))
    spellings += [(s, *sp) for s in (i for i, t in vocab.items() if t == " ") for sp in spellings]
    total = 0.0
    for seq in set(spellings):
        p = probs([*ids, *seq])[len(ids) - 1 :]  # the next token after each prefix
        lp = sum(np.log(p[k, t]) for k, t in enumerate(seq))
        total += float(np.exp(lp) * (1.0 - p[len(seq), goes_on].sum()))
    return total


def test_each_items_numbers_equal_independent_passes(collected, reference, prompts):
    ds, _ = collected
    tok, probs = reference
    word_items = {"vote"}
    for fmt in ("original", "letters"):
        for item in ("self", "tv", "trust", "vote"):
            cell = ds.sel(model="t", party="Republican", fmt=fmt, item=item)
            ids = read_sequence(ds, model="t", party="Republican", fmt=fmt, item=item).ids
            lab = prompts.answer_label.sel(fmt=fmt, item=item)
            opt = prompts.option_label.sel(fmt=fmt, item=item)
            read = word_mass if (item in word_items and fmt == "original") else one_token_mass
            points = {int(y): read(tok, probs, ids, str(x))
                      for y, x in zip(lab.score.values, lab.values, strict=True) if x}  # fmt: skip
            options = {str(o): read(tok, probs, ids, str(x))
                       for o, x in zip(opt.option.values, opt.values, strict=True) if x}  # fmt: skip
            valid = sum(points.values())
            where = f"{fmt}/{item}"
            np.testing.assert_allclose(float(cell.valid_mass), valid, rtol=1e-5, err_msg=where)
            want = np.array([points.get(int(y), 0.0) / valid for y in ds.score.values])
            np.testing.assert_allclose(cell.pmf.values, want, atol=1e-6, err_msg=where)
            for o in ds.option.values:
                got = float(cell.nonsubstantive_mass.sel(option=o))
                if o in options:
                    np.testing.assert_allclose(got, options[o], rtol=1e-5, err_msg=f"{where}/{o}")
                else:
                    assert np.isnan(got), f"{where}/{o}: not offered, so not measured"
            failure = 1 - float(cell.valid_mass) - float(np.nansum(cell.nonsubstantive_mass))
            assert failure >= -1e-9


def test_the_file_records_each_items_options_and_round_trips(collected, prompts):
    ds, out = collected
    back = open_results(out)
    for d in (ds, back):
        assert d.score_min.values.tolist() == [1, 0, 1, 0]
        assert d.nominal.values.tolist() == [False, False, False, True]
        assert d.nonsubstantive_mass.dims == ("model", "party", "fmt", "item", "option")
        assert d.answer_label.dims == ("fmt", "item", "score")
        assert d.option_label.sel(fmt="letters", item="self").values.tolist() == ["H", ""]
    # zero mass off each item's support, and a PMF on it
    off = (ds.score < ds.score_min) | (ds.score > ds.score_max)
    assert float(ds.pmf.where(off).max()) == 0.0
    np.testing.assert_allclose(ds.pmf.sum("score"), 1.0, rtol=1e-12)
    np.testing.assert_array_equal(back.nonsubstantive_mass.values, ds.nonsubstantive_mass.values)
    rules = ds.likert.attrs["models"]["t"]["valid_tokens_by_labels"]
    assert any("Clinton" in k for k in rules)


def test_server_backend_reads_each_items_options(tiny_dir, tmp_path):
    """The OpenAI-compatible backend (one-token answers): exact mode equals the in-process
    one-token rule item by item, options included; top-k bounds hold the truth."""
    one_token = SURVEY.replace('answers = "labels"', 'answers = "letters"')
    prompts = survey_experiment(tmp_path, instrument=one_token).build_prompts()
    local = collect(prompts, [{"name": "m", "source": str(tiny_dir)}], progress=False,
                    split_space=False)  # fmt: skip
    srv = FakeServer(tiny_dir)
    try:
        entry = {"name": "m", "source": "openai:tiny", "base_url": srv.url, "backoff": 0.01,
                 "timeout": 30, "tokenizer": str(tiny_dir)}  # fmt: skip
        exact = collect(prompts, [entry], progress=False, top_k=6)
        topk = collect(prompts, [{**entry, "mode": "topk"}], progress=False, top_k=6)
    finally:
        srv.close()
    for v in ("pmf", "valid_mass", "nonsubstantive_mass"):
        np.testing.assert_allclose(exact[v], local[v], rtol=1e-5, atol=1e-7, err_msg=v)
    eps = 1e-9
    for v in ("pmf", "valid_mass", "nonsubstantive_mass"):
        lo, hi = topk[f"{v}_lower"], topk[f"{v}_upper"]
        ok = local[v].notnull()
        assert bool((lo - eps <= local[v]).where(ok, True).all()), v
        assert bool((local[v] <= hi + eps).where(ok, True).all()), v
    assert bool(topk.nonsubstantive_mass_lower.sel(item="tv").isnull().all())  # not offered
    assert float((topk.nonsubstantive_mass_upper - topk.nonsubstantive_mass_lower).max()) > 0


def test_server_backend_refuses_word_labels_by_name(tiny_dir, tmp_path):
    prompts = survey_experiment(tmp_path).build_prompts()
    srv = FakeServer(tiny_dir)
    try:
        entry = {"name": "m", "source": "openai:tiny", "base_url": srv.url, "backoff": 0.01,
                 "timeout": 30, "tokenizer": str(tiny_dir)}  # fmt: skip
        with pytest.raises(AnswerLabelError, match="Clinton"):
            collect(prompts, [entry], progress=False, top_k=6)
    finally:
        srv.close()


def test_a_cell_read_with_other_options_is_not_reused(tiny_dir, tmp_path):
    """Identical prompts whose "Don't know" is answered otherwise (code 9 for 8), or is
    another option (Refused for Don't know): the item offering it is read again, the other
    items are copied; the keys hold each cell's option names and labels."""
    texts = {"a": SURVEY, "b": SURVEY.replace("code = 8", "code = 9"),
             "c": SURVEY.replace('label = "Don\'t know", code = 8', 'label = "Refused", code = 8')}  # fmt: skip
    prompts = {}
    for k, text in texts.items():
        (tmp_path / k).mkdir()
        prompts[k] = survey_experiment(tmp_path / k, instrument=text).build_prompts()
    # An experiment file must show every item's options (the parser refuses one that does
    # not), so the identical prompts are made by hand, as a prompts Dataset may be: the
    # texts of "a" under the options of "b" and "c".
    for k in "bc":
        prompts[k]["user"], prompts[k]["system"] = prompts["a"].user, prompts["a"].system
    for k in "bc":
        assert (prompts[k].user == prompts["a"].user).all(), k
        assert (prompts[k].system == prompts["a"].system).all(), k
    model = [{"name": "t", "source": str(tiny_dir)}]
    first = collect(prompts["a"], model, tmp_path / "a.nc", progress=False)
    for k in "bc":
        ds = collect(prompts[k], model, tmp_path / f"{k}.nc", progress=False,
                     reuse=[tmp_path / "a.nc"])  # fmt: skip
        reused = (ds.reused_from != "").isel(model=0)
        assert not bool(reused.sel(item="self").any()), k
        same = ["tv", "trust", "vote"] if k == "b" else ["tv", "vote"]  # c: another option axis
        assert bool(reused.sel(item=same).all()), k
        for item in same:
            np.testing.assert_array_equal(ds.pmf.sel(item=item), first.pmf.sel(item=item))
    b = open_results(tmp_path / "b.nc")
    one = {"item": "self", "option": "Don't know"}
    assert not np.allclose(b.nonsubstantive_mass.sel(one), first.nonsubstantive_mass.sel(one))
    c = open_results(tmp_path / "c.nc")
    assert bool(c.nonsubstantive_mass.sel(item="self", option="Refused").notnull().all())


def test_each_language_is_read_with_its_own_labels(tiny_dir, reference, tmp_path):
    """A two-language run (support.survey GERMAN: the vote answered with other names, the
    options shown in German): each cell is read with its language's labels, the ``option``
    coordinate is the instrument's, and each language equals its instrument run alone."""
    tok, probs = reference
    both = survey_experiment(tmp_path, IN_TWO_LANGUAGES, instrument=SURVEY + GERMAN).build_prompts()
    (tmp_path / "de").mkdir()
    alone = {
        "en": survey_experiment(tmp_path, instrument=SURVEY).build_prompts(),
        "de": survey_experiment(
            tmp_path / "de", instrument=german_by_hand(), user=GERMAN_USER
        ).build_prompts(),
    }
    model = [{"name": "t", "source": str(tiny_dir)}]
    kw = {"progress": False, "batch_size": 4, "chunk_size": 4}
    ds = collect(both.sel(party=["Republican"]), model, tmp_path / "both.nc", **kw)
    assert ds.option.values.tolist() == ["Don't know", "Refused"]
    assert ds.answer_label.dims == ("language", "item", "score")
    rules = ds.likert.attrs["models"]["t"]["valid_tokens_by_labels"]
    assert any("Bill Clinton" in k for k in rules) and any(
        "Clinton" in k and "Bill" not in k for k in rules
    )
    for lv, names in (("en", ("Clinton", "Dole")), ("de", ("Bill Clinton", "Bob Dole"))):
        # the vote's mass is its language's names, by independent forward passes
        ids = read_sequence(ds, model="t", party="Republican", language=lv, item="vote").ids
        valid = sum(word_mass(tok, probs, ids, name) for name in names)
        cell = ds.sel(model="t", party="Republican", language=lv, item="vote")
        np.testing.assert_allclose(float(cell.valid_mass), valid, rtol=1e-5, err_msg=lv)
        # and the language run alone gives the same numbers
        one = collect(alone[lv].sel(party=["Republican"]), model, tmp_path / f"{lv}.nc", **kw)
        one = one.assign_coords(option=["Don't know", "Refused"])
        for v in ("pmf", "valid_mass", "nonsubstantive_mass"):
            got = ds[v].sel(language=lv, drop=True)
            np.testing.assert_array_equal(got.transpose(*one[v].dims).values, one[v].values)
    # the German "Weiss nicht"/"Verweigert" are shown, and "Don't know" answered E in both
    trust = ds.sel(model="t", party="Republican", item="trust")
    assert "E. Weiss nicht" in str(trust.prompt_text.sel(language="de").item())
    assert trust.nonsubstantive_mass.notnull().all()


# --------------------------------------------------------------------------- the rules


def test_answer_codes_place_points_and_options():
    codes, labels, layout = answer_codes((0, 1, 2, 3), {1: "A", 3: "C"}, ("", "D", "E"))
    assert codes == (1, 3, 5, 6) and labels == {1: "A", 3: "C", 5: "D", 6: "E"}
    assert layout == AnswerLayout(4, 3, (1, 3, 5, 6))
    out = layout.readout(np.array([[0.1, 0.3, 0.2, 0.0]]), np.ones((1, 1, 1, 4)) * 0.25)
    np.testing.assert_allclose(out["pmf"], [[0, 0.25, 0, 0.75]])
    np.testing.assert_allclose(out["nonsubstantive_mass"], [[np.nan, 0.2, 0.0]])
    np.testing.assert_allclose(out["decoding_pmf"], [[[[0, 0.5, 0, 0.5]]]])
    assert answer_codes((1, 2, 3), None)[2] is None  # the plain scale: no layout
    with pytest.raises(CollectionError, match="at least two points"):
        answer_codes((1, 2, 3), {2: "x"})


def test_run_wide_labels_and_options_are_checked():
    from xlikert.collect import CollectOptions

    opts = CollectOptions(scale=(1, 2, 3), nonsubstantive=("Don't know",))
    ok = opts.replace(answer_labels=("", "B", "C", "D"))
    assert ok.labels_by_score == {2: "B", 3: "C"} and ok.nonsubstantive_labels == ("D",)
    assert ok.sizes["option"] == 1 and ok.coords["option"].tolist() == ["Don't know"]
    with pytest.raises(LabelMappingError, match="3 labels for the 3 scale values"):
        opts.replace(answer_labels=("A", "B", "C"))
    with pytest.raises(LabelMappingError, match="fewer than two points"):
        opts.replace(answer_labels=("", "", "C", "D"))
    with pytest.raises(CollectionError, match="repeats an option"):
        CollectOptions(nonsubstantive=("x", "x"))


def test_leaves_read_a_chunk_at_a_time_give_the_same_numbers(collected, tiny_dir, prompts,
                                                             tmp_path, monkeypatch):  # fmt: skip
    """An answer rule whose leaves hold more logits than LOGITS_BYTES (a word label of many
    spellings in a large vocabulary) is read a chunk of leaves at a time: here every chunk
    is one leaf, and every number equals the reading of all leaves in one batch."""
    from xlikert.collect.backends.transformers import model as local

    whole, _ = collected
    monkeypatch.setattr(local, "LOGITS_BYTES", 1)  # one leaf per chunk
    part = prompts.sel(party=["Republican"])
    ds = collect(part, [{"name": "t", "source": str(tiny_dir)}], tmp_path / "chunked.nc",
                 progress=False, batch_size=4, chunk_size=4)  # fmt: skip
    one = whole.sel(party=["Republican"])
    for var in ("pmf", "valid_mass", "nonsubstantive_mass", "decoding_pmf", "topk_logprob"):
        assert (np.isnan(ds[var].values) == np.isnan(one[var].values)).all(), var
        np.testing.assert_allclose(ds[var], one[var], atol=1e-6, rtol=0, err_msg=var)
    assert (ds.topk_token_id.values == one.topk_token_id.values).all()
    spelled = ds.likert.attrs["models"]["t"]["answer_spellings"]
    assert len(spelled) > 2  # the vote's names: several leaves, read one chunk each


def test_labels_spelled_in_too_many_ways_are_walked_not_refused(tiny_dir, prompts, tmp_path):
    """max_answer_positions caps the tokens a listing of every spelling teacher-forces. The
    transformers backend reads a prompt's answers by the walk over the labels' trie and lists
    nothing: the vote's names (several spellings each) are read under any cap, as without
    one. Sequential administration reads them by the walk too, from each conversation's kept
    cache: the same interview as when every spelling is listed (the vote is the last item)."""
    part = prompts.sel(party=["Republican"], fmt=["original"])
    model = [{"name": "t", "source": str(tiny_dir)}]
    capped = collect(part, model, progress=False, max_answer_positions=2, answer_tol=0.0)
    free = collect(part, model, progress=False, answer_tol=0.0)
    for var in ("pmf", "valid_mass", "nonsubstantive_mass"):
        np.testing.assert_allclose(capped[var], free[var], atol=1e-12, err_msg=var)
    vote = capped.sel(item="vote").isel(model=0).squeeze()
    assert int(vote.answer_passes) > 2 and int(vote.answer_tol_met) == 1
    assert float(vote.answer_error) == 0.0
    seq = part.sel(item=["tv", "vote"]).expand_dims(administration=["sequential"])
    walked = collect(seq, model, progress=False, max_answer_positions=2, answer_tol=0.0)
    listed = collect(seq, model, progress=False, answer_tol=0.0)
    for var in ("pmf", "valid_mass", "context_error"):
        np.testing.assert_allclose(walked[var], listed[var], atol=1e-6, rtol=0, err_msg=var)


def test_sequential_refuses_leaves_it_cannot_hold(tiny_dir, prompts, tmp_path, monkeypatch):
    """Sequential administration reads every leaf of a context at once: where they hold more
    logits than LOGITS_BYTES it is refused by name (the prompt reader takes them in chunks)."""
    from xlikert.collect.backends.transformers import model as local

    monkeypatch.setattr(local, "LOGITS_BYTES", 1)
    seq = prompts.sel(party=["Republican"], fmt=["original"], item=["tv", "self"])
    with pytest.raises(CollectionError, match="sequential administration reads every spelling"):
        collect(seq.expand_dims(administration=["sequential"]),
                [{"name": "t", "source": str(tiny_dir)}], progress=False)  # fmt: skip


def test_a_run_shows_a_word_label_walk_on_its_bar(tiny_dir, prompts, capsys):
    """Through the runner: the walk over the vote's names tells the run's progress bar its
    passes out of the budget, the bound reached, the unread mass and the time (the bar's
    postfix, on stderr), as own words and sequential trees do."""
    part = prompts.sel(party=["Republican"], fmt=["original"], item=["vote"])
    collect(part, [{"name": "t", "source": str(tiny_dir)}], progress=True, answer_tol=0.0,
            answer_max_passes=500)  # fmt: skip
    err = capsys.readouterr().err
    said = re.findall(r"word labels: (\d+)/500 passes, bound (\S+) \(tol 0\), unread \S+, "
                      r"\dm\d\ds", err)  # fmt: skip
    assert said, err[-2000:]
    assert 0 < int(said[-1][0]) <= 500 and float(said[-1][1]) == 0.0
