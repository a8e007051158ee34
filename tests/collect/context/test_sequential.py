"""Sequential administration: the answer-history tree, exact and certified.

The algorithm against brute force on a toy conversation model with known PMFs
(support/conversation.py), then the transformers backend on a tiny random model:
every stored conditional PMF against an independent forward pass of the whole
conversation, the prefix reuse, and a model that ignores context.
"""

from __future__ import annotations

import functools
import itertools
import re
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from support.conversation import ToyModel, brute_force

from xlikert.collect.context import (
    Battery,
    administer,
    battery_from_prompts,
    full_joint,
    history_tree,
    sequential_dataset,
)
from xlikert.collect.protocol import conversation_model
from xlikert.core.errors import CollectionError, XlikertError


def toy_battery(K: int, S: int) -> Battery:
    return Battery("sys", tuple(f"q{j}" for j in range(K)), tuple(str(y) for y in range(1, S + 1)))


def full_size(K: int, S: int) -> int:
    return sum(S**j for j in range(K))


# ----------------------------------------------------------------------------- the algorithm
def test_exact_tree_equals_brute_force():
    model = ToyModel(4, 3, seed=1)
    res = administer(model, toy_battery(4, 3))
    exact = brute_force(model)
    assert res.tol_met and res.passes == full_size(4, 3) == res.tree.size
    assert len(set(model.reads)) == len(model.reads) == res.passes  # each history read once
    m, j = res.marginals(), res.joints()
    np.testing.assert_allclose(m["pmf"], exact["pmf"], atol=1e-13, rtol=0)
    np.testing.assert_allclose(m["valid_mass"], exact["valid_mass"], atol=1e-13, rtol=0)
    np.testing.assert_allclose(j["joint"], exact["joint"], atol=1e-13, rtol=0)
    np.testing.assert_allclose(full_joint(res.tree), exact["full"], atol=1e-13, rtol=0)
    assert (m["error"] == 0).all() and (m["unexplored"] == 0).all() and (j["error"] == 0).all()
    # the pairwise joints marginalise to the marginals, both ways
    np.testing.assert_allclose(j["joint"].sum(-1), m["pmf"][:, None, :].repeat(4, 1), atol=1e-13)
    np.testing.assert_allclose(j["joint"].sum(-2), m["pmf"][None, :, :].repeat(4, 0), atol=1e-13)


@pytest.mark.parametrize("batch", [1, 7])
@pytest.mark.parametrize("tol", [0.2, 0.05, 1e-2, 1e-3, 1e-4])
def test_pruned_tree_is_within_its_certified_bounds(tol, batch):
    model = ToyModel(5, 4, seed=3, sharpness=2.5)
    exact = brute_force(model)
    res = administer(model, toy_battery(5, 4), tol=tol, batch=batch)
    m, j = res.marginals(), res.joints()
    assert res.tol_met and (m["error"] <= tol).all() and (m["valid_mass_error"] <= tol).all()
    assert (np.abs(m["pmf"] - exact["pmf"]) <= m["error"][:, None] + 1e-14).all()
    assert (m["pmf_lower"] <= exact["pmf"] + 1e-14).all()
    assert (exact["pmf"] <= m["pmf_upper"] + 1e-14).all()
    assert (np.abs(m["valid_mass"] - exact["valid_mass"]) <= m["valid_mass_error"] + 1e-14).all()
    assert (np.abs(j["joint"] - exact["joint"]) <= j["error"][..., None, None] + 1e-14).all()
    np.testing.assert_allclose(m["pmf"].sum(-1), 1.0, atol=1e-13)
    if tol >= 1e-2:  # pruning pays
        assert res.passes < full_size(5, 4)


def test_budget_spent_says_so_and_keeps_the_bound_it_reached():
    model = ToyModel(5, 4, seed=3)
    exact = brute_force(model)
    with pytest.warns(RuntimeWarning, match="max_passes=12"):
        res = administer(model, toy_battery(5, 4), tol=1e-6, max_passes=12, batch=5)
    m = res.marginals()
    assert res.passes == 12 and not res.tol_met
    assert m["error"].max() > 1e-6
    assert (np.abs(m["pmf"] - exact["pmf"]) <= m["error"][:, None] + 1e-14).all()
    ds = sequential_dataset(res)
    assert ds.attrs["tol_met"] == "false" and ds.attrs["exact"] == "false"
    assert float(ds.error.max()) == pytest.approx(
        max(m["error"].max(), m["valid_mass_error"].max())
    )
    with pytest.raises(CollectionError, match="pruned"):
        full_joint(res.tree)


