"""Child process of the resume tests (run as a script): a slow run that the test kills.

``child.py MODEL_DIR OUT DELAY [reasoning]``: with ``reasoning`` the second model
samples 2 traces of up to 4 tokens per prompt.
"""

import sys
import time


def main() -> None:
    from support.tiny import tiny_prompts
    from xlikert.collect import collect

    model_dir, out, delay = sys.argv[1], sys.argv[2], float(sys.argv[3])
    second = {"name": "tiny2", "source": model_dir}
    if sys.argv[4:] == ["reasoning"]:
        second["reasoning"] = {"traces": 2, "max_new_tokens": 4, "seed": 11}
    collect(
        tiny_prompts(3, 5),
        [{"name": "tiny", "source": model_dir}, second],
        out,
        chunk_size=2,
        batch_size=2,
        progress=False,
        on_unit=lambda done, total: time.sleep(delay),
    )


if __name__ == "__main__":
    main()
