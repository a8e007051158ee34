"""Section "Elicitation": the first-token reading against what the model would write.

Only for results with the ``elicitation`` factor (:mod:`xlikert.design.elicitation`)
and its level ``first_token``. The table is :func:`xlikert.elicitation_validity`, one row
per model and condition: how often the greedy reply writes the first-token mode, how
often it writes no answer, the total variation to the own-words PMF with its certified
bound, and the own-words "no answer" mass.
"""

from __future__ import annotations

from ...analysis.elicitation import elicitation_validity
from ...design.elicitation import ELICITATION_DIM
from ..inputs import ReportInputs
from ..page import Section
from ..tables import markdown_code as md_code

__all__ = ["elicitation_section"]


def elicitation_section(inputs: ReportInputs) -> Section | None:
    """The validity table; ``None`` without an elicitation factor with ``first_token``."""
    ds = inputs.ds
    if ELICITATION_DIM not in ds["pmf"].dims:
        return None
    levels = [str(v) for v in ds[ELICITATION_DIM].values]
    if "first_token" not in levels:
        return None
    s = Section("Elicitation")
    s.text(
        f"The factor {md_code(ELICITATION_DIM)} reads each cell as {', '.join(levels)}. "
        "A greedy reply's answer is its first valid answer token "
        "(`answer_parse_rule` in the file's attributes); a reply without one is a refusal "
        "or a reply that ends, or reaches the cap, without a code. The total variation to "
        "the own-words PMF is given with its certified error (docs/elicitation.md)."
    )
    table = elicitation_validity(ds).to_dataframe()
    table = table.dropna(axis=1, how="all")
    s.table(
        table,
        inputs.out,
        "elicitation_validity",
        "Validity of the first-token reading per model and condition (means over items): "
        "greedy agreement with the first-token mode, greedy no-answer share, TV to the "
        "own-words PMF and its certified bound, own-words no-answer mass.",
        digits=3,
    )
    return s
