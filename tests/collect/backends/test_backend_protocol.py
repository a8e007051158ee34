"""Every backend has one shape: the three functions of :class:`~xlikert.collect.protocol.Backend`
(``check``, ``inputs``, ``open``), defined in its package's ``__init__.py``."""

from __future__ import annotations

import importlib
import inspect

import pytest

from xlikert.collect import CollectOptions, UnitResult, protocol
from xlikert.collect.elicitation import score_elicited
from xlikert.collect.protocol import BACKENDS, Backend, backend_module
from xlikert.core.errors import CollectionError

SEAM = ("check", "inputs", "open")


@pytest.mark.parametrize("name", sorted(BACKENDS))
def test_each_backend_defines_the_three_functions_in_its_init(name):
    module = importlib.import_module(BACKENDS[name])
    assert module.__file__.endswith("__init__.py"), "a backend is a package"
    assert isinstance(module, Backend)
    for fn in SEAM:
        func = getattr(module, fn)
        assert func.__module__ == module.__name__, f"{name}.{fn} is defined in {func.__module__}"
        assert fn in module.__all__


@pytest.mark.parametrize("name", sorted(BACKENDS))
def test_each_backend_takes_the_protocols_arguments(name):
    module = importlib.import_module(BACKENDS[name])
    for fn in SEAM:
        want = inspect.signature(getattr(Backend, fn)).parameters
        got = inspect.signature(getattr(module, fn)).parameters
        want_names = [p for p in want if p != "self"]
        assert list(got) == want_names, f"{name}.{fn}{tuple(got)}"
        for p in want_names:
            assert got[p].kind == want[p].kind, f"{name}.{fn}: {p} is {got[p].kind}"


def test_the_backend_module_of_an_entry_is_checked_against_the_protocol(monkeypatch):
    entry = {"name": "m", "source": "openai:m"}
    assert backend_module(entry) is importlib.import_module(BACKENDS["openai"])
    monkeypatch.setitem(protocol.BACKENDS, "openai", "xlikert.collect.answers.layout")  # no seam
    with pytest.raises(CollectionError, match=r"xlikert\.collect\.answers\.layout does not define "
                       r"\['check', 'inputs', 'open'\]"):  # fmt: skip
        backend_module(entry)


# ------------------------------------------------------------------ the capabilities, typed
CAPABILITIES = (
    protocol.Model, protocol.MultiTokenModel, protocol.PrefixGroupModel,
    protocol.ConversationModel, protocol.ElicitingModel, protocol.ServerElicitingModel,
    protocol.LabelWalkingModel,
)  # fmt: skip


def _capabilities(model) -> set[str]:
    return {c.__name__ for c in CAPABILITIES if isinstance(model, c)}


class _Plain:
    """A backend's model with the one-token reading only (``Model``)."""

    name, mode = "plain", "exact"
    options = CollectOptions(scale=(1, 2, 3))

    def score(self, prompts):
        return UnitResult.empty(len(prompts), self.options.sizes)

    def relabel(self, labels):
        pass

    def provenance(self):
        return {}

    def close(self):
        pass


class _Server(_Plain):
    """A model that reads the elicitation levels its own way (``ServerElicitingModel``)."""

    def score_elicited(self, prompts, level, options, labels=None):
        res = self.score(prompts)
        res.data["pmf"][:] = {"prefix": 0.25, "greedy": 0.5, "stated": len(labels or "")}[level]
        return res


class _OldServer(_Plain):
    """A server model written before ``stated`` (no ``labels``): the other levels still work."""

    def score_elicited(self, prompts, level, options):
        res = self.score(prompts)
        res.data["pmf"][:] = 0.75
        return res


def test_the_transformers_model_has_every_in_process_capability(tmp_path):
    from support.tiny import save_tiny

    import xlikert.collect.backends.transformers as backend

    model = backend.open({"name": "tiny", "source": str(save_tiny(tmp_path / "m"))},
                         CollectOptions(scale=range(1, 8), top_k=3))  # fmt: skip
    try:
        assert _capabilities(model) == {
            "Model", "MultiTokenModel", "PrefixGroupModel", "ConversationModel", "ElicitingModel",
            "LabelWalkingModel",
        }  # fmt: skip
        with model.context_reader("s") as reader:
            assert isinstance(reader, protocol.CountingReader)
    finally:
        model.close()


def test_a_server_model_reads_one_token_and_elicits_its_own_way():
    from xlikert.collect.backends.openai.model import OpenAIModel
    from xlikert.collect.backends.openai.spec import parse_openai_spec

    spec = parse_openai_spec({"name": "m", "source": "openai:m", "base_url": "http://127.0.0.1:9"})
    model = OpenAIModel(spec, CollectOptions(scale=(1, 2, 3)))  # not opened: no request sent
    try:
        assert _capabilities(model) == {"Model", "ServerElicitingModel"}
        assert not isinstance(model, protocol.ConversationModel)
    finally:
        model.close()


@pytest.mark.parametrize("name", sorted(BACKENDS))
def test_each_backend_checks_its_elicitation_levels_by_type(name):
    module = importlib.import_module(BACKENDS[name])
    assert isinstance(module, protocol.ElicitingBackend)
    assert not isinstance(importlib.import_module("xlikert.collect.answers.layout"),
                          protocol.ElicitingBackend)  # fmt: skip


def test_score_elicited_dispatches_on_the_model_s_type():
    prompts = [("", "q1"), ("", "q2")]
    opts = CollectOptions(scale=(1, 2, 3))
    assert _capabilities(_Server()) == {"Model", "ServerElicitingModel"}
    for level, p in (("prefix", 0.25), ("greedy", 0.5)):
        assert (score_elicited(_Server(), prompts, level, opts).data["pmf"] == p).all()
        assert (score_elicited(_OldServer(), prompts, level, opts).data["pmf"] == 0.75).all()
    # stated: the answer labels are passed through to the server model
    got = score_elicited(_Server(), prompts, "stated", opts, labels=["a", "", "c"])
    assert (got.data["pmf"] == 3).all()
    assert _capabilities(_Plain()) == {"Model"}
    with pytest.raises(
        CollectionError, match=r"'plain'.*cannot read prompts as token ids.*'prefix'"
    ):
        score_elicited(_Plain(), prompts, "prefix", opts)
    with pytest.raises(CollectionError, match=r"'plain'.*cannot write replies.*'own_words'"):
        score_elicited(_Plain(), prompts, "own_words", opts)
