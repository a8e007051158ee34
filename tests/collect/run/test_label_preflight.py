"""Bad answer labels refused by name before any model loads: the run's pre-flight checks
read each model's tokenizer only (the keys' inputs), and a label set the tokenizer cannot
spell at all stops the run there, naming the model, the tokenizer and the label."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")

from support.tiny import save_tiny, tiny_prompts

from xlikert.collect import collect
from xlikert.collect.options import CollectOptions
from xlikert.core.errors import CollectionError

WORDS = ("Never", "Rarely", "Sometimes", "Often", "Usually", "Always", "Jamais vu")


def no_model(spec, options, probe=None):
    raise AssertionError(f"model {spec['name']!r} was loaded")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return save_tiny(tmp_path_factory.mktemp("preflight") / "model")


def test_a_label_the_tokenizer_cannot_spell_is_refused_before_any_model_loads(folder):
    # the tiny tokenizer is word-level over printable ASCII, with no byte fallback: 'ü'
    # has no token and no sequence of tokens, so "Über" is spelled in no way at all
    labels = (*WORDS[:4], "Über", *WORDS[5:])
    opts = CollectOptions(scale=range(1, 8), answer_labels=labels)
    with pytest.raises(CollectionError) as err:
        collect(tiny_prompts(1, 2), {"name": "tiny", "source": str(folder)}, options=opts,
                progress=False, loader=no_model)  # fmt: skip
    msg = str(err.value)
    assert "model 'tiny'" in msg and "'Über'" in msg and "before any model loads" in msg
    assert str(folder) in msg or "tokenizer" in msg  # the tokenizer named
    assert "[5]" in msg  # the scale value without a spelling


def test_labels_it_can_spell_pass_the_check_and_the_run_goes_on(folder):
    opts = CollectOptions(scale=range(1, 8), answer_labels=WORDS, max_answer_positions=10)
    with pytest.raises(AssertionError, match="model 'tiny' was loaded"):  # the check passed
        collect(tiny_prompts(1, 2), {"name": "tiny", "source": str(folder)}, options=opts,
                progress=False, loader=no_model)  # fmt: skip
