"""``xlikert run``, ``xlikert merge`` and ``xlikert plan``.

This module imports neither torch nor transformers; they load inside the commands.
"""

from __future__ import annotations

import os
import shlex
import sys
import time
from typing import Any

import click

from ..core.errors import XlikertError

__all__ = ["FLAGS", "merge_command", "parse_batch", "plan_command", "run_command"]


def _fail(exc: Exception) -> None:
    raise click.ClickException(str(exc)) from exc


def parse_batch(value: str) -> int | str:
    if value == "auto":
        return value
    try:
        n = int(value)
    except ValueError:
        raise click.BadParameter(f"expected a positive integer or 'auto', got {value!r}") from None
    if n < 1:
        raise click.BadParameter(f"expected a positive integer or 'auto', got {value!r}")
    return n


def _parse_floats(value: str) -> tuple[float, ...]:
    """``"0.9,1.0"`` -> ``(0.9, 1.0)`` (a comma-separated list of numbers)."""
    parts = [v.strip() for v in str(value).split(",")]
    try:
        return tuple(float(v) for v in parts)
    except ValueError:
        raise click.BadParameter(
            f"expected numbers separated by commas (e.g. 0.9,1.0), got {value!r}"
        ) from None


#: ``xlikert run`` flag -> the CollectOptions field it sets.
FLAGS: dict[str, str] = {
    "--temperature": "temperatures",
    "--top-p": "top_ps",
    "--top-k": "top_k",
    "--batch-size": "batch_size",
    "--chunk-size": "chunk_size",
    "--device": "device",
    "--dtype": "dtype",
    "--device-map": "device_map",
    "--prefix-cache/--no-prefix-cache": "prefix_cache",
    "--split-space/--one-token": "split_space",
    "--trust-remote-code/--no-trust-remote-code": "trust_remote_code",
    "--tol": "tol",
    "--max-passes": "max_passes",
    "--replicas": "replicas",
}


def _run_options(collect_table: dict[str, Any] | None, where: str, **flags: Any):
    """The run's :class:`~xlikert.collect.options.CollectOptions`: the flags given
    (not None) over the experiment file's ``[collect]`` table over the defaults.

    Each flag is checked on its own first, so an error names the flag.
    """
    from ..collect.options import CollectOptions

    if collect_table and "scale" in collect_table:
        raise XlikertError(
            f"{where}: 'scale' is not set here; the scale is the instrument's, or the "
            "experiment file's [scale] table"
        )
    given: dict[str, Any] = {}
    for flag, field in FLAGS.items():
        value = flags.get(field)
        if value is None:
            continue
        try:
            CollectOptions(**{field: value})
        except XlikertError as exc:
            raise click.BadParameter(str(exc), param_hint=f"'{flag.split('/')[0]}'") from None
        given[field] = value
    base = CollectOptions.from_mapping(collect_table, where=where)
    return base.replace(where="xlikert run", **given)


_HELP = """Collect exact item PMFs for the experiment CONFIG (a TOML file or built-in name).

Rerunning the same command resumes an interrupted run (after Ctrl-C, SIGTERM,
kill -9 or a full disk); a finished run is not recomputed. A cell whose identity
(model, token ids, answer labels, options that change numbers) is unchanged is
copied, not computed: from the output's saved progress, from --reuse files, and
from the output that --overwrite replaces, so a study grows by its new cells
only. One run at a time holds an output. On SIGTERM or SIGINT the run saves
every finished unit and exits with status 128 + the signal's number.

The options come from, in order of precedence: these flags, the experiment
file's [collect] table (keys: the CollectOptions fields, see
xlikert/design/README.md), the defaults. Lists are comma-separated:
--temperature 0.7,1.0 --top-p 0.9,1.0.
"""


@click.command("run", help=_HELP)
@click.argument("config")
@click.option(
    "-o", "--output", default=None, type=click.Path(dir_okay=False),
    help="results .nc (default: <experiment name>.nc)",
)  # fmt: skip
@click.option("--shard", default=None, help="compute only part i of n (e.g. 1/4); merge later")
@click.option("--temperature", "temperatures", default=None, callback=lambda c, p, v: v and _parse_floats(v),
              help="decoding-grid temperatures, comma-separated (default: 0.1,0.5,1.0,1.3)")  # fmt: skip
@click.option("--top-p", "top_ps", default=None, callback=lambda c, p, v: v and _parse_floats(v),
              help="decoding-grid top-p values in (0, 1], comma-separated (default: 0.8,0.9,1.0)")  # fmt: skip
