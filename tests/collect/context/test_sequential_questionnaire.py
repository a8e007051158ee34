"""Whole interviews: a questionnaire as fielded, administered in one conversation.

Three items with their own options in one conversation, on a tiny random model: ``self``
1..7 with a "Don't know" (code 8), ``tv`` 0..7 and ``vote`` nominal 1..3. Each item is
read over its own answers, the history tree branches on them ("Don't know" included) and
an earlier answer is written with its own code. The check enumerates every history
itself (a plain loop: the chat template, a forward pass per history, the one-token rule
plus a bare space then the label, written here), mixes the histories by hand, and
compares: every history the tree read, the items' PMFs, valid and non-substantive
masses, through :func:`~xlikert.collect.context.administer` and through
:func:`~xlikert.collect.collect` (the results file). Pruned runs lie within their bounds.
"""

from __future__ import annotations

import functools
import itertools
import re
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from support.survey import SURVEY, survey_experiment  # noqa: E402
from support.tiny import save_tiny  # noqa: E402

from xlikert.analysis import context as ctx  # noqa: E402
from xlikert.collect import collect  # noqa: E402
from xlikert.collect.context import (  # noqa: E402
    Battery,
    administer,
    battery_from_prompts,
    history_tree,
    item_marginals,
    sequential_dataset,
)
from xlikert.collect.options import CollectOptions  # noqa: E402
from xlikert.core.errors import CollectionError, InvalidPMFError, NominalItemError  # noqa: E402
from xlikert.core.io import open_results  # noqa: E402

#: ``self`` (1..7, "Don't know" = 8) and ``tv`` (0..7) of the survey, then a nominal vote.
INSTRUMENT = (
    SURVEY.split('[[items]]\nid = "trust"')[0]
    + """[[items]]
id = "vote"
template = "Whom did you vote for?"
nominal = true
[items.scale]
min = 1
max = 3
anchors = { 1 = "Clinton", 2 = "Dole", 3 = "Perot" }
"""
)
SEQUENTIAL = '[factors.administration]\nlevels = ["sequential"]\n'
DK = "Don't know"
KW = {"progress": False, "batch_size": 8, "top_k": 2}


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return save_tiny(tmp_path_factory.mktemp("interview") / "model")


@pytest.fixture(scope="module")
def prompts(tmp_path_factory) -> xr.Dataset:
    exp = survey_experiment(tmp_path_factory.mktemp("exp"), SEQUENTIAL, instrument=INSTRUMENT)
    return exp.build_prompts().sel(party=["Democrat"])


def own_labels(prompts: xr.Dataset) -> list[dict]:
    """Each item's answers as the questionnaire fields them: score or option -> label."""
    out = []
    for item in prompts.item.values:
        lab = prompts.answer_label.sel(item=item)
        opt = prompts.option_label.sel(item=item)
        row = {int(y): str(x) for y, x in zip(lab.score.values, lab.values, strict=True) if x}
        row |= {str(o): str(x) for o, x in zip(opt.option.values, opt.values, strict=True) if x}
        out.append(row)
    return out


