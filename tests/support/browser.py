"""A page as headless Chromium renders it: the DOM after parsing (tried-as-a-user checks).

Chromium is not a Python package: where it is not installed (``apt-get install
chromium``), :func:`rendered_dom` says so and the tests that need it skip.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

__all__ = ["chromium", "rendered_dom"]


def chromium() -> str | None:
    """The Chromium executable on the PATH, or None."""
    return next(
        (
            p
            for name in ("chromium", "chromium-browser", "google-chrome")
            if (p := shutil.which(name))
        ),
        None,
    )


def rendered_dom(page: Path, timeout: float = 60.0) -> str:
    """The DOM of ``page`` as headless Chromium serialises it after loading it."""
    exe = chromium()
    if exe is None:
        raise FileNotFoundError("no Chromium on the PATH (apt-get install chromium)")
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom",
           Path(page).resolve().as_uri()]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=True)
    return done.stdout
