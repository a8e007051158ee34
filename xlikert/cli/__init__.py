"""Command-line interface: ``xlikert prompts | example | run | merge | plan | report | reliability | demo``.

The top layer of the package: one module per stage's commands (:mod:`.design`:
``prompts``, ``example``; :mod:`.collect`: ``run``, ``merge``; :mod:`.report`: ``report``,
``reliability``), registered here and imported when called, so ``xlikert --help``
starts fast: heavy imports (torch, transformers) happen only inside the command
that needs them. ``xlikert demo`` runs the whole pipeline: design -> collect ->
analysis -> report.
"""

from __future__ import annotations

import importlib
import time
from pathlib import Path

import click

from .._version import __version__

# (module, attribute) of each sub-command, imported lazily.
_COMMANDS: dict[str, tuple[str, str]] = {
    "prompts": ("xlikert.cli.design", "prompts_command"),
    "example": ("xlikert.cli.design", "example_command"),
    "run": ("xlikert.cli.collect", "run_command"),
    "merge": ("xlikert.cli.collect", "merge_command"),
    "plan": ("xlikert.cli.collect", "plan_command"),
    "demo": ("xlikert.cli", "demo_command"),
    "report": ("xlikert.cli.report", "report_command"),
    "reliability": ("xlikert.cli.report", "reliability_command"),
}


class _LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in _COMMANDS:
            return None
        module, attr = _COMMANDS[cmd_name]
        return getattr(importlib.import_module(module), attr)


@click.group(cls=_LazyGroup)
@click.version_option(__version__, prog_name="xlikert")
def main() -> None:
    """xlikert: exact Likert PMFs from language models, and their distributional ANOVA."""


def _demo_summary(ds) -> str:
    """Plain-text summary of a results Dataset through the analysis API.

    Failure rate per model, Multivariate Consensus and composite E (SD) per
    condition, and the decomposition's summary table.
    """
    import xlikert as xl

    from ..core.dims import MODEL_DIM

    def table(df) -> str:
        return df.to_string(float_format=lambda v: f"{v:.3f}")

    fr = xl.failure_rate(ds)
    fr = fr.mean([d for d in fr.dims if d != MODEL_DIM])
    comp = xl.summarize(xl.composite(ds), dim="score")
    cells = [d for d in comp.E.dims if d != MODEL_DIM]
    e_sd = (
        comp.E.to_series().map("{:.2f}".format)
        + " ("
        + comp.SD.to_series().map("{:.2f}".format)
        + ")"
    )
    from ..report.inputs import answer_tol_note

    cns = xl.consensus(ds).to_series()
    short = answer_tol_note(ds)
    return "\n".join(
        [
            *([f"Word answers read within a bound: {short}"] if short else []),
            "Constraint: failure rate (1 - valid mass), mean over conditions and items",
            table(fr.to_series().to_frame("failure rate")),
            "Consensus (multivariate), by model x condition:",
            table(cns.unstack(cells) if cells else cns.to_frame("Cns")),
            "Composite score E (SD), by model x condition:",
            (e_sd.unstack(cells) if cells else e_sd.to_frame("E (SD)")).to_string(),
            "Decomposition (distributional ANOVA on the composite):",
            xl.summary_table(xl.decompose(ds)).to_string(
                index=False, float_format=lambda v: f"{v:.3f}"
            ),
        ]
    )


@click.command("demo")
@click.option(
    "-o",
    "--output-dir",
    "out_dir",
    default="xlikert-demo",
    show_default=True,
    type=click.Path(file_okay=False),
    help="folder for results.nc, summary.txt, report",
)
@click.option("--batch-size", default="auto", show_default=True)
@click.option("--quiet", is_flag=True, help="no progress bar")
def demo_command(out_dir, batch_size, quiet):
    """Run the built-in offline experiment end to end (3 models x 4 targets x 17 items).

    Collects exact PMFs from the three offline models (one at a time), analyses
    them (failure rate, Consensus, composite, decomposition) and writes
    OUT_DIR/results.nc, OUT_DIR/summary.txt and the report.
    """
    from ..collect import collect
    from ..core.errors import XlikertError
    from ..design import load_experiment
    from .collect import parse_batch

    out = Path(out_dir)
    t0 = time.perf_counter()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise click.ClickException(f"cannot create output folder {out}: {exc}") from exc
    try:
        exp = load_experiment("demo")
        ds = collect(
            exp.build_prompts(),
            exp.models,
            out / "results.nc",
            batch_size=parse_batch(batch_size),
            progress=not quiet,
        )
        t_collect = time.perf_counter() - t0
        sizes = " x ".join(f"{d}={n}" for d, n in ds.valid_mass.sizes.items())
        text = (
            f"xlikert demo: experiment {exp.name!r}, {sizes}\n"
            f"collection {t_collect:.1f} s\n\n{_demo_summary(ds)}\n"
        )
        (out / "summary.txt").write_text(text)
        click.echo(text)
        from ..report import write_report  # after collection: matplotlib is not needed there

        # from the archived file: the report names it, and shows what a colleague will read
        click.echo(f"report: {write_report(out / 'results.nc', out)}")
    except XlikertError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(
        f"wrote {out / 'results.nc'} and {out / 'summary.txt'} in {time.perf_counter() - t0:.1f} s"
    )


if __name__ == "__main__":  # pragma: no cover
    main()
