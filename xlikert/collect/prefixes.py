"""Which prompts of a unit share a prefix worth computing once: token-level, no template.

A unit's prompts share a common prefix (the system prompt); beyond it, prompts may
share longer prefixes in groups (each respondent's persona and the text up to where
their items differ, when the persona is in the user turn or a unit holds several
respondents). :func:`prefix_groups` finds those groups from the token ids alone, so
the saving never relies on how a template is written: the prompts sorted by their
tokens, cut into runs that each share a prefix, the cut that runs the fewest tokens.

Examples
--------
>>> from xlikert.collect.prefixes import prefix_groups
>>> a = [1, 2, 3, 4, 5, 6, 7, 10]
>>> b = [1, 2, 3, 4, 5, 6, 7, 11]
>>> c = [1, 2, 8, 8, 8, 8, 8, 12]
>>> d = [1, 2, 8, 8, 8, 8, 8, 13]
>>> prefix_groups([a, c, b, d], start=2, overhead=2)
[(7, [0, 2]), (7, [1, 3])]
>>> prefix_groups([a, c], start=2, overhead=2)  # no two prompts share more than the start
[(2, [0]), (2, [1])]
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["GROUP_OVERHEAD", "common_prefix", "prefix_groups"]

#: What computing one more group prefix costs beyond its tokens (one more row of a
#: prefill pass, its cache copied into the reading batches), counted as tokens: a group
#: is formed only where it saves more tokens than this.
GROUP_OVERHEAD = 16


def common_prefix(rows: Sequence[Sequence[int]]) -> int:
    """The length of the token prefix every row shares, leaving each row at least one token.

    >>> common_prefix([[1, 2, 3], [1, 2, 4], [1, 2]])
    1
    """
    if not rows:
        return 0
    n = min(len(r) for r in rows) - 1
    first = rows[0]
    p = 0
    while p < n and all(r[p] == first[p] for r in rows):
        p += 1
    return p


def _lcp(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def prefix_groups(
    encoded: Sequence[Sequence[int]], start: int = 0, overhead: int = GROUP_OVERHEAD
) -> list[tuple[int, list[int]]]:
    """The prompts cut into groups that each share a token prefix, computed once a group.

    Parameters
    ----------
    encoded
        The prompts' token ids; every prompt shares its first ``start`` tokens.
    start
        The prefix every prompt shares (computed once for all of them).
    overhead
        What one more group prefix costs beyond its tokens (:data:`GROUP_OVERHEAD`).

    Returns
    -------
    list of (int, list of int)
        ``(prefix length, prompt indices)`` per group, in the prompts' sorted token
        order; each prompt in exactly one group, each group's prefix ``>= start`` and
        shorter than each of its prompts. A prompt that shares nothing worth a group is
        a group of its own with prefix ``start``.

    Notes
    -----
    The prompts are sorted by their tokens (so prompts sharing a longer prefix are
    adjacent) and cut into runs; a run of ``k`` prompts sharing ``n`` tokens costs
    ``n + sum(len - n) + overhead`` tokens (``sum(len - start)`` for a prompt alone).
    A dynamic programme over the cut points finds the cut of least cost, exactly for
    this one level of groups below the common prefix (groups within groups are not
    formed: a prefix shared inside a group is run once per prompt).
    """
    n = len(encoded)
    if n == 0:
        return []
    order = sorted(range(n), key=lambda r: (tuple(encoded[r]), r))
    rows = [encoded[r] for r in order]
    adj = [_lcp(rows[i], rows[i + 1]) for i in range(n - 1)]
    lens = [len(r) for r in rows]
    INF = float("inf")
    best: list[float] = [0.0] + [INF] * n  # best[j]: least cost of the first j sorted prompts
    cut = [0] * (n + 1)  # cut[j]: where the last run of that cost starts
    for j in range(1, n + 1):
        # the run rows[i .. j-1], growing leftwards: its shared prefix is the least
        # adjacent lcp inside it, capped so each prompt keeps >= 1 token of its own
        shared: float = INF
        shortest: float = INF
        total: float = 0
        for i in range(j - 1, -1, -1):
            total += lens[i]
            shortest = min(shortest, lens[i])
            if i < j - 1:
                shared = min(shared, adj[i])
            k = j - i
            if k == 1:
                cost = total - start
            else:
                p = min(shared, shortest - 1)
                if p <= start:
                    break  # a longer run leftwards shares no more
                cost = p - start + (total - k * p) + overhead
            if best[i] + cost < best[j]:
                best[j], cut[j] = best[i] + cost, i
    groups: list[tuple[int, list[int]]] = []
    j = n
    while j > 0:
        i = cut[j]
        members = order[i:j]
        p = start if j - i == 1 else min(min(adj[i : j - 1]), min(lens[i:j]) - 1)
        groups.append((int(p), members))
        j = i
    return groups[::-1]
