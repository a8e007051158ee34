"""The script guard vLLM needs: its engine starts in new processes that import the main
script again, so a script that collects at import must run under
``if __name__ == "__main__":``. :func:`unguarded_main_script` finds a script without one
before anything loads; :func:`guard_advice` says what to add."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

__all__ = ["guard_advice", "unguarded_main_script"]


def _is_main_guard(test: ast.expr) -> bool:
    """``__name__ == "__main__"`` (either side)."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return False
    sides = [test.left, *test.comparators]
    return (
        isinstance(test.ops[0], ast.Eq)
        and any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides)
        and any(isinstance(s, ast.Constant) and s.value == "__main__" for s in sides)
    )


def unguarded_main_script() -> str | None:
    """The script run as ``__main__`` if it has no ``if __name__ == "__main__":`` block.

    vLLM starts its engine core (and, on a CPU, its workers) in new processes
    by *spawning*: each imports the main script again, so a script whose
    top-level code calls :func:`~xlikert.collect.collect` starts the whole run
    again in the child, which fails while it is still bootstrapping. None for
    an interactive session, a notebook or a guarded script.

    Examples
    --------
    >>> unguarded_main_script() is None  # run under pytest: no script of the user's
    True
    """
    path = getattr(sys.modules.get("__main__"), "__file__", None)
    if not path or not str(path).endswith(".py"):
        return None
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return None
    if any(isinstance(n, ast.If) and _is_main_guard(n.test) for n in tree.body):
        return None
    return str(path)


def guard_advice(script: str) -> str:
    return (
        f"vLLM starts its engine in new processes that import your script {script} again, "
        "and that script runs the collection at import: put it under "
        "'if __name__ == \"__main__\":' (e.g. def main(): ...; "
        'if __name__ == "__main__": main())'
    )
