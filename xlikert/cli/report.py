"""``xlikert report RESULTS.nc -o DIR``: the HTML and Markdown report of a results file;
``xlikert reliability RESULTS.nc --respondents target,prompt``: its reliability table."""

from __future__ import annotations

import click


@click.command("report")
@click.argument("results", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "-o",
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    default="xlikert-report",
    show_default=True,
    help="Output folder (index.html, report.md, figures/, tables/).",
)
@click.option(
    "--origin",
    "origins",
    multiple=True,
    metavar="LEVEL=ORIGIN",
    help="Country of origin of a level of the first factor, e.g. --origin Qwen3=China "
    "(repeatable); marks in-group cells. Default: a country_of_origin coordinate in the file.",
)
@click.option(
    "--tol",
    type=float,
    default=1e-4,
    show_default=True,
    help="Certified tolerance of Multivariate Consensus.",
)
@click.option(
    "--human",
    "human",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="Human data: a CSV of respondents (item columns, group columns named like the "
    "results' persona factors, optional 'weight') or a human PMF netCDF (xl.human_pmf); "
    "adds the section 'Alignment with human respondents'.",
)
@click.option(
    "--respondent-answers",
    "respondents",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="The respondents' answers, for results with a 'respondent' factor: a CSV with a "
    "'respondent' column (its levels) and a column per item; adds the section "
    "'Individual respondents'.",
)
@click.option(
    "--sections",
    default=None,
    metavar="NAME[,NAME...]",
    help="Write only these sections, comma-separated (e.g. design,constraint,consensus); "
    "an unknown name is refused with the list of sections.",
)
@click.option(
    "--skip",
    default=None,
    metavar="NAME[,NAME...]",
    help="Leave these sections out, comma-separated (e.g. construct,scale_reliability).",
)
@click.option(
    "--figures/--no-figures",
    default=True,
    show_default=True,
    help="Draw the figures; --no-figures writes the text and tables only, much faster.",
)
def report_command(
    results: str,
    out_dir: str,
    origins: tuple[str, ...],
    tol: float,
    human: str | None,
    respondents: str | None,
    sections: str | None,
    skip: str | None,
    figures: bool,
) -> None:
    """Write every table and figure of the analysis of RESULTS (netCDF) into a report."""
    from ..core.errors import XlikertError
    from ..report import write_report

    mapping = None
    if origins:
        mapping = {}
        for item in origins:
            if "=" not in item:
                raise click.BadParameter(
                    f"expected LEVEL=ORIGIN, got {item!r}", param_hint="--origin"
                )
            k, v = item.split("=", 1)
            mapping[k.strip()] = v.strip()
    try:
        path = write_report(
            results, out_dir, country_of_origin=mapping, tol=tol, human=human,
            respondents=respondents, figures=figures, sections=_names(sections),
            skip=_names(skip) or (),
        )  # fmt: skip
    except XlikertError as exc:  # bad input: a message, not a traceback (as the other commands)
        raise click.ClickException(str(exc)) from exc
    click.echo(f"Report written to {path}")


def _names(text: str | None) -> list[str] | None:
    """``"a, b"`` -> ``["a", "b"]`` (None: not given)."""
    return None if text is None else [n.strip() for n in text.split(",") if n.strip()]


@click.command("reliability")
@click.argument("results", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--respondents",
    default=None,
    metavar="FACTOR[,FACTOR...]",
    help="The factors whose conditions are the respondents, comma-separated (e.g. "
    "target,prompt). Default: every factor except model. The other factors (e.g. model) "
    "each get their own population.",
)
def reliability_command(results: str, respondents: str | None) -> None:
    """Print exact Cronbach's alpha, McDonald's omega and the weakest item of RESULTS.

    One row per population (each level of the factors not among the respondents) and
    subscale; reverse-keyed items are reflected first (xl.reliability).
    """
    from ..analysis.reliability import default_respondents, reliability_table
    from ..core.errors import XlikertError
    from ..core.io import open_results
    from ..core.schema import N_CONDITIONS_ATTR, RESPONDENT_DIMS_ATTR

    try:
        ds = open_results(results)
        if respondents is None:
            dims = default_respondents(ds["pmf"]) if "pmf" in ds else []
        else:
            dims = [d.strip() for d in respondents.split(",") if d.strip()]
        if not dims:
            raise click.BadParameter(
                "no respondent factor: pass --respondents (the file's factors are "
                f"{[d for d in ds.get('pmf', ds).dims if d not in ('item', 'score')]})",
                param_hint="--respondents",
            )
        table = reliability_table(ds, dims)
    except XlikertError as exc:
        raise click.ClickException(str(exc)) from exc
    n = table.attrs[N_CONDITIONS_ATTR]
    click.echo(
        f"Reliability over the {n} conditions of {', '.join(table.attrs[RESPONDENT_DIMS_ATTR])} "
        "(exact, from the PMFs; reverse-keyed items reflected):"
    )
    click.echo(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