@click.option(
    "--top-k", default=None, type=int, help="raw top-k tokens stored per prompt (default: 20)"
)
@click.option(
    "--batch-size", default=None, callback=lambda c, p, v: v and parse_batch(v),
    help="prompts per forward, or auto (default: auto)",
)  # fmt: skip
@click.option("--chunk-size", default=None, type=int,
              help="prompts per unit of saved progress (default: 64)")  # fmt: skip
@click.option("--device", default=None, help="cpu, cuda, cuda:1 (default: cuda if available)")
@click.option("--dtype", default=None, help="float32 | bfloat16 | float16 (default: auto)")
@click.option("--device-map", default=None, help="'auto' to spread a large model over GPUs")
@click.option("--prefix-cache/--no-prefix-cache", default=None,
              help="reuse the system-prompt KV cache (default: on)")  # fmt: skip
@click.option(
    "--split-space/--one-token", "split_space", default=None,
    help="--one-token: the paper's one-token rule, a bare space token before the digit counts "
    "as a failure (default: --split-space)",
)  # fmt: skip
@click.option("--trust-remote-code/--no-trust-remote-code", default=None,
              help="allow model code from the model repo (default: off)")  # fmt: skip
@click.option("--overwrite", is_flag=True,
              help="replace an output made by another configuration (its unchanged cells are "
              "copied)")  # fmt: skip
@click.option("--reuse", multiple=True, type=click.Path(exists=True, dir_okay=False),
              help="an earlier results file whose unchanged cells are copied, not computed "
              "(repeatable)")  # fmt: skip
@click.option("--discard-progress", is_flag=True,
              help="delete saved progress of other configurations in <output>.partial/ "
              "(kept and reused otherwise)")  # fmt: skip
@click.option("--tol", default=None, type=float,
              help="sequential administration: the certified error asked of every item's PMF "
              "(default: 0, exact)")  # fmt: skip
@click.option("--max-passes", default=None, type=int,
              help="sequential administration: forward passes per conversation (default: 10000)")  # fmt: skip
@click.option("--ray", "ray_address", default=None, metavar="ADDRESS",
              help="compute on a Ray cluster: auto (the one `ray start` runs here), local (one "
              "started for the run) or host:port of its head; the file is the same "
              "(executor = \"ray\" in [collect])")  # fmt: skip
@click.option("--replicas", default=None, type=int,
              help="with --ray: replicas of each model (default: as many as fit)")  # fmt: skip
@click.option("--throughput", multiple=True,
              help="prompt tokens per second of one replica (a number, or MODEL=number; "
              "repeatable): the closing summary projects the time at it, beside the time "
              "spent (see xlikert plan)")  # fmt: skip
@click.option("--quiet", is_flag=True, help="no progress bar, no closing summary")
def run_command(config, output, shard, overwrite, reuse, discard_progress, quiet, ray_address,
                throughput, **flags):  # fmt: skip
    from ..collect.run.interrupt import RunInterrupted
    from ..collect.run.runner import collect
    from ..design import load_experiment

    try:
        exp = load_experiment(config)
        options = _run_options(exp.collect, f"{exp.path} [collect]", **flags)
        if ray_address is not None:
            options = options.replace(where="--ray", executor="ray", ray_address=ray_address)
        prompts = exp.build_prompts()
        output = output or f"{exp.name}.nc"
        before = _stamp(output)
        t0 = time.perf_counter()
        ds = collect(
            prompts,
            exp.models,
            output,
            options=options,
            shard=shard,
            overwrite=overwrite,
            reuse=list(reuse),
            discard_progress=discard_progress,
            progress=not quiet,
            tokens_per_second=_parse_rates(throughput),
        )
    except RunInterrupted as exc:
        click.echo(f"xlikert: {exc}", err=True)
        click.echo(f"resume with: {shlex.join(['xlikert', *sys.argv[1:]])}", err=True)
        sys.exit(exc.exit_status)
    except XlikertError as exc:
        _fail(exc)
    n = int(ds["valid_mass"].size) if "computed" not in ds else int(ds["computed"].sum())
    if before is not None and _stamp(output) == before:  # collect opened it, wrote nothing
        click.echo(
            f"{output} is already complete ({n} prompts of this configuration): nothing to do; "
            "pass --overwrite with another configuration, or remove the file to recompute"
        )
        return
    click.echo(f"wrote {output}: {n} prompts{_reuse_note(ds)} ({time.perf_counter() - t0:.1f} s)")
    from ..report.inputs import answer_tol_note

    short = answer_tol_note(ds)
    if short:
        click.echo(f"warning: {short}")


