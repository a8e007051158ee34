"""The Consensus layer: ordinal certainty of item PMFs.

The package is ``xlikert.analysis.consensus``; its functions are exported at the
top level (``xl.consensus``, ``xl.dissension``, ...). It is not called
``xlikert.consensus``: that name is the function, and a module of the same
name would be shadowed by it (``import xlikert.consensus as m`` gave the
function); for the same reason no module of the package is named after a function
in it. ``xlikert.kernels.consensus`` holds the kernels.

* :func:`tastle_consensus` -- Tastle & Wierman Consensus of each PMF
  (:ref:`eq-consensus-original`), exact.
* :func:`consensus` -- the paper's Multivariate Consensus of the ``K`` items of a
  condition (:ref:`eq-consensus-multivariate`) with a *certified* error: the value
  returned is within ``tol`` of the exact sum over all ``n^K`` response vectors;
* :func:`consensus_bounds` -- the same value with its certified lower and upper
  bounds and the guaranteed error, as a Dataset;
* :func:`dissension`, :func:`dissension_bounds` -- ``1 - consensus`` (:ref:`eq-dissension`).
* :func:`entropy` -- Shannon entropy in bits, of each item or of the K-item joint
  under conditional independence; :func:`consensus_entropy` tabulates both per
  condition (the paper's entropy-vs-consensus table).

Items are conditionally independent given the condition (paper, "Conditional
Independence via Context Isolation"), so the joint PMF is the product of the
item PMFs. Each PMF is divided by its sum before use, so storage round-off
(validated to ``PMF_ATOL``) does not leak into the result.

The package, one topic a module:

* :mod:`.inputs` -- the checks and preparation of item PMFs every function shares;
* :mod:`.tastle` -- :func:`tastle_consensus`;
* :mod:`.multivariate` -- :func:`consensus` and :func:`consensus_bounds` (``MIN_TOL``);
* :mod:`.disagreement` -- :func:`dissension` and :func:`dissension_bounds`;
* :mod:`.shannon` -- :func:`entropy` and :func:`consensus_entropy`.
"""

from __future__ import annotations

from .disagreement import dissension, dissension_bounds
from .multivariate import consensus, consensus_bounds
from .shannon import consensus_entropy, entropy
from .tastle import tastle_consensus

__all__ = [
    "consensus",
    "consensus_bounds",
    "consensus_entropy",
    "dissension",
    "dissension_bounds",
    "entropy",
    "tastle_consensus",
]
