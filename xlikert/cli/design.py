"""``xlikert prompts CONFIG``: show the design and write every rendered prompt;
``xlikert example NAME``: an editable copy of a built-in experiment."""

from __future__ import annotations

from pathlib import Path

import click

__all__ = ["example_command", "prompts_command"]


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
    help="Print the first N rendered prompts (of each language, with a language factor).",
)
@click.option(
    "--history",
    default=None,
    help="Show the conversation sequential administration sends after these earlier answers "
    "(scores in the order asked, comma-separated, e.g. 3,5; a non-substantive option by its "
    'name, e.g. "Don\'t know",5), for the first sequential condition.',
)
def prompts_command(config: str, output: Path | None, show: int, history: str | None) -> None:
    """Render every prompt of the experiment CONFIG (a .toml file or a built-in name, e.g. demo).

    Prints the design (instrument, factors, levels, models, counts) and, with
    -o, writes one row per (condition, item): the factor levels, the item id,
    reverse_keyed, subscale, and the system and user messages. With --history,
    prints the messages of the conversation after that answer history (each
    model's chat template renders them; xlikert.collect.context gives the exact
    text). Then checks every
    model source without loading weights (a built-in name, a local path, a
    Hugging Face id; offline, one in the local Hugging Face cache) and fails
    naming the file and the model if one cannot be loaded.
    """
    from ..core.errors import XlikertError
    from ..core.schema import LANGUAGE_FACTOR_ATTR
    from ..design import load_experiment, prompts_to_frame

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
    lang = ds.attrs.get(LANGUAGE_FACTOR_ATTR)
    shown = (df.groupby(lang, sort=False).head(show) if lang in df else df.head(show)).index
    for k in shown:
        row = df.loc[k]
        cond = ", ".join(f"{d}={row[d]}" for d in exp.factors) or "(single condition)"
        click.echo(f"\n--- prompt {k + 1} of {len(df)}: {cond}, item={row['item']}")
        click.echo(f"[system]\n{row['system'] or '(none)'}")
        click.echo(f"[user]\n{row['user']}")
    if history is not None:
        _show_conversation(ds, history)
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


def _show_conversation(ds, history: str) -> None:
    """Print the messages after ``history`` in the first sequential condition."""
    from ..core.dims import ADMINISTRATION_DIM
    from ..core.errors import XlikertError
    from ..design.item_order import conversation

    scores: list[int | str] = [
        int(x) if x.lstrip("-").isdigit() else x
        for x in (part.strip() for part in history.split(","))
        if x
    ]
    condition = {}
    if ADMINISTRATION_DIM in ds.dims and "sequential" in ds[ADMINISTRATION_DIM].values:
        condition[ADMINISTRATION_DIM] = "sequential"
    else:
        click.echo("\n(the experiment administers its items in isolation; this is what "
                   "administration = sequential would send)")  # fmt: skip
    try:
        item, msgs = conversation(ds, scores, condition)
    except XlikertError as exc:
        raise click.BadParameter(str(exc), param_hint="--history") from None
    cond = ", ".join(f"{d}={ds[d].values[0] if d not in condition else condition[d]}"
                     for d in ds["user"].dims if d != "item")  # fmt: skip
    click.echo(f"\n--- conversation after the answers {scores}: {cond or '(single condition)'}, "
               f"item asked={item}")  # fmt: skip
    for role, text in msgs:
        click.echo(f"[{role}]\n{text}")


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


@click.command("example")
@click.argument("name", required=False)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the copy to this file (default: NAME.toml in the current folder).",
)
@click.option("--force", is_flag=True, help="Overwrite the file if it exists.")
def example_command(name: str | None, output: Path | None, force: bool) -> None:
    """Write an editable copy of the built-in experiment NAME; without NAME, list them.

    A built-in runs as it is by name (xlikert prompts paper; xlikert run paper -o
    paper.nc); copy it to change its models, factors or options, then run the copy.
    """
    from ..core.errors import XlikertError
    from ..design import builtin_experiments, load_experiment

    names = builtin_experiments()
    if name is None:
        for n in names:
            click.echo(f"{n:10s} {load_experiment(n).description}")
        return
    if name not in names:
        raise click.BadParameter(
            f"no built-in experiment {name!r}; built-ins: {', '.join(names)}", param_hint="NAME"
        )
    target = output if output is not None else Path(f"{name}.toml")
    if target.exists() and not force:
        raise click.ClickException(f"{target} exists; pass --force to overwrite it")
    if not target.parent.is_dir():
        raise click.BadParameter(
            f"cannot write {target}: directory {target.parent} does not exist",
            param_hint="-o/--output",
        )
    try:
        source = Path(load_experiment(name).path)
    except XlikertError as exc:  # pragma: no cover - the built-ins are tested
        raise click.ClickException(str(exc)) from exc
    target.write_bytes(source.read_bytes())
    click.echo(f"Wrote the built-in experiment {name!r} to {target}")
