"""``xlikert prompts CONFIG``: show the design and write every rendered prompt."""

from __future__ import annotations

from pathlib import Path

import click

__all__ = ["prompts"]


@click.command("prompts")
@click.argument("config")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    default=None,
    help="Write every prompt to this file: .csv or .jsonl (one JSON object per line).",
)
@click.option(
    "-n",
    "--show",
    type=click.IntRange(min=0),
    default=1,
    show_default=True,
    help="Print the first N rendered prompts.",
)
def prompts(config: str, output: Path | None, show: int) -> None:
    """Render every prompt of the experiment CONFIG (a .toml file or a built-in name, e.g. demo).

    Prints the design (instrument, factors, levels, models, counts) and, with
    -o, writes one row per (condition, item): the factor levels, the item id,
    reverse_keyed, subscale, and the system and user messages. Then checks every
    model source without loading weights (a built-in name, a local path, a
    Hugging Face id; offline, one in the local Hugging Face cache) and fails
    naming the file and the model if one cannot be loaded.
    """
    from ..design import load_experiment, prompts_to_frame
    from ..errors import XlikertError

    if output is not None and output.suffix.lower() not in (".csv", ".jsonl"):
        raise click.BadParameter(
            f"unsupported output format {output.suffix or '(none)'!r}; use .csv or .jsonl",
            param_hint="-o/--output",
        )
    if output is not None and not output.parent.is_dir():
        raise click.BadParameter(
            f"cannot write {output}: directory {output.parent} does not exist",
            param_hint="-o/--output",
        )
    try:
        exp = load_experiment(config)
        ds = exp.build_prompts()
    except XlikertError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(exp.summary())
    df = prompts_to_frame(ds)
    for k in range(min(show, len(df))):
        row = df.iloc[k]
        cond = ", ".join(f"{d}={row[d]}" for d in exp.factors) or "(single condition)"
        click.echo(f"\n--- prompt {k + 1} of {len(df)}: {cond}, item={row['item']}")
        click.echo(f"[system]\n{row['system'] or '(none)'}")
        click.echo(f"[user]\n{row['user']}")
    if output is not None:
        if output.suffix.lower() == ".csv":
            df.to_csv(output, index=False)
        else:
            df.to_json(output, orient="records", lines=True, force_ascii=False)
        click.echo(f"\nWrote {len(df)} prompts to {output}")
    bad = _model_problems(exp)  # after the prompts: they are right whatever the models
    if bad:
        raise click.ClickException(
            f"{exp.path}: {len(bad)} model source(s) cannot be loaded "
            "(checked without loading any weights):\n" + "\n".join(f"  - {b}" for b in bad)
        )


def _model_problems(exp) -> list[str]:
    """One line per ``[[models]]`` entry whose source names nothing loadable (no weights loaded)."""
    from ..collect.zoo import source_problem

    out = []
    for m in exp.models:
        source = str(m.get("source") or m.get("name"))
        problem = source_problem(source, m.get("gguf_file"))
        if problem is not None:
            out.append(f"model {m.get('name', source)!r}: source {source!r}: {problem}")
    return out
