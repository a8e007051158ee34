"""Section "Constraint: failure rate": the probability outside the valid answers."""

from __future__ import annotations

from ... import plot
from ...analysis.constraint import failure_rate, failure_summary
from ..context import ReportContext
from ..page import Section
from ..tables import markdown_escape as md

__all__ = ["constraint_section"]


def constraint_section(ctx: ReportContext) -> Section:
    """Failure rate per condition and item (figure, summary by ``by``) and each model's rule."""
    s = Section("Constraint: failure rate")
    if "valid_mass" in ctx.ds:
        fr = failure_rate(ctx.ds)
        s.figure(
            plot.failure_rate(fr, by=ctx.by),
            ctx.out,
            "failure_rate",
            "Failure rate (probability outside the valid answers) per condition and item, "
            f"by {ctx.by}.",
        )
        s.table(
            failure_summary(fr, ctx.by),
            ctx.out,
            "failure_rate",
            f"Failure rate by {ctx.by}: mean, SD and max over conditions and items.",
            digits=4,
        )
    else:
        s.text("The results hold no `valid_mass`: the failure rate cannot be reported.")
    rules = {
        str(name): str(info["answers"]).split(":")[0]
        for name, info in (ctx.ds.attrs.get("models") or {}).items()
        if isinstance(info, dict) and info.get("answers")
    }
    if rules:
        s.text(
            "Valid answers (the rule per model; the full text is in the file's "
            "`attrs['models'][name]['answers']`): "
            + "; ".join(f"{md(name)}: {md(rule)}" for name, rule in rules.items())
            + "."
        )
    return s
