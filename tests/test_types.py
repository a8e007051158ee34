"""The type check: mypy over the package, its errors only ever fewer.

mypy runs with ``[tool.mypy]`` of pyproject.toml (its cache in ``.mypy_cache/``). Its
errors are counted per top-level module of the package (``xlikert.collect``,
``xlikert.plot``, ``xlikert.dims``, ...: a module moved inside its package keeps its
count) and compared with ``tests/mypy-baseline.json``: no count may rise, a module not
in the baseline has no error, and :data:`ZERO` has none at all. After fixing errors,
``python tests/test_types.py`` lowers the baseline to the counts reached; it never
raises one (``--init`` writes it anew: the first baseline only).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASELINE = ROOT / "tests" / "mypy-baseline.json"
#: Modules that must type-check without error: the bottom contracts (in ``xlikert.core``
#: or, before that package, at the top level), the kernels and the design stage.
ZERO = {
    "xlikert.core", "xlikert.kernels", "xlikert.design",
    "xlikert.dims", "xlikert.schema", "xlikert.errors", "xlikert.validate", "xlikert.io",
}  # fmt: skip
ERROR = re.compile(r"^(xlikert/[^:]+\.py):\d+(?::\d+)?: error: ", flags=re.M)


def unit(path: str) -> str:
    """The top-level module an error's file belongs to: ``xlikert/collect/run/x.py`` ->
    ``xlikert.collect``; ``xlikert/dims.py`` -> ``xlikert.dims``; ``__init__`` -> ``xlikert``."""
    parts = path.split("/")
    if len(parts) == 2 and parts[1] == "__init__.py":
        return "xlikert"
    return f"xlikert.{parts[1].removesuffix('.py')}"


def mypy_errors() -> tuple[Counter, str]:
    """mypy's errors per top-level module, and its output (raises if mypy itself failed)."""
    run = subprocess.run(
        [sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    if run.returncode not in (0, 1) or not re.search(
        r"^(Success|Found \d+ error)", run.stdout, re.M
    ):
        raise RuntimeError(
            f"mypy did not run ({run.returncode}):\n{run.stdout[-3000:]}{run.stderr[-3000:]}"
        )
    return Counter(unit(m.group(1)) for m in ERROR.finditer(run.stdout)), run.stdout


def over_baseline(counts: Counter, baseline: dict[str, int]) -> list[str]:
    """One line per module with more errors than allowed: its baseline, none in ZERO or new."""
    allowed = {name: 0 if name in ZERO else baseline.get(name, 0) for name in counts}
    return [
        f"{name}: {n} error(s), allowed {allowed[name]}"
        for name, n in sorted(counts.items())
        if n > allowed[name]
    ]


def test_the_rule_refuses_a_rise_a_new_module_and_any_error_in_zero():
    baseline = {"xlikert.collect": 2, "xlikert.core": 5}
    assert over_baseline(Counter({"xlikert.collect": 2, "xlikert.plot": 0}), baseline) == []
    assert over_baseline(Counter({"xlikert.collect": 1}), baseline) == []
    counts = Counter({"xlikert.collect": 3, "xlikert.core": 1, "xlikert.new": 1, "xlikert.io": 1})
    assert over_baseline(counts, baseline) == [
        "xlikert.collect: 3 error(s), allowed 2",
        "xlikert.core: 1 error(s), allowed 0",
        "xlikert.io: 1 error(s), allowed 0",
        "xlikert.new: 1 error(s), allowed 0",
    ]


def test_mypy_errors_only_go_down():
    counts, output = mypy_errors()
    problems = over_baseline(counts, json.loads(BASELINE.read_text("utf-8"))["errors"])
    own = [line for line in output.splitlines() if line.startswith("xlikert/")]
    assert not problems, "\n".join([*problems, "", *own[:200]])


def write_baseline(init: bool = False) -> dict[str, int]:
    """Lower ``tests/mypy-baseline.json`` to the counts reached (``init``: write them)."""
    counts, _ = mypy_errors()
    old = {} if init else json.loads(BASELINE.read_text("utf-8"))["errors"]
    new = {
        name: n if init else min(n, old.get(name, 0))
        for name, n in sorted(counts.items())
        if (n if init else min(n, old.get(name, 0)))
    }
    import mypy.version

    BASELINE.write_text(
        json.dumps({"mypy": mypy.version.__version__, "total": sum(new.values()), "errors": new},
                   indent=2) + "\n", "utf-8",
    )  # fmt: skip
    return new


if __name__ == "__main__":
    written = write_baseline(init="--init" in sys.argv[1:])
    print(f"{BASELINE.relative_to(ROOT)}: {sum(written.values())} errors in {len(written)} modules")
