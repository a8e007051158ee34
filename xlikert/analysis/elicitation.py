"""The validity of the first-token reading: what the model says against what it would write.

A results file with the ``elicitation`` factor (:mod:`xlikert.design.elicitation`)
reads each cell several ways. :func:`elicitation_validity` compares them per model and
condition (every factor but ``elicitation``, over the items):

* ``greedy_agreement``: the share of cells whose greedy reply writes the first-token
  PMF's mode (a reply without an answer does not agree);
* ``greedy_no_answer``: the share of greedy replies that write no answer (refusals,
  replies that end or reach the cap without a code);
* ``own_words_tv``: the total variation between the first-token PMF and the own-words
  PMF, the mean over the items, with ``own_words_tv_bound`` its certified error (the mean
  of the cells' ``elicitation_error``: ``|TV(p, q_returned) - TV(p, q_exact)| <=
  TV(q_returned, q_exact) <= elicitation_error``);
* ``own_words_no_answer``: the mean probability that a sampled reply writes no answer.

Examples
--------
>>> import xlikert as xl
>>> table = xl.elicitation_validity(ds)  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np
import xarray as xr

from ..core.errors import DesignError
from ..design.elicitation import ELICITATION_DIM

__all__ = ["VALIDITY_VARIABLES", "elicitation_validity"]

#: The variables of :func:`elicitation_validity`, each with what it says.
VALIDITY_VARIABLES = {
    "greedy_agreement": "share of cells whose greedy reply writes the first-token mode",
    "greedy_no_answer": "share of greedy replies that write no answer",
    "own_words_tv": "mean over items of TV(first-token PMF, own-words PMF)",
    "own_words_tv_bound": "certified error of own_words_tv (mean of elicitation_error)",
    "own_words_no_answer": "mean probability that a sampled reply writes no answer",
}


def elicitation_validity(
    results: xr.Dataset,
    *,
    item_dim: Hashable = "item",
    score_dim: Hashable = "score",
) -> xr.Dataset:
    """The validity table of the first-token reading, per model and condition.

    Parameters
    ----------
    results : xr.Dataset
        A results file with the ``elicitation`` factor and its level ``first_token``
        (its variables ``pmf`` and those of :data:`~xlikert.core.schema.ELICITATION_VARIABLES`).
    item_dim, score_dim : keyword-only
        The names of the item and score dims.

    Returns
    -------
    xr.Dataset
        Over every dim of ``pmf`` but ``elicitation``, ``item`` and ``score``: the
        variables of :data:`VALIDITY_VARIABLES` (NaN where the file lacks the level a
        variable needs: ``greedy`` for the first two, ``own_words`` for the others).

    Raises
    ------
    DesignError
        No ``elicitation`` factor, or no ``first_token`` level, naming what the file has.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> pmf = xr.DataArray([[[0.7, 0.3]], [[np.nan, np.nan]]], dims=("elicitation", "item",
    ...     "score"), coords={"elicitation": ["first_token", "greedy"], "score": [1, 2]})
    >>> ds = xr.Dataset({"pmf": pmf,
    ...     "reply_answered": (("elicitation", "item"), [[-1], [1]]),
    ...     "reply_answer": (("elicitation", "item"), [[np.nan], [1.0]])})
    >>> float(elicitation_validity(ds).greedy_agreement)
    1.0
    """
    if "pmf" not in results or ELICITATION_DIM not in results["pmf"].dims:
        raise DesignError(
            f"elicitation_validity needs a results file with the factor {ELICITATION_DIM!r}; "
            f"its pmf has dims {tuple(results['pmf'].dims) if 'pmf' in results else ()}"
        )
    levels = [str(v) for v in results[ELICITATION_DIM].values]
    if "first_token" not in levels:
        raise DesignError(
            f"elicitation_validity compares every level with 'first_token'; the file's "
            f"levels are {levels}"
        )
    item: Any = item_dim  # the names as xarray's typing takes them
    score: Any = score_dim
    pmf = results["pmf"]
    first = pmf.sel({ELICITATION_DIM: "first_token"}, drop=True)
    keep = [d for d in first.dims if d not in (item, score)]
    nan = xr.full_like(first.isel({item: 0, score: 0}, drop=True), np.nan)
    out = {name: nan.copy() for name in VALIDITY_VARIABLES}
    if "greedy" in levels:
        g = results.sel({ELICITATION_DIM: "greedy"}, drop=True)
        mode = first[score][first.fillna(-1.0).argmax(score)].drop_vars(score)
        answered = g["reply_answered"] == 1
        agree = answered & (g["reply_answer"] == mode)
        out["greedy_agreement"] = agree.mean(item)
        out["greedy_no_answer"] = (g["reply_answered"] == 0).mean(item)
    if "own_words" in levels:
        o = results.sel({ELICITATION_DIM: "own_words"}, drop=True)
        tv = 0.5 * abs(o["pmf"] - first).sum(score, skipna=False)
        out["own_words_tv"] = tv.mean(item)
        out["own_words_tv_bound"] = o["elicitation_error"].mean(item)
        out["own_words_no_answer"] = o["no_answer_mass"].mean(item)
    data = {
        k: v.astype(float).transpose(*keep).assign_attrs(description=VALIDITY_VARIABLES[k])
        for k, v in out.items()
    }
    ds = xr.Dataset(data)
    ds.attrs["description"] = "the validity of the first-token reading (elicitation_validity)"
    return ds
