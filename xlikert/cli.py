"""Command-line interface: ``xlikert prompts | run | merge | demo | report``.

Each sub-command lives beside the layer it drives (``xlikert.design.cli``,
``xlikert.collect.cli``, ``xlikert.report.cli``) and is registered here, so
``xlikert --help`` starts fast: heavy imports (torch, transformers) happen only
inside the command that needs them.
"""

from __future__ import annotations

import importlib

import click

from ._version import __version__

# (module, attribute) of each sub-command, imported lazily.
_COMMANDS: dict[str, tuple[str, str]] = {
    "prompts": ("xlikert.design.cli", "prompts"),
    "run": ("xlikert.collect.cli", "run"),
    "merge": ("xlikert.collect.cli", "merge"),
    "demo": ("xlikert.collect.cli", "demo"),
    "report": ("xlikert.report.cli", "report"),
}


class _LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in _COMMANDS:
            return None
        module, attr = _COMMANDS[cmd_name]
        return getattr(importlib.import_module(module), attr)


@click.group(cls=_LazyGroup)
@click.version_option(__version__, prog_name="xlikert")
def main() -> None:
    """xlikert: exact Likert PMFs from language models, and their distributional ANOVA."""


if __name__ == "__main__":  # pragma: no cover
    main()
