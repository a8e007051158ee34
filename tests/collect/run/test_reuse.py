"""A study grows without recomputing: cells keyed by what determines their numbers."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

pytest.importorskip("torch")
pytest.importorskip("transformers")

from support.tiny import save_tiny, tiny_prompts

from xlikert.collect import collect
from xlikert.collect.run.identity import _sent_digest, cell_key, model_digest
from xlikert.core.codecs import decode_token_ids
from xlikert.core.errors import CollectionError
from xlikert.core.io import encode_attrs, open_results, read_attrs

#: Every per-cell variable a reused cell copies.
NUMBERS = ("pmf", "valid_mass", "topk_logprob", "decoding_pmf", "decoding_valid_mass")
TEXTS = ("prompt_text", "prompt_token_ids", "topk_token", "cell_key")
#: A recomputation in other batches differs by float noise (docs/cluster.md).
BATCHING_TOLERANCE = 1e-5
KW = {"progress": False, "batch_size": 4, "chunk_size": 3}


@pytest.fixture(scope="module")
def dirs(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("reuse")
    return {"a": str(save_tiny(root / "a", seed=0)), "b": str(save_tiny(root / "b", seed=1))}


class Counter:
    """A loader that opens the entry's backend model and counts loads and scored prompts."""

    def __init__(self):
        self.loads: list[str] = []
        self.scored = 0

    def __call__(self, spec, options, probe):
        from xlikert.collect.backends.transformers import open as open_local

        model = open_local(spec, options, probe)
        self.loads.append(spec["name"])
        real = model.score

        def score(prompts):
            self.scored += len(prompts)
            return real(prompts)

        model.score = score
        return model


def entry(dirs, name, which=None, **kw):
    return {"name": name, "source": dirs[which or name], **kw}


def cells_equal(a: xr.Dataset, b: xr.Dataset, names=NUMBERS + TEXTS) -> None:
    """The same arrays, bit for bit."""
    for v in names:
        np.testing.assert_array_equal(a[v].values, b[v].values, err_msg=v)


# ----------------------------------------------------------------------------- growing
def test_a_study_grows_by_a_model_and_a_target_level_computing_only_the_new_cells(
    dirs, tmp_path, capsys
):
    old = collect(tiny_prompts(2, 5), [entry(dirs, "a")], tmp_path / "old.nc", **KW)
    count = Counter()
    grown = [entry(dirs, "a"), entry(dirs, "b")]
    new = collect(tiny_prompts(3, 5), grown, tmp_path / "new.nc", reuse=[tmp_path / "old.nc"],
                  loader=count, **{**KW, "progress": True})  # fmt: skip
    # only the new cells: model a on the new level, model b everywhere. Item 5 names no
    # target: its prompt, so its cell, is the same on every level: found in the old file
    # for model a, computed once for model b (and copied to the other two levels)
    assert (
        tiny_prompts(3, 5).user.isel(item=4) == tiny_prompts(3, 5).user.isel(item=4, target=0)
    ).all()
    assert count.scored == 4 + 13 and count.loads == ["a", "b"]
    assert [new.attrs[f"cells_{k}"] for k in ("computed", "copied", "reused")] == [17, 2, 11]
    said = capsys.readouterr().err
    assert (f"30 cells: 11 reused from {tmp_path / 'old.nc'}; 2 the same as another cell "
            "(copied); 17 to compute") in said  # fmt: skip
    # the old cells are the earlier file's numbers, copied; the file says where from
    cells_equal(new.sel(model=["a"], target=["USA", "France"]), old)
    cells_equal(
        new.sel(model="a", target="Chad", item="5"), old.sel(model="a", target="USA", item="5")
    )
    origin = new.reused_from.sel(model="a")
    assert (origin.sel(target=["USA", "France"]) == str(tmp_path / "old.nc")).all()
    assert origin.sel(target="Chad").values.tolist() == [""] * 4 + [str(tmp_path / "old.nc")]
    assert (new.reused_from.sel(model="b") == "").all()
    sources = read_attrs(new)["reuse_sources"]
    assert list(sources) == [str(tmp_path / "old.nc")]
    assert sources[str(tmp_path / "old.nc")]["cells"] == 11
    # the file equals a clean run of the grown study, within the batching tolerance
    clean = collect(tiny_prompts(3, 5), grown, **KW)
    for v in NUMBERS:
        np.testing.assert_allclose(new[v], clean[v], rtol=0, atol=BATCHING_TOLERANCE, err_msg=v)
    cells_equal(new, clean, ("prompt_text", "prompt_token_ids", "cell_key"))
    # and it is netCDF-ready, its keys read back as written
    again = open_results(tmp_path / "new.nc")
    cells_equal(again, new, ("cell_key", "reused_from", "pmf"))


