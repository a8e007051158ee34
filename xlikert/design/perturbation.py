"""Prompt noise as a factor: seeded, stated transformations of the item text.

A factor of kind ``perturbation`` gives each level a rule, written in the experiment file
as a string ``"<rule> [key=value ...]"`` or, for a paraphrase, a table item id -> text::

    [factors.noise]
    kind = "perturbation"
    levels = { clean = "none", typos = "typos rate=0.05 seed=1", upper = "case upper",
               spaces = "whitespace rate=0.2 seed=2" }

    [factors.noise.levels.reworded]      # a paraphrase: every item's text, in item order
    paraphrase = ["Real Americans buy American.", "..."]

The rules (:data:`PERTURBATION_RULES`) change only the item's text inside the prompt: the
item's template is rendered alone with the condition's values, transformed, and put back
where it stands in the rendered user prompt. A random rule draws from
``numpy.random.default_rng([seed, zlib.crc32(item_id)])``, so an item's text under a level
is the same in every run, and each level's texts are rendered once, stored in the prompts
(``user``) and shown by ``xlikert prompts``; the rules are the prompts' attr
``perturbation_rules``. ``decompose`` gives the perturbation's effect like any factor's:
robustness is an exact variance component.

Examples
--------
>>> rule = parse_rule("typos rate=0.3 seed=7")
>>> rule.name, rule.rate, rule.seed
('typos', 0.3, 7)
>>> parse_rule("case upper").text
'case upper'
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..core.errors import ConfigError, DesignError
from .template import Template

__all__ = [
    "KEYBOARD_NEIGHBOURS",
    "PERTURBATION_RULES",
    "Perturbation",
    "parse_rule",
    "perturbation_attrs",
    "perturbed_prompt",
]

#: Each rule and what it does to the item's text (stored with the prompts).
PERTURBATION_RULES: Mapping[str, str] = {
    "none": "the text unchanged",
    "typos": "each ASCII letter, in order, draws u = rng.random(); where u < rate, "
    "rng.integers(3) picks the edit: 0 a keyboard neighbour (KEYBOARD_NEIGHBOURS[letter]"
    "[rng.integers(len)], the letter's case kept), 1 a swap with the next character (the "
    "pair is then passed), 2 a deletion; rate in [0, 1], seed an integer",
    "case": "'case upper' or 'case lower': every character's case changed (str.upper, str.lower)",
    "whitespace": "each space, in order, draws u = rng.random() and is doubled where u < rate; "
    "rate in [0, 1], seed an integer",
    "paraphrase": "the item's text given in the file ({ paraphrase = [one text per item, in "
    "item order] }), rendered with the condition's values like the item's own template",
}

_ROWS = ("qwertyuiop", "asdfghjkl", "zxcvbnm")


def _neighbours() -> dict[str, str]:
    pos = {c: (r, i) for r, row in enumerate(_ROWS) for i, c in enumerate(row)}
    out = {}
    for c, (r, i) in pos.items():
        near = [
            row[j]
            for rr, row in enumerate(_ROWS)
            if abs(rr - r) <= 1
            for j in range(len(row))
            if abs(j - i) <= 1 and row[j] != c
        ]
        out[c] = "".join(sorted(near))
    return out


#: The QWERTY keys next to each lowercase letter (same row and the rows above and below,
#: one column either side), sorted.
KEYBOARD_NEIGHBOURS: Mapping[str, str] = _neighbours()


@dataclass(frozen=True)
class Perturbation:
    """One level's rule: its name, rate, seed, case or paraphrases (item id -> text)."""

    name: str
    rate: float = 0.0
    seed: int = 0
    case: str = ""
    paraphrases: dict[str, str] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """The rule as the file writes it (a paraphrase: ``"paraphrase"``)."""
        if self.name in ("typos", "whitespace"):
            return f"{self.name} rate={self.rate:g} seed={self.seed}"
        return f"case {self.case}" if self.name == "case" else self.name


