"""Child process of the resume test (run as a script): a slow run that the test kills."""

import sys
import time


def main() -> None:
    from test_collect_support import tiny_prompts

    from xlikert.collect import collect

    model_dir, out, delay = sys.argv[1], sys.argv[2], float(sys.argv[3])
    collect(
        tiny_prompts(3, 5),
        [{"name": "tiny", "source": model_dir}, {"name": "tiny2", "source": model_dir}],
        out,
        chunk_size=2,
        batch_size=2,
        progress=False,
        on_unit=lambda done, total: time.sleep(delay),
    )


if __name__ == "__main__":
    main()