def test_an_item_added_computes_its_cells_only_and_reordered_levels_compute_nothing(dirs, tmp_path):
    collect(tiny_prompts(3, 4), [entry(dirs, "a"), entry(dirs, "b")], tmp_path / "old.nc", **KW)
    old = open_results(tmp_path / "old.nc")
    count = Counter()
    more = collect(tiny_prompts(3, 5), [entry(dirs, "a"), entry(dirs, "b")],
                   reuse=[tmp_path / "old.nc"], loader=count, **KW)  # fmt: skip
    # item 5 is the same prompt on each level: computed once per model, copied twice
    assert count.scored == 2 and more.attrs["cells_reused"] == 2 * 3 * 4
    assert more.attrs["cells_copied"] == 2 * 2
    cells_equal(more.sel(item="5", target=["Chad"]), more.sel(item="5", target=["USA"]),
                (*NUMBERS, "prompt_text", "cell_key"))  # fmt: skip
    cells_equal(more.isel(item=slice(0, 4)), old)
    # levels and models in another order, the item axis reversed: nothing is computed,
    # no model is loaded (its tokenizer alone keys the cells)
    count = Counter()
    prompts = tiny_prompts(3, 4).isel(target=[2, 0, 1], item=[3, 2, 1, 0])
    shuffled = collect(prompts, [entry(dirs, "b"), entry(dirs, "a")],
                       reuse=[tmp_path / "old.nc"], loader=count, **KW)  # fmt: skip
    assert count.scored == 0 and count.loads == []
    assert shuffled.attrs["cells_computed"] == 0
    cells_equal(shuffled, old.sel(model=["b", "a"], target=["Chad", "USA", "France"],
                                  item=["4", "3", "2", "1"]))  # fmt: skip
    info = read_attrs(shuffled)["models"]["a"]
    assert info["loaded"].startswith("no: every cell reused") and info["sha256"]


def test_options_that_change_numbers_recompute_the_cells_they_change_and_no_others(dirs, tmp_path):
    models = [entry(dirs, "a"), entry(dirs, "b", dtype="float32")]
    base = collect(tiny_prompts(2, 3), models, tmp_path / "base.nc", **KW)
    reuse = [tmp_path / "base.nc"]

    def rerun(models=models, **kw):
        count = Counter()
        ds = collect(tiny_prompts(2, 3), models, reuse=reuse, loader=count, **{**KW, **kw})
        return ds, count

    # a model's dtype: that model's cells only
    ds, count = rerun([models[0], entry(dirs, "b", dtype="bfloat16")])
    assert count.loads == ["b"] and count.scored == 6
    cells_equal(ds.sel(model=["a"]), base.sel(model=["a"]))
    assert (
        ds.cell_key.sel(model="b").values.tolist() != base.cell_key.sel(model="b").values.tolist()
    )
    # a run-wide option that changes stored values: every cell
    for change in ({"top_k": 5}, {"split_space": False}, {"top_ps": (0.5, 1.0)}):
        ds, count = rerun(**change)
        assert count.scored == 12, change
        assert ds.attrs["cells_reused"] == 0, change
    # the unit size, the batch size and the prefix cache change no stored value: nothing
    ds, count = rerun(chunk_size=2, batch_size=1, prefix_cache=False)
    assert count.scored == 0 and count.loads == []
    cells_equal(ds, base)