def test_a_model_that_ignores_context_gives_the_isolated_pmfs():
    model = ToyModel(4, 3, seed=2, carry=0.0)
    res = administer(model, toy_battery(4, 3))
    iso = np.stack([model.conditional(j, [])[0] for j in range(4)])
    np.testing.assert_allclose(res.marginals()["pmf"], iso, atol=1e-15, rtol=0)
    joint = res.joints()["joint"]
    for i, k in itertools.permutations(range(4), 2):
        np.testing.assert_allclose(joint[i, k], np.outer(iso[i], iso[k]), atol=1e-15)


def test_dataset_holds_the_tree_and_the_rules(tmp_path):
    model = ToyModel(3, 3, seed=4)
    res = administer(model, toy_battery(3, 3), tol=0.05, batch=1)
    ds = sequential_dataset(res)
    assert ds.pmf.dims == ("item", "score") and ds.sizes["history"] == res.tree.size
    assert ds.joint.dims == ("item", "other_item", "score", "other_score")
    for key in ("conversation_rule", "history_rule", "certified_bound_rule", "expansion_rule"):
        assert key in ds.attrs
    path = tmp_path / "seq.nc"
    ds.to_netcdf(path)
    with xr.open_dataset(path) as back:
        back = back.load()
    xr.testing.assert_identical(back, ds)
    tree = history_tree(back)
    np.testing.assert_array_equal(tree.parent, res.tree.parent)
    np.testing.assert_array_equal(tree.read, res.tree.read)
    with pytest.raises(CollectionError, match="no history tree"):
        history_tree(ds.drop_vars("history_pmf"))


def test_bad_arguments_and_batteries_are_named():
    model = ToyModel(2, 3)
    for kw in ({"tol": -1}, {"tol": "x"}, {"max_passes": 0}, {"batch": 0}):
        with pytest.raises(XlikertError):
            administer(model, toy_battery(2, 3), **kw)
    prompts = xr.Dataset(
        {"user": ("item", ["a", "b"]), "system": ("item", ["s1", "s2"])},
        coords={"item": ["1", "2"]},
        attrs={"scale_min": 1, "scale_max": 3},
    )
    with pytest.raises(CollectionError, match="one system prompt per conversation"):
        battery_from_prompts(prompts)
    with pytest.raises(CollectionError, match="two answers or more"):
        Battery("s", ("a",), ("1",))


def test_a_server_backend_refuses_with_a_clear_error():
    from xlikert.collect.backends.openai.model import OpenAIModel

    server = object.__new__(OpenAIModel)
    server.name = "gpt"
    with pytest.raises(CollectionError, match=r"sequential administration .* transformers"):
        conversation_model(server)


# ----------------------------------------------------------------------------- a real (tiny) model
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from support.tiny import save_tiny, tiny_prompts  # noqa: E402

from xlikert.collect.options import CollectOptions  # noqa: E402

VALID = re.compile(r"^[ ▁Ġ]?[1-7]$")


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory) -> Path:
    return save_tiny(tmp_path_factory.mktemp("tiny") / "model")


def open_local(folder, **kw):
    import xlikert.collect.backends.transformers as backend

    return backend.open(
        {"name": "tiny", "source": str(folder)}, CollectOptions(scale=range(1, 8), **kw)
    )


@pytest.fixture(scope="module")
def tiny(tiny_dir):
    return open_local(tiny_dir)


@pytest.fixture(scope="module")
def tiny_battery() -> Battery:
    return battery_from_prompts(tiny_prompts().isel(target=0, item=[0, 1, 2]))


@pytest.fixture(scope="module")
def tiny_exact(tiny, tiny_battery):
    return administer(tiny, tiny_battery)


