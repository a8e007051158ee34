"""``xlikert run`` and ``xlikert merge``.

This module imports neither torch nor transformers; they load inside the commands.
"""

from __future__ import annotations

import os
import time

import click

from ..errors import XlikertError

__all__ = ["merge", "parse_batch", "run"]


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
        before = _stamp(output)
        t0 = time.perf_counter()
        ds = collect(
            prompts,
            exp.models,
            output,
            batch_size=parse_batch(batch_size),
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
    if before is not None and _stamp(output) == before:  # collect opened it, wrote nothing
        click.echo(
            f"{output} is already complete ({n} prompts of this configuration): nothing to do; "
            "pass --overwrite with another configuration, or remove the file to recompute"
        )
        return
    click.echo(f"wrote {output}: {n} prompts ({time.perf_counter() - t0:.1f} s)")


def _stamp(path: str | os.PathLike) -> tuple[int, int] | None:
    """(mtime in ns, size) of ``path``, or None if it does not exist."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


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
