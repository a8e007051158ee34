"""Every error a user can trigger is an XlikertError that keeps its old builtin base.

Each site below once raised a bare ``KeyError``, ``ValueError`` or ``Exception``; it now
raises a subclass of :class:`xlikert.core.errors.XlikertError` that is still caught by the
old builtin, and its message names the bad value and where it was looked for.
"""

from __future__ import annotations

import pytest

from xlikert.core import errors
from xlikert.core.codecs import decode_text, decode_token_ids, encode_text, encode_token_ids
from xlikert.datasets import human_baseline
from xlikert.design import Template, builtin_format, load_experiment, load_instrument
from xlikert.design.formats import format_from_table
from xlikert.kernels import get_kernel


def test_every_error_is_exported_and_an_xlikert_error_but_the_internal_one():
    for name in errors.__all__:
        cls = getattr(errors, name)
        assert issubclass(cls, Exception), name
        if name != "InternalError":
            assert issubclass(cls, errors.XlikertError), name


def test_unknown_name_error_is_a_key_error_whose_message_is_not_quoted():
    exc = errors.UnknownNameError("no factor 'x'")
    assert isinstance(exc, KeyError) and isinstance(exc, errors.XlikertError)
    assert str(exc) == "no factor 'x'"  # a plain KeyError would print "\"no factor 'x'\""
    assert str(KeyError("no factor 'x'")) != str(exc)


#: (call, the new class, the old builtin, words the message must hold)
SITES = {
    "builtin_format": (
        lambda: builtin_format("likert"),
        errors.UnknownNameError,
        KeyError,
        ["'likert'", "built-in format", "original", "letters"],
    ),
    "Experiment.factor": (
        lambda: load_experiment("formats").factor("frmat"),
        errors.UnknownNameError,
        KeyError,
        ["'frmat'", "experiment 'formats'", "format"],
    ),
    "Instrument.item": (
        lambda: load_instrument("mini_ipip").item("99"),
        errors.UnknownNameError,
        KeyError,
        ["'99'", "instrument 'mini_ipip'", "1, 2", "20"],
    ),
    "get_kernel": (
        lambda: get_kernel("convolve_itemz"),
        errors.UnknownNameError,
        KeyError,
        ["'convolve_itemz'", "convolve_items"],
    ),
    "human_baseline": (
        lambda: human_baseline("BIG5"),
        errors.UnknownNameError,
        KeyError,
        ["'BIG5'", "human baseline", "CETSCALE"],
    ),
    "Template.parse lone brace": (
        lambda: Template.parse("a {b"),
        errors.TemplateSyntaxError,
        Exception,
        ["'{'", "character 2"],
    ),
    "Template.parse bad modifier": (
        lambda: Template.parse("{item:shout}"),
        errors.TemplateSyntaxError,
        Exception,
        ["'shout'", "'{item:shout}'", "cap, lower, upper"],
    ),
    "decode_token_ids no prefix": (
        lambda: decode_token_ids("1,2,3"),
        errors.CodecError,
        ValueError,
        ["'1,2,3'", "int32+zlib+base64:"],
    ),
    "decode_token_ids corrupt": (
        lambda: decode_token_ids(encode_token_ids([1, 2])[:-4] + "@@@@"),
        errors.CodecError,
        ValueError,
        ["corrupt token ids", "int32+zlib+base64:"],
    ),
    "decode_text no prefix": (
        lambda: decode_text("I think 5."),
        errors.CodecError,
        ValueError,
        ["'I think 5.'", "zlib+base64:"],
    ),
    "decode_text corrupt": (
        lambda: decode_text(encode_text("I think 5.")[:-6]),
        errors.CodecError,
        ValueError,
        ["corrupt text", "zlib+base64:"],
    ),
    "format_from_table unknown key": (
        lambda: format_from_table("mine", {"bsae": "letters"}, 5),
        errors.FormatError,
        ValueError,
        ["'bsae'", "base, order"],
    ),
    "format_from_table unknown base": (
        lambda: format_from_table("mine", {"base": "likert"}, 5),
        errors.FormatError,
        ValueError,
        ["'likert'", "built-in"],
    ),
    "format_from_table bad order": (
        lambda: format_from_table("mine", {"order": "upside"}, 5),
        errors.FormatError,
        ValueError,
        ["'upside'", "order"],
    ),
    "format_from_table bad anchors": (
        lambda: format_from_table("mine", {"anchors": "loud"}, 5),
        errors.FormatError,
        ValueError,
        ["'loud'", "anchors"],
    ),
}


@pytest.mark.parametrize("site", list(SITES))
def test_bad_input_raises_an_xlikert_error_still_caught_by_the_old_builtin(site):
    call, new, old, words = SITES[site]
    with pytest.raises(new) as info:
        call()
    assert isinstance(info.value, errors.XlikertError)
    assert isinstance(info.value, old)
    message = str(info.value)
    missing = [w for w in words if w not in message]
    assert not missing, f"{site}: {missing} not in {message!r}"
