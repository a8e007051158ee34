"""The construct stage: composite scores and the exact distributional ANOVA.

Everything here works on PMF DataArrays with named dims (paper appendix
"The Construct Layer"):

* :mod:`.composite` -- :func:`composite` convolves item PMFs into composite-score
  PMFs (:ref:`eq-item-wise-convolution`), one per subscale with :func:`subscale_composites`;
* :mod:`.mixture` -- :func:`grand_mixture` and :func:`marginal_slice`, uniform
  mixtures (``.mean(dim)``) over factors (:ref:`eq-grand-mixture`,
  :ref:`eq-marginal-slice-U`);
* :mod:`.effects` -- :func:`comonotone_contrast` (:ref:`eq-comonotone-contrast-pmf`),
  :func:`decompose` (every main effect and interaction as a blocked comonotone
  Möbius contrast) and :func:`contrast`;
* :mod:`.trend` -- :func:`trend`, the per-unit trend (appendix "Trend Effects");
* :mod:`.summary` -- :func:`summarize`: E, SD, SNR, dPD of an effect PMF;
* :mod:`.tables` -- the stage's tables: :func:`summary_table` (the tidy table of a
  decomposition), :func:`aggregate_vs_factorial`,
  :func:`contrast_table`, :func:`trend_table`, :func:`variance_shares`.

Every function takes a PMF DataArray or a results Dataset (its ``pmf``) first,
then what it is about positionally; dimension arguments and options are
keyword-only, with the same names and defaults across the package. The hot
loops live in :mod:`xlikert.kernels` (numba, with plain-numpy twins); pass
``kernels="numpy"`` to run the twins. Dask-backed input stays lazy.
"""

from __future__ import annotations

from .composite import composite, subscale_composites
from .effects import comonotone_contrast, contrast, decompose
from .mixture import grand_mixture, marginal_slice
from .summary import SNR_RTOL, summarize
from .tables import (
    SCORING,
    aggregate_vs_factorial,
    contrast_table,
    interaction_node,
    summary_table,
    trend_table,
    variance_shares,
)
from .trend import trend

__all__ = [
    "SCORING",
    "SNR_RTOL",
    "aggregate_vs_factorial",
    "comonotone_contrast",
    "composite",
    "contrast",
    "contrast_table",
    "decompose",
    "grand_mixture",
    "interaction_node",
    "marginal_slice",
    "subscale_composites",
    "summarize",
    "summary_table",
    "trend",
    "trend_table",
    "variance_shares",
]
