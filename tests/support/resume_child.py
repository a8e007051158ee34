"""Child process of the resume tests (run as a script): a slow run that the test kills.

``child.py MODEL_DIR OUT DELAY [reasoning]``: with ``reasoning`` the second model
samples 2 traces of up to 4 tokens per prompt.
"""

import sys
import time


def run(model_dir, out, delay: float = 0.0, *extra: str) -> None:
    """The run: 2 models x 8 units of 2 prompts, ``delay`` seconds after each unit."""
    from support.tiny import tiny_prompts
    from xlikert.collect import collect

    second = {"name": "tiny2", "source": str(model_dir)}
    if list(extra) == ["reasoning"]:
        second["reasoning"] = {"traces": 2, "max_new_tokens": 4, "seed": 11}
    collect(
        tiny_prompts(3, 5),
        [{"name": "tiny", "source": str(model_dir)}, second],
        out,
        chunk_size=2,
        batch_size=2,
        progress=False,
        on_unit=lambda done, total: time.sleep(delay),
    )


def main() -> None:
    run(sys.argv[1], sys.argv[2], float(sys.argv[3]), *sys.argv[4:])


if __name__ == "__main__":
    main()