def _number(key: str, value: str, rule: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise DesignError(f"rule {rule!r}: {key} must be a number, got {value!r}") from None


def parse_rule(rule: str | Mapping[str, object], items: Sequence[str] = ()) -> Perturbation:
    """The :class:`Perturbation` a level's rule says (``items``: the ids a paraphrase's
    texts belong to, in order).

    Raises
    ------
    DesignError
        An unknown rule, a rate outside [0, 1], a seed that is not an integer, an unknown
        key or case, a paraphrase that is not text -- each naming the rule.

    Examples
    --------
    >>> parse_rule("whitespace rate=1.5 seed=0")
    Traceback (most recent call last):
    ...
    xlikert.core.errors.DesignError: rule 'whitespace rate=1.5 seed=0': rate must be in [0, 1], got 1.5
    """
    if isinstance(rule, Mapping):
        texts = rule.get("paraphrase")
        if set(rule) != {"paraphrase"} or not isinstance(texts, list):
            raise DesignError(
                f"rule {dict(rule)!r}: a table rule is {{ paraphrase = [one text per item] }}"
            )
        if len(texts) != len(items) or not all(isinstance(t, str) and t.strip() for t in texts):
            raise DesignError(
                f"paraphrase: give one non-empty text per item administered ({len(items)}: "
                f"{list(items)}), in that order; got {len(texts)}"
            )
        return Perturbation("paraphrase", paraphrases=dict(zip(items, texts, strict=True)))
    words = str(rule).split()
    if not words or words[0] not in PERTURBATION_RULES or words[0] == "paraphrase":
        raise DesignError(
            f"rule {rule!r}: not a perturbation; rules: 'none', 'typos rate=R seed=S', "
            "'case upper', 'case lower', 'whitespace rate=R seed=S', or a table "
            "{ paraphrase = [one text per item, in item order] }"
        )
    name, rest = words[0], words[1:]
    if name == "none" and not rest:
        return Perturbation("none")
    if name == "case":
        if rest not in (["upper"], ["lower"]):
            raise DesignError(f"rule {rule!r}: write 'case upper' or 'case lower'")
        return Perturbation("case", case=rest[0])
    keys = {w.partition("=")[0]: w.partition("=")[2] for w in rest}
    unknown = sorted(set(keys) - {"rate", "seed"})
    if unknown or name == "none" or set(keys) != {"rate", "seed"}:
        raise DesignError(f"rule {rule!r}: {name} takes rate=R and seed=S (got {rest})")
    rate = _number("rate", keys["rate"], str(rule))
    if not 0.0 <= rate <= 1.0:
        raise DesignError(f"rule {rule!r}: rate must be in [0, 1], got {rate:g}")
    seed = _number("seed", keys["seed"], str(rule))
    if seed != int(seed) or seed < 0:
        raise DesignError(f"rule {rule!r}: seed must be a non-negative integer, got {keys['seed']}")
    return Perturbation(name, rate=rate, seed=int(seed))


def _rule_rng(seed: int, item_id: str) -> np.random.Generator:
    """The generator a random rule draws from for one item: ``default_rng([seed, crc32(id)])``.

    Examples
    --------
    >>> float(_rule_rng(1, "a").random()) == float(_rule_rng(1, "a").random())
    True
    """
    return np.random.default_rng([int(seed), zlib.crc32(str(item_id).encode("utf-8"))])


def _typos(text: str, rate: float, rng: np.random.Generator) -> str:
    chars = list(text)
    out: list[str] = []
    i = 0
    while i < len(chars):
        c = chars[i]
        if not (c.isascii() and c.isalpha()) or rng.random() >= rate:
            out.append(c)
            i += 1
            continue
        op = int(rng.integers(3))
        if op == 0:
            near = KEYBOARD_NEIGHBOURS[c.lower()]
            n = near[int(rng.integers(len(near)))]
            out.append(n.upper() if c.isupper() else n)
        elif op == 1 and i + 1 < len(chars):
            out += [chars[i + 1], c]
            i += 1
        elif op == 1:
            out.append(c)
        i += 1
    return "".join(out)


def _perturb(text: str, rule: Perturbation, item_id: str) -> str:
    """The item's rendered text under ``rule`` (a paraphrase is applied by the caller).

    Examples
    --------
    >>> _perturb("a b c", parse_rule("whitespace rate=1 seed=0"), "q")
    'a  b  c'
    >>> _perturb("abc", parse_rule("typos rate=0 seed=3"), "q")
    'abc'
    """
    if rule.name == "typos":
        return _typos(text, rule.rate, _rule_rng(rule.seed, item_id))
    if rule.name == "whitespace":
        rng = _rule_rng(rule.seed, item_id)
        return "".join("  " if c == " " and rng.random() < rule.rate else c for c in text)
    if rule.name == "case":
        return text.upper() if rule.case == "upper" else text.lower()
    return text


def perturbed_prompt(
    prompt: str, item_t: Template, item_id: str, values: Mapping[str, str], rule: Perturbation
) -> str:
    """The rendered user prompt with its item text under ``rule``.

    The item's template is rendered alone with ``values`` and its text, where it stands in
    ``prompt`` (its first occurrence), is replaced by the transformed text.

    Raises
    ------
    ConfigError
        The item's text is not in the prompt (a user template that changes it).

    Examples
    --------
    >>> t = Template.parse("Buy {what}.")
    >>> perturbed_prompt("Q: Buy local. Answer 1-5.", t, "1", {"what": "local"},
    ...                  parse_rule("case upper"))
    'Q: BUY LOCAL. Answer 1-5.'
    """
    if rule.name == "none":
        return prompt
    original = item_t.render(values)
    if rule.name == "paraphrase":
        new = Template.parse(rule.paraphrases[item_id]).render(values)
    else:
        new = _perturb(original, rule, item_id)
    if original not in prompt:
        raise ConfigError(
            f"item {item_id!r}: its text {original!r} is not in the rendered prompt, so the "
            f"perturbation {rule.text!r} cannot be applied to it"
        )
    return prompt.replace(original, new, 1)


def perturbation_attrs(factors: Sequence) -> dict[str, str]:
    """The prompts' attrs of a ``perturbation`` factor: each level's rule and what the
    rules do (JSON objects); empty without the factor."""
    import json

    f = next((f for f in factors if f.kind == "perturbation"), None)
    if f is None:
        return {}
    rules = {lv: r.text for lv, r in f.perturbations.items()}
    used = {r.name: PERTURBATION_RULES[r.name] for r in f.perturbations.values()}
    if any(r.name == "typos" for r in f.perturbations.values()):
        used["keyboard_neighbours"] = json.dumps(dict(KEYBOARD_NEIGHBOURS))
    paraphrases = {lv: r.paraphrases for lv, r in f.perturbations.items() if r.paraphrases}
    out = {
        "perturbation_factor": f.name,
        "perturbation_rules": json.dumps(rules, ensure_ascii=False),
        "perturbation_rule_text": json.dumps(used, ensure_ascii=False),
    }
    if paraphrases:
        out["perturbation_paraphrases"] = json.dumps(paraphrases, ensure_ascii=False)
    return out