def test_a_cell_key_is_recomputed_from_the_file(dirs, tmp_path):
    """The key hashes what the file records: the model's cell identity, the labels and the
    token ids read (KEY_RULE), so a reader can check every reused cell."""
    ds = collect(tiny_prompts(1, 2), [entry(dirs, "a")], **KW)
    ident = read_attrs(ds)["models"]["a"]["cell_identity"]
    assert ident["model"]["dtype"] == "float32" and ident["options"]["top_k"] == 20
    digest = model_digest(ident["model"], ident["options"])
    cell = ds.isel(model=0, target=0, item=1)
    ids = decode_token_ids(str(cell.prompt_token_ids.values))
    labels = [f"{y}={y}" for y in ds.score.values]  # each point of the item's, labelled
    assert cell_key(digest, labels, _sent_digest(ids)) == str(cell.cell_key.values)


# ----------------------------------------------------------------------------- saved progress
def _interrupt_after(n: int):
    def stop(done, total):
        if done == n:
            raise KeyboardInterrupt

    return stop


def test_progress_of_another_configuration_survives_a_mistaken_run(dirs, tmp_path):
    out, partial = tmp_path / "r.nc", tmp_path / "r.nc.partial"
    models = [entry(dirs, "a"), entry(dirs, "b")]
    with pytest.raises(KeyboardInterrupt):
        collect(tiny_prompts(3, 4), models, out, on_unit=_interrupt_after(4), **KW)
    saved = sorted(p.name for p in partial.glob("m*-u*.npz"))
    assert len(saved) == 4
    # a mistaken run: another model list, another level set, another top_k
    with pytest.warns(UserWarning) as said:
        collect(tiny_prompts(2, 4), models[:1], out, top_k=5, **KW)
    text = " ".join(str(w.message) for w in said)
    assert "4 saved unit(s) of another configuration" in text
    for change in ("models removed ['b']", "target levels removed ['Chad']", "top_k: 20 -> 5",
                   "are kept (--discard-progress deletes them)"):  # fmt: skip
        assert change in text, change
    assert sorted(p.name for p in partial.glob("m*-u*.npz")) == saved  # all still there
    # the intended run resumes from them (and replaces the mistaken output)
    count = Counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        ds = collect(tiny_prompts(3, 4), models, out, overwrite=True, loader=count, **KW)
    assert count.scored == 24 - 4 * 3 and not partial.exists()
    assert ds.attrs["cells_reused"] == 0  # its own units: computed by this configuration
    clean = collect(tiny_prompts(3, 4), models, **KW)
    cells_equal(ds, clean)  # the same units and batches as an uninterrupted run
    # --discard-progress is the one way to delete another configuration's progress
    with pytest.raises(KeyboardInterrupt):
        collect(tiny_prompts(3, 4), models, tmp_path / "s.nc", on_unit=_interrupt_after(2), **KW)
    with pytest.warns(UserWarning, match=r"deleted 2 saved unit\(s\) of other configurations"):
        collect(tiny_prompts(1, 4), models, tmp_path / "s.nc", discard_progress=True, **KW)
    assert not (tmp_path / "s.nc.partial").exists()


def test_a_results_file_without_cell_keys_is_not_matched(dirs, tmp_path):
    """A results file without ``cell_key`` cannot be matched: an error when named, a
    warning when overwritten."""
    out = tmp_path / "r.nc"
    models = [entry(dirs, "a")]
    collect(tiny_prompts(3, 4), models, out, **KW)
    unkeyed = open_results(out).drop_vars(["cell_key", "reused_from"])
    unkeyed.to_netcdf(tmp_path / "old.nc")
    with pytest.raises(CollectionError, match=r"--reuse .*old.nc: .*holds no cell keys"):
        collect(tiny_prompts(3, 4), models, tmp_path / "n.nc", reuse=[tmp_path / "old.nc"], **KW)
    with pytest.warns(UserWarning, match=r"holds no cell keys.*recomputed"):
        collect(tiny_prompts(2, 4), models, tmp_path / "old.nc", overwrite=True, **KW)