@functools.lru_cache(maxsize=1)
def plain_model(folder: Path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    return tok, AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()


def plain_masses(folder: Path, system: str, turns, user: str, labels: dict) -> dict:
    """The raw probability of each answer label after a conversation, written plainly:
    every token that is the label with an optional leading space marker, plus a bare
    space token then the label."""
    tok, model = plain_model(folder)
    msgs = [{"role": "system", "content": system}]
    for q, a in turns:
        msgs += [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
    msgs.append({"role": "user", "content": user})
    text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    ids = tok(text, add_special_tokens=False).input_ids
    vocab = tok.get_vocab()
    space = vocab[" "]
    with torch.no_grad():  # the next token after ids, and after ids + the space
        z = model(torch.tensor([[*ids, space]])).logits[0, -2:].double()
        q0, q1 = torch.softmax(z, -1).numpy()
    return {
        key: sum(q0[i] for i in spelled(folder, x)) + q0[space] * q1[vocab[x]]
        for key, x in labels.items()
    }


@functools.lru_cache(maxsize=32)
def spelled(folder: Path, label: str) -> list[int]:
    """The tokens that are ``label`` with an optional leading space marker."""
    pattern = re.compile(rf"^[ ▁Ġ]?{re.escape(label)}$")
    return [i for t, i in plain_model(folder)[0].get_vocab().items() if pattern.match(t)]


def enumerate_interview(folder: Path, system: str, questions, labels) -> dict:
    """Every history of every item read by a forward pass of its whole conversation, and
    the items' PMF, valid and "Don't know" masses mixed over them by hand."""
    K = len(questions)
    read: dict[tuple, dict] = {}
    for j in range(K):
        for h in itertools.product(*(list(labels[i]) for i in range(j))):
            turns = [(questions[i], labels[i][a]) for i, a in enumerate(h)]
            read[h] = plain_masses(folder, system, turns, questions[j], labels[j])

    def prob(h: tuple) -> float:  # P(h): each answer's share of the answers given
        p = 1.0
        for i in range(len(h)):
            m = read[h[:i]]
            p *= m[h[i]] / sum(m.values())
        return p

    pmf = np.zeros((K, 8))  # the file's score axis 0..7
    valid, dk = np.zeros(K), np.zeros(K)
    for h, m in read.items():
        j, p = len(h), prob(h)
        points = {y: v for y, v in m.items() if isinstance(y, int)}
        vm = sum(points.values())
        for y, v in points.items():
            pmf[j, y] += p * v / vm
        valid[j] += p * vm
        dk[j] += p * m.get(DK, 0.0)
    return {"read": read, "pmf": pmf, "valid_mass": valid, "dk": dk}


@pytest.fixture(scope="module")
def cell(prompts):
    one = prompts.isel(party=0, administration=0)
    system = str(one.system.values[0])
    return system, [str(u) for u in one.user.values], own_labels(prompts)


@pytest.fixture(scope="module")
def truth(folder, cell):
    return enumerate_interview(folder, *cell)


@pytest.fixture(scope="module")
def local(folder):
    import xlikert.collect.backends.transformers as backend

    opts = CollectOptions(scale=range(0, 8), nonsubstantive=(DK,), batch_size=8)
    m = backend.open({"name": "tiny", "source": str(folder)}, opts)
    yield m
    m.close()


def battery_of(cell, prompts) -> Battery:
    system, questions, labels = cell
    answers = tuple(
        (*(row.get(y, "") for y in range(8)), row.get(DK, "")) for row in labels
    )  # fmt: skip
    return Battery(system, tuple(questions), tuple(str(y) for y in range(8)),
                   tuple(str(i) for i in prompts.item.values), tuple(range(8)), (DK,), answers)  # fmt: skip


def answer_key(a: int) -> int | str:
    return a if a < 8 else DK


def test_every_history_and_every_item_equals_the_enumeration(local, cell, prompts, truth):
    b = battery_of(cell, prompts)
    res = administer(local, b)
    tree = res.tree
    # 1 + 8 ("Don't know" a branch) + 8 * 8 histories, each read once
    assert res.tol_met and res.passes == tree.size == len(truth["read"]) == 1 + 8 + 64
    for n, path in enumerate(tree.paths):
        h = tuple(answer_key(int(a)) for a in path if a >= 0)
        m = truth["read"][h]
        points = np.array([m.get(y, 0.0) for y in range(8)])
        np.testing.assert_allclose(tree.valid_mass[n], points.sum(), atol=1e-6, err_msg=str(h))
        np.testing.assert_allclose(tree.pmf[n], points / points.sum(), atol=1e-5, err_msg=str(h))
        dk = tree.nonsubstantive_mass[n, 0]
        if len(h) == 0:  # the first item offers "Don't know"; the others do not
            np.testing.assert_allclose(dk, m[DK], atol=1e-6)
        else:
            assert np.isnan(dk)
    marg = res.marginals()
    np.testing.assert_allclose(marg["pmf"], truth["pmf"], atol=1e-5)
    np.testing.assert_allclose(marg["valid_mass"], truth["valid_mass"], atol=1e-6)
    np.testing.assert_allclose(marg["nonsubstantive_mass"][0, 0], truth["dk"][0], atol=1e-6)
    assert np.isnan(marg["nonsubstantive_mass"][1:, 0]).all()
    # each item on its own support: 'self' none on 0, 'vote' none past 3
    assert marg["pmf"][0, 0] == 0 and (marg["pmf"][2, 4:] == 0).all()
    # one KV-cache reader served every item's rule: each history ran from its parent's cache
    whole = sum(
        len(local.conversation(b.system, b.turns(h), b.questions[len(h)])[1]) + 1
        for h in ([int(a) for a in p if a >= 0] for p in tree.paths)
    )  # fmt: skip
    assert res.info["tokens_run"] < whole / 2
    # the conversation the model read writes "Don't know" as its code
    assert "8" in res.conversation(local, [8]) and local.options.answer_labels is None
    # the joint over answers marginalises to each item's answer distribution
    joint = res.joints()["joint"]
    assert joint.shape == (3, 3, 9, 9)
    np.testing.assert_allclose(joint.sum((-1, -2)), 1.0, atol=1e-12)


@pytest.mark.parametrize("tol", [0.05, 1e-2, 1e-3])
def test_pruned_interviews_lie_within_their_bounds(local, cell, prompts, truth, tol):
    res = administer(local, battery_of(cell, prompts), tol=tol, batch=4)
    m = res.marginals()
    assert res.tol_met and (m["error"] <= tol).all() and (m["valid_mass_error"] <= tol).all()
    if tol >= 1e-2:
        assert res.passes < 1 + 8 + 64  # pruning pays
    # each history carries the float32 round-off of its pass (1e-6)
    assert (np.abs(m["pmf"] - truth["pmf"]) <= m["error"][:, None] + 1e-5).all()
    assert (np.abs(m["valid_mass"] - truth["valid_mass"]) <= m["valid_mass_error"] + 1e-6).all()
    assert abs(m["nonsubstantive_mass"][0, 0] - truth["dk"][0]) <= m["valid_mass_error"][0] + 1e-6


def test_the_results_file_holds_the_interview(folder, prompts, truth, tmp_path):
    out = tmp_path / "interview.nc"
    collect(prompts, [{"name": "tiny", "source": str(folder)}], out, **KW)
    ds = open_results(out).sel(model="tiny", party="Democrat", administration="sequential")
    np.testing.assert_allclose(ds.pmf.values, truth["pmf"], atol=1e-5)
    np.testing.assert_allclose(ds.valid_mass.values, truth["valid_mass"], atol=1e-6)
    dk = ds.nonsubstantive_mass.sel(option=DK).values
    np.testing.assert_allclose(dk[0], truth["dk"][0], atol=1e-6)
    assert np.isnan(dk[1:]).all()
    assert (ds.context_error == 0).all() and (ds.context_passes == 73).all()
    # 'tv' after "Don't know": its history is named by the option, and written as code 8
    tv = ds.sel(item="tv")
    answers = [str(a) for a in tv.history_answers.values]
    assert DK in answers and "0" not in answers  # 'self' has no point 0
    k = answers.index(DK)
    np.testing.assert_allclose(
        float(tv.history_probability[k]),
        truth["read"][()][DK] / sum(truth["read"][()].values()),
        atol=1e-6,
    )
    first = ds.sel(item="self").history_nonsubstantive_mass.sel(option=DK).values
    np.testing.assert_allclose(first[0], truth["read"][()][DK], atol=1e-6)
    # the stored decoding grid at T = 1, top-p = 1 is the PMF
    plain = ds.decoding_pmf.sel(temperature=1.0, top_p=1.0)
    np.testing.assert_allclose(plain.values, ds.pmf.values, atol=1e-12)
    # the tables within the conversation: refused by name over an item with options (the
    # joint holds its substantive cells), over a nominal item where they need an order
    with pytest.raises(InvalidPMFError, match=r"items \['self'\] offer non-substantive"):
        ctx.inter_item_correlation(ds)
    pair = ds.drop_vars("nonsubstantive_mass").sel(item=["tv", "vote"], other_item=["tv", "vote"])
    with pytest.raises(NominalItemError, match=r"inter_item_correlation.*\['vote'\]"):
        ctx.inter_item_correlation(pair)
    # the report's "Context and order" says why it shows no carry-over table
    from xlikert.report import write_report

    text = (write_report(out, tmp_path / "report").parent / "report.md").read_text()
    assert "## Context and order" in text and "No carry-over table is shown" in text
    table = ctx.carry_over(pair)  # needs no order: P(vote | tv) from the exact joint
    np.testing.assert_allclose(
        table.sel(item="tv", other_item="vote").sum("other_score").sel(score=range(8)), 1.0,
        atol=1e-9,
    )  # fmt: skip


def test_a_budget_spent_stores_the_bound_it_reached(folder, prompts, truth, tmp_path):
    with pytest.warns(RuntimeWarning, match="max_passes=20"):
        ds = collect(prompts, [{"name": "tiny", "source": str(folder)}], tmp_path / "p.nc",
                     tol=1e-3, max_passes=20, **KW)  # fmt: skip
    ds = ds.sel(model="tiny", party="Democrat", administration="sequential")
    err = ds.context_error.values
    assert (ds.context_passes == 20).all() and (ds.context_tol_met == 0).all()
    assert (err[:2] == 0).all() and err[2] > 1e-3  # the first two items: every history read
    assert (np.abs(ds.pmf.values - truth["pmf"]) <= err[:, None] + 1e-5).all()
    assert (np.abs(ds.valid_mass.values - truth["valid_mass"]) <= err + 1e-6).all()
    dk = float(ds.nonsubstantive_mass.sel(item="self", option=DK))
    assert abs(dk - truth["dk"][0]) <= 1e-6


def test_the_battery_of_the_prompts_and_its_dataset(local, cell, prompts, tmp_path):
    one = prompts.isel(party=0, administration=0)
    b = battery_from_prompts(one)
    assert b == battery_of(cell, prompts)
    res = administer(local, b, tol=0.05, batch=4)
    ds = sequential_dataset(res)
    assert ds.nonsubstantive_mass.dims == ("item", "option")
    assert ds.history_nonsubstantive_mass.dims == ("history", "option")
    assert ds.joint.dims == ("item", "other_item", "score", "other_score")
    path = tmp_path / "interview.nc"
    ds.to_netcdf(path)
    with xr.open_dataset(path) as back:
        back = back.load()
    xr.testing.assert_identical(back, ds)
    m, again = res.marginals(), item_marginals(history_tree(back))
    for k in ("pmf", "valid_mass", "nonsubstantive_mass", "error", "valid_mass_error"):
        np.testing.assert_array_equal(again[k], m[k])


def test_a_battery_on_other_options_than_the_model_reads_is_named(folder, cell, prompts):
    import xlikert.collect.backends.transformers as backend

    plain = backend.open({"name": "tiny", "source": str(folder)}, CollectOptions(scale=range(0, 8)))
    with pytest.raises(CollectionError, match=r"options \[\].*options \[\"Don't know\"\]"):
        administer(plain, battery_of(cell, prompts))
    with pytest.raises(CollectionError, match="needs each item's own answers"):
        Battery("s", ("a", "b"), ("1", "2"), options=(DK,))
    with pytest.raises(CollectionError, match="fewer than two points"):
        Battery("s", ("a",), ("1", "2"), options=(DK,), answers=(("1", "", "8"),))


def test_the_conversation_of_a_history_writes_each_answer_with_its_own_label(prompts, tmp_path):
    from click.testing import CliRunner

    from xlikert.cli import main
    from xlikert.core.errors import DesignError
    from xlikert.design.item_order import conversation

    item, msgs = conversation(prompts, [DK, 0])
    assert item == "vote"
    assert [m for r, m in msgs if r == "assistant"] == ["8", "0"]  # "Don't know" as its code
    with pytest.raises(DesignError, match=r"item 'tv' does not offer the answer \"Don't know\""):
        conversation(prompts, [3, DK])
    with pytest.raises(DesignError, match=r"item 'self' does not offer the answer 0"):
        conversation(prompts, [0])
    exp = survey_experiment(tmp_path, SEQUENTIAL, instrument=INSTRUMENT)
    res = CliRunner().invoke(main, ["prompts", exp.path, "-n", "0", "--history", "Don't know,5"])
    assert res.exit_code == 0, res.output
    assert "[assistant]\n8\n" in res.output and "[assistant]\n5\n" in res.output


def test_interviews_resume_and_merge_to_the_clean_file(folder, tmp_path_factory, tmp_path):
    from support.results import without_session

    from xlikert.collect import merge_shards

    exp = survey_experiment(tmp_path_factory.mktemp("two"), SEQUENTIAL, instrument=INSTRUMENT)
    two = exp.build_prompts().sel(item=["self", "vote"])  # two conversations of 1 + 8 passes
    spec = [{"name": "tiny", "source": str(folder)}]
    clean = tmp_path / "clean.nc"
    collect(two, spec, clean, **KW)
    ref = without_session(clean)
    assert "history_nonsubstantive_mass" in ref

    def stop(done, total):
        if done == 1:
            raise KeyboardInterrupt

    out = tmp_path / "r.nc"
    with pytest.raises(KeyboardInterrupt):
        collect(two, spec, out, on_unit=stop, **KW)
    collect(two, spec, out, **KW)
    xr.testing.assert_identical(without_session(out), ref)
    parts = [tmp_path / f"s{i}.nc" for i in (1, 2)]
    for i, p in enumerate(parts, 1):
        collect(two, spec, p, shard=f"{i}/2", **KW)
    merged = merge_shards(parts, tmp_path / "merged.nc")
    for v in ("pmf", "valid_mass", "nonsubstantive_mass", "history_nonsubstantive_mass"):
        xr.testing.assert_identical(merged[v], ref[v])
