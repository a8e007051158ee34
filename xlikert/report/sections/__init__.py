"""The report's sections, one module each, in the order the report shows them.

Every section is a function ``f(inputs: ReportInputs) -> Section | None``: it
reads the prepared inputs (:class:`xlikert.report.inputs.ReportInputs`:
the results, the factor roles, the options, the output folder, and the
analyses several sections share), writes its tables and figures through
:class:`xlikert.report.page.Section`, and returns the section, or ``None``
where it does not apply (no traces, no human data).

=================  ==========================================================
module             section
=================  ==========================================================
``design``         Design: conditions, factors, scoring of the composite
``constraint``     Constraint: failure rate and each model's answer rule
``elicitation``   Elicitation: greedy and own-words readings against the first
                   token (only with an ``elicitation`` factor)
``consensus``      Consensus: Multivariate Consensus and joint entropy
``construct``      Construct: composite PMFs, human baseline, effects; the
                   parts repeated per subscale are in ``per_subscale``
``formats``        Response format: the format effect and its interactions
                   (only with a factor of kind ``format``)
``languages``      Languages: the items that move most between languages, the
                   composite per language (only with a factor of kind ``language``)
``context``        Context and order: isolated vs sequential administration,
                   certified bounds, position and item-order effects,
                   carry-over (only with sequentially administered cells)
``reasoning``      Reasoning traces: trace-sampling SEs, thinking on vs off
``reliability``    Reliability: α, ω and the weakest item, built by
                   :mod:`xlikert.report.sections.reliability`
``sampling``       The cost of generative sampling: SE, sign flips, decoding bias
``alignment``      Alignment with human respondents (``--human``), built by
                   :mod:`xlikert.report.sections.alignment`
``validity``       Which reading is closest to people: the elicitation levels
                   against the same respondents (human data and two levels or more)
``individual``     Individual respondents: each person's answer scored against
                   the model's exact PMF for that person (only with a
                   ``respondent`` factor and the respondents' answers)
=================  ==========================================================

To add a section: write the function (a module here, or beside the report
package), then add it to :data:`xlikert.report.SECTIONS` where it should
appear. Nothing else changes: the page and its table of contents are built
from that list.
"""

from __future__ import annotations

from .alignment import human_alignment_section
from .consensus import consensus_section
from .constraint import constraint_section
from .construct import construct_section
from .context import context_section
from .design import design_section
from .elicitation import elicitation_section
from .formats import format_section
from .individual import individual_respondents_section
from .languages import languages_section
from .reasoning import reasoning_section
from .reliability import scale_reliability_section
from .sampling import sampling_cost_section
from .validity import closest_reading_section

__all__ = [
    "closest_reading_section",
    "consensus_section",
    "constraint_section",
    "construct_section",
    "context_section",
    "design_section",
    "elicitation_section",
    "format_section",
    "human_alignment_section",
    "individual_respondents_section",
    "languages_section",
    "reasoning_section",
    "sampling_cost_section",
    "scale_reliability_section",
]
