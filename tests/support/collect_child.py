"""Child process of the run-safety tests (run as a script): one collection run.

``collect_child.py JSON``: the JSON object holds ``model_dir``, ``out`` and optional
``targets`` (default 3), ``items`` (5), ``models`` (names, default ``["tiny"]``),
``chunk_size`` (2), ``shard``, ``delay`` (seconds slept after each unit) and
``ready`` (a file written after the first unit). A run stopped by a signal prints
its message and exits with 128 + the signal's number, as ``xlikert run`` does.
"""

import json
import sys
import time
from pathlib import Path


def main() -> None:
    from support.tiny import tiny_prompts
    from xlikert.collect import collect
    from xlikert.collect.run.interrupt import RunInterrupted

    cfg = json.loads(sys.argv[1])
    ready = Path(cfg["ready"]) if cfg.get("ready") else None

    def on_unit(done: int, total: int) -> None:
        if ready is not None and not ready.exists():
            ready.write_text(str(done))
        time.sleep(float(cfg.get("delay", 0)))

    models = [{"name": m, "source": cfg["model_dir"]} for m in cfg.get("models", ["tiny"])]
    try:
        collect(
            tiny_prompts(cfg.get("targets", 3), cfg.get("items", 5)),
            models,
            cfg["out"],
            chunk_size=cfg.get("chunk_size", 2),
            batch_size=2,
            shard=cfg.get("shard"),
            progress=False,
            on_unit=on_unit,
        )
    except RunInterrupted as exc:
        print(f"xlikert: {exc}", file=sys.stderr)
        sys.exit(exc.exit_status)


if __name__ == "__main__":
    main()
