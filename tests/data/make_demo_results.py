"""Rewrite ``xlikert/data/demo_results.nc`` in the current results schema, numbers kept.

The shipped demo results hold what ``xlikert demo`` measured on 2026-11-22 (the three
offline zoo models x 4 targets x 17 CETSCALE items, transformers 5.23.0, batch 8): the
file was written before results stored the token ids each cell was read from, so
``read_sequence`` refused it. A full re-collection on the shared development machine
would have taken over an hour (SmolLM2 alone took 12 minutes), so this script writes
the same experiment through today's :func:`xlikert.collect.collect` with a ``loader``
that hands back each cell's stored readout (``pmf``, ``valid_mass``, top-k, the decoding
grid) instead of running the forward pass. Everything else is today's collection: the
token ids (each backend's own ``inputs``: the tokenizer and chat template), the cell
keys and model identities (the weights' checksums), the attrs. The models' provenance
is the one recorded when the numbers were measured, with today's backend fields
(``backend``, ``collection_protocol``, ``decoding_rule``); the ``history`` says so.

Checks, each refusing to write on failure:

* the prompt text each model is sent today is the text stored, cell by cell;
* with ``--check N``, N cells per model are read again with a real forward pass
  (:func:`collect` on those prompts alone) and agree with the stored numbers to
  ``--atol`` (float32 noise of another batch; a wrong token id changes a PMF by far
  more).

Run from the repository root (``PYTHONPATH=.``)::

    python tests/data/make_demo_results.py --check 2 [OUT]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import xarray as xr

DEMO = Path(__file__).resolve().parents[2] / "xlikert" / "data" / "demo_results.nc"
#: The variables of a cell's readout, carried over from the stored file.
READOUT = ("pmf", "valid_mass", "topk_token", "topk_logprob", "decoding_pmf",
           "decoding_valid_mass")  # fmt: skip


def _stored(old: xr.Dataset, prompts: xr.Dataset) -> dict[tuple[str, str], tuple[str, str]]:
    """(system, user) -> the (target, item) cell of the stored file it was measured for."""
    out: dict[tuple[str, str], tuple[str, str]] = {}
    for target in old.target.values:
        for item in old.item.values:
            cell = prompts.sel(target=target, item=item)
            out.setdefault((str(cell.system.values), str(cell.user.values)), (target, item))
    return out


class Replay:
    """A :class:`xlikert.collect.Model` that hands back the stored readout of each cell."""

    mode = "exact"

    def __init__(self, spec, options, old, cells, sent, provenance):
        self.name, self.options = spec["name"], options
        self._old, self._cells, self._sent, self._provenance = old, cells, sent, provenance

    def score(self, prompts):
        from xlikert.collect import UnitResult
        from xlikert.core.codecs import encode_token_ids

        result = UnitResult.empty(len(prompts), self.options.sizes)
        ids = self._sent(prompts)
        for i, prompt in enumerate(prompts):
            target, item = self._cells[tuple(prompt)]
            cell = self._old.sel(model=self.name, target=target, item=item)
            for var in READOUT:
                result.data[var][i] = cell[var].values
            result.data["prompt_text"][i] = str(cell["prompt_text"].values)
            result.data["prompt_token_ids"][i] = encode_token_ids(ids[i])
        return result

    def relabel(self, labels):
        if labels is not None:
            raise ValueError("the demo reads the scale's digits")

    def provenance(self):
        return self._provenance

    def close(self):
        pass


def remake(out: Path) -> xr.Dataset:
    """Write the demo experiment's results with the stored numbers to ``out``."""
    from xlikert.collect import collect
    from xlikert.collect.backends.transformers import inputs
    from xlikert.collect.backends.transformers.loading import READOUT as PROTOCOL
    from xlikert.core.io import open_results, read_attrs
    from xlikert.design import load_experiment
    from xlikert.kernels.readout import DECODING_TIE_RULE

    old = open_results(DEMO)
    stored = read_attrs(old)["models"]
    exp = load_experiment("demo")
    prompts = exp.build_prompts()
    cells = _stored(old, prompts)

    def loader(spec, options, probe):
        sent = inputs(spec, options).sent
        provenance = {**stored[spec["name"]], "backend": "transformers",
                      "collection_protocol": PROTOCOL, "decoding_rule": DECODING_TIE_RULE}  # fmt: skip
        return Replay(spec, options, old, cells, sent, provenance)

    ds = collect(prompts, exp.models, out, batch_size="auto", progress=False, loader=loader)
    # every cell: the text sent today is the text stored, and its readout the stored one;
    # a cell whose prompt is another's (the items that name no country) is read once
    # today and copied, where the stored file had read it again (float32 noise apart)
    first = set(cells.values())
    twins = 0.0
    for target in old.target.values:
        for item in old.item.values:
            now, then = (x.sel(target=target, item=item) for x in (ds, old))
            if str(now.prompt_text.values.tolist()) != str(then.prompt_text.values.tolist()):
                raise SystemExit(f"{target}/{item}: the text sent differs from the stored one")
            for var in READOUT:
                a, b = now[var].transpose(*then[var].dims).values, then[var].values
                if (target, item) in first:
                    if not np.array_equal(a, b, equal_nan=a.dtype.kind == "f"):
                        raise SystemExit(f"{target}/{item}: {var} differs from the stored one")
                elif a.dtype.kind == "f":
                    twins = max(twins, float(np.nanmax(np.abs(a - b))))
    print(f"per model, {len(first)} cells carried over exactly; "
          f"{old.target.size * old.item.size - len(first)} repeated prompts copied from their "
          f"first cell: max difference {twins:.2e} from what the stored file read for them "
          "again", flush=True)  # fmt: skip
    # the numbers' own history and collection time, then this rewrite
    measured = old.attrs["history"].splitlines()[0]
    line = ("the readout of every cell carried over from the collection of "
            f"{measured.split(': ')[0]} ({old.attrs['collection_seconds_last_session']} s; "
            "tests/data/make_demo_results.py); token ids, cell keys and attrs of this "
            "collection")  # fmt: skip
    ds.attrs["history"] = f"{measured}\n{ds.attrs['history']}\n{line}"
    ds.attrs["collection_seconds_last_session"] = old.attrs["collection_seconds_last_session"]
    return ds


