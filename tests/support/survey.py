"""A questionnaire as fielded, for tests: items with their own options, "Don't know" and
"Refused", a nominal item answered with its labels, one answered with letters.

``SURVEY`` is an instrument file: ``self`` 1..7 with the instrument's "Don't know" (code 8),
``tv`` 0..7 (its own scale, no option), ``trust`` 1..4 answered with letters with "Don't
know" and "Refused" (no codes: lettered E, F), ``vote`` nominal 0..1 answered with the
candidates' names. :func:`survey_prompts` writes it with an experiment file and builds the
prompts. ``GERMAN`` is its German translation (``SURVEY + GERMAN``): every text, the items'
own anchors and the options' labels in ASCII (the tiny tokenizer's characters), the
candidates as a German ballot might print them, so every answer label of ``vote`` differs.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

SURVEY = """
[instrument]
name = "survey"
citation = "Test (2024)."
default_framing = "plain"
placeholders = ["party"]

[framings]
plain = "Answer with ONLY the answer label."
shown = "Options: {anchors}."

[scale]
min = 1
max = 7
anchors = { 1 = "Extremely liberal", 7 = "Extremely conservative" }
nonsubstantive = [{ label = "Don't know", code = 8 }]

[[items]]
id = "self"
template = "Where would you place yourself?"

[[items]]
id = "tv"
template = "On how many days in the past week did you watch the news on TV?"
[items.scale]
min = 0
max = 7
anchors = { 0 = "None", 7 = "Every day" }

[[items]]
id = "trust"
template = "How much do you trust the government?"
[items.scale]
min = 1
max = 4
answers = "letters"
anchors = { 1 = "Never", 2 = "Some of the time", 3 = "Most of the time", 4 = "Always" }
nonsubstantive = [{ label = "Don't know" }, { label = "Refused" }]

[[items]]
id = "vote"
template = "Whom did you vote for?"
nominal = true
[items.scale]
min = 0
max = 1
answers = "labels"
anchors = { 0 = "Clinton", 1 = "Dole" }
"""

GERMAN = """
[translations.de]
source = "the project's own (a test)"
framings = { plain = "Antworte NUR mit der Antwort.", shown = "Optionen: {anchors}." }
anchors = { 1 = "Ganz links", 7 = "Ganz rechts" }
nonsubstantive = { "Don't know" = "Weiss nicht", "Refused" = "Verweigert" }
[translations.de.items]
self = "Wo wuerden Sie sich einordnen?"
tv = "An wie vielen Tagen der letzten Woche haben Sie Nachrichten im Fernsehen gesehen?"
trust = "Wie sehr vertrauen Sie der Regierung?"
vote = "Wen haben Sie gewaehlt?"
[translations.de.item_anchors]
tv = { 0 = "Keinen", 7 = "Jeden Tag" }
trust = { 1 = "Nie", 2 = "Manchmal", 3 = "Meistens", 4 = "Immer" }
vote = { 0 = "Bill Clinton", 1 = "Bob Dole" }
"""


def german_by_hand() -> str:
    """The survey written in German as an instrument of its own (what ``GERMAN`` translates
    it to, written apart: its options named by their German labels)."""
    text = SURVEY
    for en, de in (
        ("Answer with ONLY the answer label.", "Antworte NUR mit der Antwort."),
        ("Options: {anchors}.", "Optionen: {anchors}."),
        ("Extremely liberal", "Ganz links"),
        ("Extremely conservative", "Ganz rechts"),
        ("Don't know", "Weiss nicht"),
        ("Refused", "Verweigert"),
        ("Where would you place yourself?", "Wo wuerden Sie sich einordnen?"),
        ("On how many days in the past week did you watch the news on TV?",
         "An wie vielen Tagen der letzten Woche haben Sie Nachrichten im Fernsehen gesehen?"),
        ("How much do you trust the government?", "Wie sehr vertrauen Sie der Regierung?"),
        ("Whom did you vote for?", "Wen haben Sie gewaehlt?"),
        ('"None"', '"Keinen"'),
        ("Every day", "Jeden Tag"),
        ('"Never"', '"Nie"'),
        ("Some of the time", "Manchmal"),
        ("Most of the time", "Meistens"),
        ("Always", "Immer"),
        ('"Clinton"', '"Bill Clinton"'),
        ('"Dole"', '"Bob Dole"'),
    ):  # fmt: skip
        assert en in text, en
        text = text.replace(en, de)
    return text


USER = 'user = "As {party}: {item}\\n{options}\\nAnswer:"\n'
PARTY = '[factors.party.levels]\nDemocrat = "a Democrat"\nRepublican = "a Republican"\n'
#: The experiment's own user template in German (an experiment translates every text it
#: adds to the instrument's).
GERMAN_USER = 'user = "Als {party}: {item}\\n{options}\\nAntwort:"\n'
#: English and German crossed: the language factor and the experiment's German texts.
IN_TWO_LANGUAGES = (
    '[factors.language]\nkind = "language"\nlevels = ["en", "de"]\n'
    + "[translations.de]\n"
    + GERMAN_USER
)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def survey_experiment(
    tmp_path: Path, body: str = "", instrument: str = SURVEY, user: str = USER, head: str = ""
):
    """The survey administered under two party personas (``body``: more tables)."""
    from xlikert.design import load_experiment

    write(tmp_path, "survey.toml", instrument)
    text = '[experiment]\ninstrument = "survey.toml"\n' + user + head + PARTY
    return load_experiment(write(tmp_path, "exp.toml", text + textwrap.dedent(body)))
