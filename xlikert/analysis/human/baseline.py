"""Published human samples beside each model's composite score."""

from __future__ import annotations

from collections.abc import Hashable, Mapping

import numpy as np
import pandas as pd
import xarray as xr

from ...core.dims import factor_dims, preferred_factor
from ..sampling import composite_moments, mixture_moments

__all__ = ["human_vs_llm"]


def human_vs_llm(
    pmf: xr.DataArray,
    baseline: pd.DataFrame,
    by: Hashable | None = None,
    condition: Mapping[Hashable, object] | None = None,
) -> pd.DataFrame:
    """Human samples vs each level of ``by`` (composite E and SD) at ``condition``.

    The LLM composite is the uniform mixture over every factor not in
    ``condition`` and not ``by`` (exact moments,
    :func:`xlikert.analysis.sampling.mixture_moments`).

    Parameters
    ----------
    pmf
        Item PMFs ``(*factors, item, score)``.
    baseline
        :func:`xlikert.datasets.human_baseline` output.
    by
        Factor whose levels are compared (default :data:`xlikert.core.dims.MODEL_DIM` if
        present, else the first factor).
    condition
        Selection, e.g. ``{"target": "USA"}`` (the paper's comparison: the baseline's
        respondents are its ``country``).

    Returns
    -------
    pandas.DataFrame
        Columns ``group`` (Human / LLM), ``label``, ``mean``, ``sd``; LLM rows
        sorted by mean, descending.

    Examples
    --------
    >>> import xlikert as xl
    >>> pmf = xl.datasets.synthetic_pmf({"model": 2, "target": ["USA", "China"]})
    >>> t = human_vs_llm(pmf, xl.datasets.human_baseline(), condition={"target": "USA"})
    >>> t.group.value_counts().to_dict()
    {'Human': 6, 'LLM': 2}
    """
    sel = pmf.sel(dict(condition)) if condition else pmf
    mom = composite_moments(sel)
    by = preferred_factor(factor_dims(mom["mean"], item_dim=None, score_dim=None), by)
    other = [d for d in mom["mean"].dims if d != by]
    mix = mixture_moments(mom["mean"], mom["var"], other)
    llm = pd.DataFrame(
        {
            "group": "LLM",
            "label": [str(v) for v in mix[by].values] if by in mix.dims else ["LLM"],
            "mean": np.atleast_1d(mix["mean"].values),
            "sd": np.sqrt(np.atleast_1d(mix["var"].values)),
        }
    ).sort_values("mean", ascending=False)
    human = pd.DataFrame(
        {
            "group": "Human",
            "label": baseline["sample"],
            "mean": baseline["mean"],
            "sd": baseline["sd"],
        }
    )
    return pd.concat([human, llm], ignore_index=True)
