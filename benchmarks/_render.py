"""Formatting shared by the benchmarks' README renderers (each ``bench_*.py`` has a ``render``)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any


def fmt(x: Any, digits: int = 3) -> str:
    if x is None:
        return "–"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return f"{x:,}"
    if isinstance(x, float):
        if x != x:
            return "–"
        a = abs(x)
        if a == 0:
            return "0"
        if a >= 1e5 or a < 1e-3:
            return f"{x:.2e}"
        if a >= 100:
            return f"{x:,.0f}"
        if a >= 10:
            return f"{x:.1f}"
        return f"{x:.{digits}g}"
    return str(x)


def ms(x: float | None) -> str:
    return "–" if x is None else fmt(1e3 * x)


def table(header: list[str], rows: list[list[Any]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(c if isinstance(c, str) else fmt(c) for c in r) + " |" for r in rows]
    return [*out, ""]


def goal(ok: bool) -> str:
    return "meets" if ok else "**misses**"


def duration(s: float) -> str:
    if s < 120:
        return f"{s:.1f} s"
    if s < 2 * 3600:
        return f"{s / 60:.1f} min"
    if s < 2 * 86400:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.1f} days"


def pct(x: float | None) -> str:
    if x is None:
        return "–"
    return f"{100 * x:.0f}%" if x >= 0.01 else f"{fmt(100 * x, 2)}%"


def params(n: int) -> str:
    return f"{n / 1e9:.3g} B" if n >= 1e9 else f"{n / 1e6:.3g} M"


def stamp(d: dict[str, Any], path: Path) -> str:
    return str(d.get("timestamp") or d.get("date") or time.strftime(
        "%Y-%m-%dT%H:%M:%S (file time)", time.localtime(path.stat().st_mtime)))  # fmt: skip


def spread(values: list[float], show=pct) -> str:
    """``median (min–max)`` of ``values``, each shown by ``show``; one value alone."""
    import statistics

    if len(values) == 1:
        return show(values[0])
    return f"{show(statistics.median(values))} ({show(min(values))}–{show(max(values))})"


def verdict(text: str) -> str:
    """A :func:`_common.goal_verdict` for Markdown: misses in bold."""
    return "**misses**" if text == "misses" else text