def check(ds: xr.Dataset, n: int, atol: float) -> float:
    """Read ``n`` cells per model again with a real forward pass; the largest difference."""
    from xlikert.collect import collect
    from xlikert.design import load_experiment

    exp = load_experiment("demo")
    prompts = exp.build_prompts()
    worst = 0.0
    rng = np.random.default_rng(0)
    for spec in exp.models:
        items = [str(i) for i in rng.choice(prompts.item.values, n, replace=False)]
        sub = prompts.sel(target=["USA"], item=items)
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            fresh = collect(sub, [spec], Path(tmp) / "r.nc", batch_size="auto", progress=False)
            took = time.perf_counter() - t0
        want = ds.sel(model=[spec["name"]], target=["USA"], item=items)
        assert (fresh.prompt_token_ids.values == want.prompt_token_ids.values).all()
        diff = max(float(abs(fresh[v] - want[v]).max()) for v in ("pmf", "valid_mass"))
        print(f"{spec['name']}: items {items} read again in {took:.0f} s: the same token "
              f"ids, max |pmf or valid_mass difference| {diff:.2e}", flush=True)  # fmt: skip
        if diff > atol:
            raise SystemExit(f"{spec['name']}: the stored numbers differ by {diff:.2e} > {atol}")
        worst = max(worst, diff)
    return worst


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", type=Path, default=DEMO)
    parser.add_argument("--check", type=int, default=0, help="cells per model read again")
    parser.add_argument("--atol", type=float, default=1e-4)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        ds = remake(Path(tmp) / "demo_results.nc")
        print(f"rewritten in {time.perf_counter() - t0:.0f} s", flush=True)
        if args.check:
            check(ds, args.check, args.atol)
        from xlikert.core.io import to_netcdf

        to_netcdf(ds, args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main(sys.argv[1:])
