"""The answer rule: how a token, or a spelling of several tokens, becomes an answer.

Every backend and every reader of answers (elicitation, sequential administration,
respondents) applies the rule through this package and none writes it again (paper
section "Constraint": every token that decodes to a scale value counts). Its modules,
from the bottom up:

* :mod:`~xlikert.collect.answers.numerals` -- numbers in any decimal script;
* :mod:`~xlikert.collect.answers.vocabulary` -- a tokenizer's tokens as bytes and text;
* :mod:`~xlikert.collect.answers.tokens` -- the one-token valid set;
* :mod:`~xlikert.collect.answers.layout` -- where an item's answer codes go in a results row;
* :mod:`~xlikert.collect.answers.sequences` -- the answer spellings and their readout;
* :mod:`~xlikert.collect.answers.spellings` -- which rule a tokenizer needs, and its spellings.
"""