def test_cli_run_reuse_says_what_it_computed(dirs, tmp_path):
    from click.testing import CliRunner

    from xlikert.cli import main
    from xlikert.design import load_experiment

    def config(path: Path, targets: list[str], models: list[str]) -> Path:
        text = ('[experiment]\nname = "grow"\ninstrument = "cetscale"\n\n'
                f"[factors.target]\nlevels = {json.dumps(targets)}\n")  # fmt: skip
        for m in models:
            text += f'\n[[models]]\nname = "{m}"\nsource = "{dirs[m]}"\n'
        path.write_text(text)
        return path

    v1 = config(tmp_path / "v1.toml", ["USA"], ["a"])
    v2 = config(tmp_path / "v2.toml", ["USA", "France"], ["a"])
    run = CliRunner().invoke
    res = run(main, ["run", str(v1), "-o", str(tmp_path / "v1.nc"), "--quiet"])
    assert res.exit_code == 0, res.output
    res = run(main, ["run", str(v2), "-o", str(tmp_path / "v2.nc"), "--quiet",
                     "--reuse", str(tmp_path / "v1.nc")])  # fmt: skip
    assert res.exit_code == 0, res.output
    # the France cells, but those items that name no country: the same prompts as USA's
    prompts = load_experiment(str(v2)).build_prompts()
    same = int((prompts.user.sel(target="France") == prompts.user.sel(target="USA")).sum())
    assert 0 < same < 17
    assert (f"34 prompts: {17 - same} computed, {17 + same} reused ({17 + same} from "
            f"{tmp_path / 'v1.nc'})") in res.output  # fmt: skip
    # the same output grown in place: --overwrite reuses the file it replaces
    res = run(main, ["run", str(v2), "-o", str(tmp_path / "v1.nc"), "--quiet"])
    assert res.exit_code != 0 and "--overwrite" in res.output and "--reuse" in res.output
    res = run(main, ["run", str(v2), "-o", str(tmp_path / "v1.nc"), "--quiet", "--overwrite"])
    assert res.exit_code == 0 and f"{17 - same} computed, {17 + same} reused" in res.output


def test_a_server_model_is_keyed_by_its_exact_request(dirs, tmp_path, monkeypatch):
    """A server's cell is its request: found, it is copied without reaching the server; a
    transport setting changes no request, a request setting (temperature) every one."""
    from support.fake_server import FakeServer

    monkeypatch.setenv("XLK_TEST_KEY", "k")
    srv = FakeServer(dirs["a"])
    server = {"name": "s", "source": "openai:tiny", "base_url": srv.url,
              "api_key_env": "XLK_TEST_KEY", "tokenizer": dirs["a"], "backoff": 0.01}  # fmt: skip
    kw = {"progress": False, "split_space": False, "chunk_size": 2}
    try:
        old = collect(tiny_prompts(1, 3), [server], tmp_path / "s.nc", **kw)
    finally:
        srv.close()
    assert old.likert.attrs["models"]["s"]["mode"] == "exact"
    # the server is gone: every cell is found, none is sent
    moved = {**server, "concurrency": 1, "timeout": 5, "max_retries": 0}
    ds = collect(tiny_prompts(1, 3), [moved], reuse=[tmp_path / "s.nc"], **kw)
    assert ds.attrs["cells_reused"] == 3
    cells_equal(ds, old)
    hotter = [{**moved, "temperature": 0.5}]  # another request: sent, to no server
    with pytest.raises(CollectionError, match=r"model 's': cannot reach server"):
        collect(tiny_prompts(1, 3), hotter, reuse=[tmp_path / "s.nc"], **kw)


def test_reasoning_cells_are_copied_whole(tmp_path):
    """A model in reasoning mode: its traces, their ids, seeds and lengths are copied too,
    beside a model that answers at once (its trace variables stay empty)."""
    from support.tiny import save_micro

    micro = str(save_micro(tmp_path / "micro"))
    models = [{"name": "r", "source": micro, "reasoning": {"traces": 2, "max_new_tokens": 3,
                                                           "seed": 1}},
              {"name": "p", "source": micro}]  # fmt: skip
    kw = {"progress": False, "chunk_size": 2, "scale": range(1, 8)}
    collect(tiny_prompts(2, 2), models, tmp_path / "r.nc", **kw)
    old = open_results(tmp_path / "r.nc")
    count = Counter()
    ds = collect(tiny_prompts(2, 2).isel(target=[1, 0]), models, reuse=[tmp_path / "r.nc"],
                 loader=count, **kw)  # fmt: skip
    assert count.loads == [] and ds.attrs["cells_reused"] == 8
    names = [v for v in old.data_vars if v != "reused_from"]
    assert "trace_seed" in names and "trace_token_ids" in names
    cells_equal(ds, old.sel(target=["France", "USA"]), names)