def _reuse_note(ds) -> str:
    """``: 12 computed, 34 reused (34 from old.nc)`` when cells were reused, else empty."""
    from ..core.io import read_attrs

    attrs = read_attrs(ds)
    reused = int(attrs.get("cells_reused", 0))
    if not reused:
        return ""
    where = ", ".join(
        f"{v['cells']} from {k}" for k, v in (attrs.get("reuse_sources") or {}).items()
    )
    return f": {int(attrs.get('cells_computed', 0))} computed, {reused} reused ({where})"


def _stamp(path: str | os.PathLike) -> tuple[int, int] | None:
    """(mtime in ns, size) of ``path``, or None if it does not exist."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


@click.command("merge")
@click.argument("parts", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False))
def merge_command(parts, output):
    """Merge the shard files PARTS of a --shard i/n run into one results file.

    Every shard i of n must be given once: a missing or repeated shard is named.
    """
    from ..collect.run.merge import merge_shards

    try:
        ds = merge_shards(list(parts), output)
    except XlikertError as exc:
        _fail(exc)
    click.echo(f"wrote {output}: {int(ds['valid_mass'].size)} prompts from {len(parts)} shards")


def _parse_rates(values: tuple[str, ...]) -> float | dict[str, float] | None:
    """``--throughput 5000`` (every model) or ``--throughput tiny=5000`` (one model)."""
    out: dict[str, float] = {}
    for v in values:
        name, _, rate = v.rpartition("=")
        try:
            out[name] = float(rate)
        except ValueError:
            raise click.BadParameter(
                f"expected tokens per second, or MODEL=tokens per second, got {v!r}",
                param_hint="'--throughput'",
            ) from None
    if not out:
        return None
    return out.pop("") if list(out) == [""] else out


@click.command("plan")
@click.argument("config")
@click.option("-o", "--output", default=None, type=click.Path(dir_okay=False),
              help="the results .nc the run would write (its cells are found)")  # fmt: skip
@click.option(
    "--reuse",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False),
    help="an earlier results file whose unchanged cells are found (repeatable)",
)
@click.option("--throughput", multiple=True,
              help="prompt tokens per second of one replica: a number, or MODEL=number "
              "(repeatable; e.g. measured on the GPU kind the run uses)")  # fmt: skip
@click.option("--probe", default=0, type=int,
              help="measure each model's throughput on this machine: whole units of the run, "
              "spread over it, holding at least this many prompts (loads the model)")  # fmt: skip
@click.option("--spent", default=None, type=click.Path(exists=True, dir_okay=False),
              help="a results file of this study: set what its run spent beside the "
              "projection")  # fmt: skip
def plan_command(config, output, reuse, throughput, probe, spent):
    """The cost of running the experiment CONFIG before it runs: per model, its cells, those
    already found in the output or --reuse files, the forward passes and prompt tokens to
    compute (with the upper bounds of own-words and sequential budgets), the FLOPs, and the
    time at a stated throughput. Only tokenizers load (unless --probe)."""
    from ..collect.run.cost import cost_plan
    from ..design import load_experiment

    try:
        exp = load_experiment(config)
        options = _run_options(exp.collect, f"{exp.path} [collect]")
        df = cost_plan(exp.build_prompts(), exp.models, output, options=options,
                       reuse=list(reuse), tokens_per_second=_parse_rates(throughput),
                       probe=probe)  # fmt: skip
    except XlikertError as exc:
        _fail(exc)
    click.echo(df.to_string(float_format=lambda v: f"{v:.4g}"))
    for k, v in df.attrs["assumptions"].items():
        click.echo(f"{k}: {v}")
    if spent is not None:
        click.echo(_beside(df, spent))


def _beside(df, path: str) -> str:
    """The projection beside what the run that wrote ``path`` spent (cells it computed,
    their passes and prompt tokens, its collection seconds)."""
    from ..collect.run.cost import cost_spent
    from ..core.io import open_results, read_attrs

    ds = open_results(path)
    got = cost_spent(ds)
    cols = ["to_compute", "passes", "passes_max", "prompt_tokens", "seconds"]
    both = df[cols].join(got.add_prefix("spent_"), how="outer")
    seconds = read_attrs(ds).get("collection_seconds_last_session")
    return (
        f"projected beside spent ({path}; its last session collected for {seconds} s):\n"
        + both.to_string(float_format=lambda v: f"{v:.4g}")
    )