@functools.lru_cache(maxsize=2)
def plain_model(folder: Path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    return tok, AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()


def plain_pass(folder: Path, system: str, turns, user: str) -> tuple[np.ndarray, float]:
    """The answer PMF and valid mass after a conversation, written plainly: the chat
    template, a forward pass, the one-token rule plus a bare space then a digit."""
    tok, model = plain_model(folder)
    msgs = [{"role": "system", "content": system}]
    for q, a in turns:
        msgs += [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
    msgs.append({"role": "user", "content": user})
    text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    ids = tok(text, add_special_tokens=False).input_ids
    vocab = tok.get_vocab()
    space = vocab[" "]
    with torch.no_grad():
        q0 = torch.softmax(model(torch.tensor([ids])).logits[0, -1].double(), -1).numpy()
        q1 = torch.softmax(model(torch.tensor([[*ids, space]])).logits[0, -1].double(), -1).numpy()
    mass = np.zeros(7)
    for t, i in vocab.items():
        if VALID.match(t):
            mass[int(t[-1]) - 1] += q0[i]
    for y in range(1, 8):
        mass[y - 1] += q0[space] * q1[vocab[str(y)]]
    return mass / mass.sum(), float(mass.sum())


def conversation_ids(model, b: Battery, path: np.ndarray) -> list[int]:
    h = [int(a) for a in path if a >= 0]
    return model.conversation(b.system, b.turns(h), b.questions[len(h)])[1]


def test_every_stored_pmf_equals_an_independent_pass_of_its_conversation(
    tiny, tiny_exact, tiny_battery, tiny_dir
):
    res = tiny_exact
    assert res.tol_met and res.passes == 1 + 7 + 49
    # read with reuse, and its check against an uncached pass did not turn it off
    assert tiny.scorer.prefix_cache and "tree" in tiny.lm.cache_checked
    tree, b = res.tree, tiny_battery
    for n, path in enumerate(tree.paths):
        h = [int(a) for a in path if a >= 0]
        pmf, vm = plain_pass(tiny_dir, b.system, b.turns(h), b.questions[len(h)])
        np.testing.assert_allclose(tree.pmf[n], pmf, atol=1e-5, rtol=0, err_msg=str(h))
        assert abs(tree.valid_mass[n] - vm) <= 1e-5


def test_histories_reuse_their_parents_prompt(tiny, tiny_exact, tiny_battery, tiny_dir):
    b = tiny_battery
    ids = [conversation_ids(tiny, b, p) for p in tiny_exact.tree.paths]
    whole = sum(len(i) + 1 for i in ids)  # + the split-space row's space token
    assert tiny_exact.info["tokens_run"] < whole / 2  # every child ran from its parent's cache
    # no reuse at all, and reuse under a memory budget that evicts: the same numbers
    off = administer(open_local(tiny_dir, prefix_cache=False), b)
    assert off.info["tokens_run"] == whole
    np.testing.assert_allclose(off.tree.pmf, tiny_exact.tree.pmf, atol=1e-5, rtol=0)
    reader = tiny.context_reader("evict")
    reader.max_bytes = 20_000
    out = reader.read(ids)
    assert reader.bytes <= 20_000 and len(reader.kept) < len(ids)
    reader.close()
    np.testing.assert_allclose(out["pmf"], tiny_exact.tree.pmf, atol=1e-5, rtol=0)


def test_pruned_run_on_a_model_is_within_its_bounds(tiny, tiny_exact, tiny_battery):
    exact = tiny_exact.marginals()["pmf"]
    for tol in (0.05, 1e-2, 1e-3):
        res = administer(tiny, tiny_battery, tol=tol, batch=4)
        m = res.marginals()
        assert res.tol_met and (m["error"] <= tol).all()
        # the bound covers the pruning; each history carries the pass's float32 round-off
        assert (np.abs(m["pmf"] - exact) <= m["error"][:, None] + 1e-6).all()


def test_a_model_that_ignores_context_gives_the_isolated_pmfs_exactly(tmp_path):
    """Attention and MLP outputs zeroed: the logits depend on the last token only, and a
    template without a generation prompt ends each conversation on the item's last character."""
    folder = save_tiny(tmp_path / "blind")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(folder)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
    model.save_pretrained(folder)
    tok = AutoTokenizer.from_pretrained(folder)
    tok.chat_template = (
        "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}{% endfor %}"
    )
    tok.save_pretrained(folder)
    local = open_local(folder)
    b = Battery("Rate 1-7.", ("Tea?", "Coffee!", "Milk."), tuple(str(y) for y in range(1, 8)))
    res = administer(local, b)
    iso = local.score([(b.system, q) for q in b.questions]).data["pmf"]
    assert np.abs(iso[0] - iso[1]).max() > 1e-3  # the items differ
    np.testing.assert_allclose(res.marginals()["pmf"], iso, atol=1e-7, rtol=0)
    joint = res.joints()["joint"]
    np.testing.assert_allclose(joint[0, 2], np.outer(iso[0], iso[2]), atol=1e-7)


def test_dataset_of_a_model_carries_the_decoding_grid_and_the_conversations(
    tiny, tiny_exact, tiny_battery, tiny_dir
):
    ds = sequential_dataset(tiny_exact)
    assert ds.decoding_pmf.dims == ("item", "temperature", "top_p", "score")
    plain = ds.decoding_pmf.sel(temperature=1.0, top_p=1.0)
    np.testing.assert_allclose(plain, ds.pmf, atol=1e-12)
    assert (ds.decoding_error.sel(temperature=1.0, top_p=1.0) == 0).all()
    b = tiny_battery
    tok, _ = plain_model(tiny_dir)
    msgs = [{"role": "system", "content": b.system}, {"role": "user", "content": b.questions[0]},
            {"role": "assistant", "content": "4"}, {"role": "user", "content": b.questions[1]}]  # fmt: skip
    text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    assert tiny_exact.conversation(tiny, [3]) == text