# ----------------------------------------------------------------------------- once per run
def test_a_run_hashes_the_weights_and_loads_the_tokenizer_of_each_model_once(
    dirs, tmp_path, monkeypatch
):
    """The cell keys and the backend share what the entry resolved (ModelFiles), per run:
    a second run resolves again (nothing cached across runs)."""
    import transformers

    from xlikert.collect import zoo

    calls = {"tokenizer": 0, "sha256": 0}
    load, sha = transformers.AutoTokenizer.from_pretrained.__func__, zoo._sha256_file

    def counted_load(cls, *args, **kwargs):
        calls["tokenizer"] += 1
        return load(cls, *args, **kwargs)

    def counted_sha(*args, **kwargs):
        calls["sha256"] += 1
        return sha(*args, **kwargs)

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", classmethod(counted_load))
    monkeypatch.setattr(zoo, "_sha256_file", counted_sha)
    weights = [p for p in Path(dirs["a"]).iterdir() if p.suffix == ".safetensors"]
    assert weights
    for run in (1, 2):
        ds = collect(tiny_prompts(2, 2), [entry(dirs, "a")], tmp_path / f"{run}.nc", **KW)
        assert ds.attrs["cells_computed"] == 4
        assert calls == {"tokenizer": run, "sha256": run * len(weights)}


# ----------------------------------------------------------------------------- items' scales
#: A study's items on their own scales: ``happy`` 1..3 (the instrument's), ``attend`` 0..8,
#: ``trust`` 1..5.
SCALES = """
[instrument]
name = "gss"
citation = "Test."
default_framing = "plain"
placeholders = ["party"]

[framings]
plain = "Answer with ONLY the number."

[scale]
min = 1
max = 3
anchors = { 1 = "Very happy", 3 = "Not too happy" }
"""
ITEMS = {
    "happy": 'id = "happy"\ntemplate = "How happy are you?"\n',
    "attend": 'id = "attend"\ntemplate = "How often do you attend?"\n[items.scale]\nmin = 0\n'
    'max = 8\nanchors = { 0 = "Never", 8 = "Weekly" }\n',
    "trust": 'id = "trust"\ntemplate = "Can people be trusted?"\n[items.scale]\nmin = 1\n'
    'max = 5\nanchors = { 1 = "No", 5 = "Yes" }\n',
}


def scales_prompts(tmp_path: Path, items: list[str]) -> xr.Dataset:
    from support.survey import survey_experiment

    folder = tmp_path / "-".join(items)
    folder.mkdir()
    text = SCALES + "".join(f"\n[[items]]\n{ITEMS[i]}" for i in items)
    return survey_experiment(folder, instrument=text).build_prompts()


