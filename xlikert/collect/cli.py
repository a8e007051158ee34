"""``xlikert run``, ``xlikert merge`` and ``xlikert demo``.

This module imports neither torch nor transformers; they load inside the commands.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from ..errors import XlikertError

__all__ = ["demo", "merge", "run"]


def _fail(exc: Exception) -> None:
    raise click.ClickException(str(exc)) from exc


def _batch(value: str) -> int | str:
    if value == "auto":
        return value
    try:
        n = int(value)
    except ValueError:
        raise click.BadParameter(f"expected a positive integer or 'auto', got {value!r}") from None
    if n < 1:
        raise click.BadParameter(f"expected a positive integer or 'auto', got {value!r}")
    return n


@click.command()
@click.argument("config")
@click.option(
    "-o", "--output", default=None, type=click.Path(dir_okay=False),
    help="results .nc (default: <experiment name>.nc)",
)  # fmt: skip
@click.option("--shard", default=None, help="compute only part i of n (e.g. 1/4); merge later")
@click.option(
    "--batch-size", default="auto", show_default=True, help="prompts per forward, or auto"
)
@click.option("--device", default=None, help="cpu, cuda, cuda:1 (default: cuda if available)")
@click.option("--dtype", default=None, help="float32 | bfloat16 | float16 (default: auto)")
@click.option("--device-map", default=None, help="'auto' to spread a large model over GPUs")
@click.option("--top-k", default=20, show_default=True, help="raw top-k tokens stored per prompt")
@click.option("--no-prefix-cache", is_flag=True, help="do not reuse the system-prompt KV cache")
@click.option(
    "--one-token", is_flag=True,
    help="the paper's one-token rule: a bare space token before the digit counts as a failure",
)  # fmt: skip
@click.option("--trust-remote-code", is_flag=True, help="allow model code from the model repo")
@click.option("--overwrite", is_flag=True, help="replace an output made by another configuration")
@click.option("--quiet", is_flag=True, help="no progress bar")
def run(
    config, output, shard, batch_size, device, dtype, device_map, top_k, no_prefix_cache,
    one_token, trust_remote_code, overwrite, quiet,
):  # fmt: skip
    """Collect exact item PMFs for the experiment CONFIG (a TOML file or built-in name).

    Rerunning the same command resumes an interrupted run; a finished run is not
    recomputed.
    """
    from ..design import load_experiment
    from .runner import collect

    try:
        exp = load_experiment(config)
        prompts = exp.build_prompts()
        output = output or f"{exp.name}.nc"
        t0 = time.perf_counter()
        ds = collect(
            prompts,
            exp.models,
            output,
            batch_size=_batch(batch_size),
            device=device,
            dtype=dtype,
            device_map=device_map,
            top_k=top_k,
            shard=shard,
            prefix_cache=not no_prefix_cache,
            split_space=not one_token,
            trust_remote_code=trust_remote_code,
            overwrite=overwrite,
            progress=not quiet,
        )
    except XlikertError as exc:
        _fail(exc)
    n = int(ds["valid_mass"].size) if "computed" not in ds else int(ds["computed"].sum())
    click.echo(f"wrote {output}: {n} prompts ({time.perf_counter() - t0:.1f} s)")


@click.command()
@click.argument("parts", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False))
def merge(parts, output):
    """Merge the shard files PARTS of a --shard i/n run into one results file."""
    from .merge import merge_shards

    try:
        ds = merge_shards(list(parts), output)
    except XlikertError as exc:
        _fail(exc)
    click.echo(f"wrote {output}: {int(ds['valid_mass'].size)} prompts from {len(parts)} shards")


def _try(label: str, fn, lines: list[str]):
    try:
        return fn()
    except NotImplementedError as exc:
        lines.append(f"({label}: not available yet — {exc})")
    except Exception as exc:  # analysis layers are optional for the collection result
        lines.append(f"({label} failed: {type(exc).__name__}: {exc})")
    return None


def demo_summary(ds) -> str:
    """Short plain-text summary of a results Dataset: failure rate, Consensus, composite, effects."""
    import numpy as np

    import xlikert as xl

    lines: list[str] = []
    other = [d for d in ds.valid_mass.dims if d != "model"]
    lines.append("Constraint: failure rate (1 - valid mass), mean over conditions and items")
    fr = _try("failure_rate", lambda: xl.failure_rate(ds), lines)
    if fr is None:
        fr = 1 - ds.valid_mass
    fr = fr.mean(other)
    for m in ds.model.values:
        lines.append(f"  {m:<32s} {float(fr.sel(model=m)):7.1%}")
    pmf = ds.pmf
    cns = _try("consensus", lambda: xl.consensus(pmf), lines)
    if cns is not None:
        cns = cns if not hasattr(cns, "data_vars") else cns[next(iter(cns.data_vars))]
        lines.append("Consensus (multivariate), by model x condition:")
        lines.append(_table(cns))
    comp = _try("composite", lambda: xl.composite(pmf), lines)
    if comp is not None:
        score = comp["score"].astype(float)
        mean = (comp * score).sum("score")
        sd = np.sqrt((comp * (score - mean) ** 2).sum("score"))
        lines.append("Composite score E (SD), by model x condition:")
        lines.append(_table(mean, sd))
    dec = _try("decompose", lambda: xl.decompose(pmf), lines)
    if dec is not None:
        tab = _try("summary_table", lambda: xl.summary_table(dec), lines)
        if tab is not None:
            lines.append("Decomposition (distributional ANOVA on the composite):")
            lines.append(tab.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    return "\n".join(lines)


def _table(a, b=None) -> str:
    df = a.to_pandas() if a.ndim <= 2 else a.to_series().unstack()
    if b is None:
        return df.to_string(float_format=lambda v: f"{v:.3f}")
    db = b.to_pandas() if b.ndim <= 2 else b.to_series().unstack()
    return df.combine(
        db, lambda x, y: x.map("{:.2f}".format) + " (" + y.map("{:.2f}".format) + ")"
    ).to_string()


@click.command()
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
def demo(out_dir, batch_size, quiet):  # fmt: skip
    """Run the built-in offline experiment end to end (3 models x 4 targets x 17 items).

    Collects exact PMFs from the three offline models, analyses them (failure rate,
    Consensus, composite, decomposition), writes OUT_DIR/results.nc,
    OUT_DIR/summary.txt and the report.
    """
    from ..design import load_experiment
    from .runner import collect

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
            batch_size=_batch(batch_size),
            progress=not quiet,
        )
    except XlikertError as exc:
        _fail(exc)
    t_collect = time.perf_counter() - t0
    text = demo_summary(ds)
    text = (
        f"xlikert demo: experiment {getattr(exp, 'name', 'demo')!r}, "
        f"{' x '.join(f'{d}={n}' for d, n in ds.valid_mass.sizes.items())}\n"
        f"collection {t_collect:.1f} s\n\n{text}\n"
    )
    (out / "summary.txt").write_text(text)
    click.echo(text)
    from ..report import write_report

    click.echo(f"report: {write_report(ds, out)}")
    click.echo(f"wrote {out / 'results.nc'} and {out / 'summary.txt'} "
               f"in {time.perf_counter() - t0:.1f} s")  # fmt: skip
    sys.stdout.flush()
