"""Prompt rendering: a chat template's refusal of a system turn, and nothing else, merges
the system prompt into the user turn (xlikert.collect.templates)."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")
pytest.importorskip("jinja2")

from support.tiny import CHAT_TEMPLATE, build_tokenizer

from xlikert.collect.templates import PromptTemplate

NO_SYSTEM = (
    "{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}"
    "{% endif %}" + CHAT_TEMPLATE
)


def template(source: str) -> PromptTemplate:
    tok = build_tokenizer()
    tok.chat_template = source
    return PromptTemplate(tok, "m")


def test_a_template_without_a_system_role_gets_the_system_prompt_in_the_user_turn():
    t = template(NO_SYSTEM)
    text = t.render("Rate 1-7.", "I like tea.")
    assert text == "<s><|user|>Rate 1-7.\n\nI like tea.</s><|assistant|>" and t.system_merged
    plain = template(CHAT_TEMPLATE)
    assert plain.render("Rate 1-7.", "I like tea.") == (
        "<s><|system|>Rate 1-7.</s><|user|>I like tea.</s><|assistant|>"
    )
    assert not plain.system_merged


def test_any_other_failure_of_a_template_is_raised_not_taken_for_a_refusal():
    t = template("{{ (messages | length) // 0 }}" + CHAT_TEMPLATE)
    with pytest.raises(ZeroDivisionError):
        t.render("Rate 1-7.", "I like tea.")
    assert not t.system_merged