def test_items_on_other_scales_come_and_go_and_every_unchanged_cell_is_copied(
    dirs, tmp_path, capsys
):
    """A cell's key holds its own item's labels, not the run's score axis (the union of the
    items' scales): dropping ``attend`` (0..8) and adding ``trust`` (1..5) moves the axis
    from 0..8 to 1..5, and every ``happy`` cell is copied, placed on the new axis."""
    models = [entry(dirs, "a")]
    first = scales_prompts(tmp_path, ["happy", "attend"])
    assert first.score.values.tolist() == list(range(9))
    old = collect(first, models, tmp_path / "old.nc", **KW)
    count = Counter()
    second = scales_prompts(tmp_path, ["happy", "trust"])
    assert second.score.values.tolist() == [1, 2, 3, 4, 5]
    new = collect(second, models, tmp_path / "new.nc", reuse=[tmp_path / "old.nc"],
                  loader=count, **{**KW, "progress": True})  # fmt: skip
    # every happy cell (2 parties) copied, only trust's computed
    assert [new.attrs[f"cells_{k}"] for k in ("reused", "computed")] == [2, 2]
    assert count.scored == 2
    said = capsys.readouterr().err
    assert f"4 cells: 2 reused from {tmp_path / 'old.nc'}; 2 to compute" in said
    # why the file's other cells were not: the dropped item's, per model
    assert (f"not reused from {tmp_path / 'old.nc'}, model 'a': 2 cells this run does not "
            "ask (items or levels it does not have)") in said  # fmt: skip
    why = read_attrs(new)["reuse_sources"][str(tmp_path / "old.nc")]["not_reused"]
    assert why == {"a": {"cells this run does not ask (items or levels it does not have)": 2}}
    # the copied cells: the old numbers on the new axis, zero off the item's support
    happy = new.sel(item="happy")
    assert (happy.reused_from == str(tmp_path / "old.nc")).all()
    for v in ("pmf", "decoding_pmf"):
        was = old[v].sel(item="happy")
        np.testing.assert_array_equal(happy[v].sel(score=[1, 2, 3]), was.sel(score=[1, 2, 3]))
        off = happy[v].sel(score=[4, 5])
        measured = np.isfinite(was).any("score")
        assert (off.where(measured) == 0).where(measured, True).all(), v
        assert off.where(~measured).isnull().all(), v
    cells_equal(happy, old.sel(item="happy"), ("valid_mass", "topk_logprob", *TEXTS))
    # and the file equals a clean run of the new study, bit for bit on the copied cells
    clean = collect(second, models, **KW)
    assert clean.attrs["cells_computed"] == 4
    cells_equal(new.sel(item=["happy"]), clean.sel(item=["happy"]))
    for v in NUMBERS:
        np.testing.assert_allclose(new[v], clean[v], rtol=0, atol=BATCHING_TOLERANCE, err_msg=v)


def test_a_run_says_why_a_file_gave_fewer_cells_per_model(dirs, tmp_path, capsys):
    """Another identity, other settings, other labels: each named with its count; a file keyed
    by the earlier rule (the run's score axis in every key) is read, its cells computed again."""
    models = [entry(dirs, "a"), entry(dirs, "b", "a")]
    collect(tiny_prompts(1, 3), models, tmp_path / "old.nc", **KW)
    reuse = [tmp_path / "old.nc"]
    ds = collect(tiny_prompts(1, 3), [entry(dirs, "a"), entry(dirs, "b")], reuse=reuse,
                 **{**KW, "progress": True})  # fmt: skip
    said = capsys.readouterr().err
    why = read_attrs(ds)["reuse_sources"][str(reuse[0])]["not_reused"]
    assert list(why) == ["b"] and ds.attrs["cells_reused"] == 3
    assert list(why["b"].values()) == [3]
    assert next(iter(why["b"])).startswith("another model identity (")
    assert "model 'b': 3 another model identity (" in said
    ds = collect(tiny_prompts(1, 3), models, reuse=reuse, **{**KW, "top_k": 5})
    why = read_attrs(ds)["reuse_sources"][str(reuse[0])]["not_reused"]
    assert why["a"] == {"other settings (top_k: 20 -> 5)": 3}
    ds = collect(
        tiny_prompts(1, 3), models, reuse=reuse, **{**KW, "answer_labels": list("ABCDEFG")}
    )
    assert read_attrs(ds)["reuse_sources"][str(reuse[0])]["not_reused"]["a"] == {
        "other answer labels": 3
    }
    # a file keyed by the earlier rule: read, said, computed again
    old = open_results(tmp_path / "old.nc").load()
    info = read_attrs(old)["models"]
    for m in info.values():
        m["cell_identity"].pop("key_format")
        m["cell_identity"]["key_rule"] = "... KEY_FORMAT = 'xlikert-cell-1' (...)"
    old.attrs["models"] = info
    encode_attrs(old).to_netcdf(tmp_path / "v1.nc")
    with pytest.warns(UserWarning, match=r"v1.nc was keyed by an earlier key rule .*computed"):
        ds = collect(tiny_prompts(1, 3), models, reuse=[tmp_path / "v1.nc"], **KW)
    assert ds.attrs["cells_reused"] == 0
    why = read_attrs(ds)["reuse_sources"][str(tmp_path / "v1.nc")]["not_reused"]
    assert why["a"] == {"keyed by an earlier rule (xlikert-cell-1): its cells are computed "
                        "again": 3}  # fmt: skip
