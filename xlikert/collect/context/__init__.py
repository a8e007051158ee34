"""Context, exactly: items asked in one conversation, the model's own answers in it.

In isolation (the default, the paper's "Conditional Independence via Context
Isolation") every item has its own prompt. *Sequential administration* asks the
items of a condition in one conversation: each earlier item a user turn, the model's
answer its reply. The PMF of item ``j`` is then the exact mixture over the answer
histories ``h`` of the items before it::

    P(a_j) = sum_h P(h) pmf_j(a_j | h),    P(h) = prod_i pmf_i(h_i | h_<i),

read in a prefix tree of histories, one forward pass per history, each reusing its
parent's cached prompt (:mod:`.sequential`); exact where every history is read,
certified (``|returned - exact| <= tol``) where the tree is pruned
(:mod:`xlikert.kernels.history_tree`).
The pairwise joints of the items within the conversation come with it. Items with
their own options (a questionnaire as fielded: own scales, "Don't know", nominal items)
are read each over its own answers, and the tree branches on them
(:attr:`Battery.answers`).

* :class:`Battery`, :func:`administer`, :class:`SequentialResult` -- asking and reading;
* :class:`HistoryTree`, :func:`item_marginals`, :func:`pairwise_joints`,
  :func:`full_joint`, :func:`history_tree` -- what a tree gives (plain numpy, the maths in
  :mod:`xlikert.kernels.history_tree`);
* :func:`sequential_dataset`, :func:`battery_from_prompts` -- xarray in and out;
* :class:`Conversations`, :func:`item_orders` -- the ``administration`` factor and
  item orders in a collection run (:mod:`.administration`).
"""

from ...kernels.history_tree import (
    CERTIFIED_BOUND_RULE,
    HISTORY_RULE,
    HistoryTree,
    full_joint,
    history_tree,
    item_marginals,
    pairwise_joints,
)
from .administration import (
    ADMINISTRATION_DIM,
    ADMINISTRATIONS,
    ITEM_POSITION,
    Conversations,
    item_orders,
)
from .dataset import battery_from_prompts, sequential_dataset
from .sequential import (
    CONVERSATION_RULE,
    DEFAULT_MAX_PASSES,
    EXPANSION_RULE,
    Battery,
    SequentialResult,
    administer,
)

__all__ = [
    "ADMINISTRATIONS",
    "ADMINISTRATION_DIM",
    "CERTIFIED_BOUND_RULE",
    "CONVERSATION_RULE",
    "DEFAULT_MAX_PASSES",
    "EXPANSION_RULE",
    "HISTORY_RULE",
    "ITEM_POSITION",
    "Battery",
    "Conversations",
    "HistoryTree",
    "SequentialResult",
    "administer",
    "battery_from_prompts",
    "full_joint",
    "history_tree",
    "item_marginals",
    "item_orders",
    "pairwise_joints",
    "sequential_dataset",
]
