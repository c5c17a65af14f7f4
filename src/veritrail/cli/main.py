"""Entry point. Subcommands are imported only when invoked, so `veritrail dag validate` on a big
file does not pay for the model layer's imports."""

from __future__ import annotations

import importlib
import sys
from typing import Any

import click

# name -> "module:attribute" (relative to veritrail.cli). Add one line per subcommand module.
COMMANDS: dict[str, str] = {
    "dag": "dag:dag",
    "verify": "verify:verify",
    "eval": "eval:eval_cmd",
    "extract": "extract:extract",
    "detect": "detect:detect",
    "from-graphrag": "from_graphrag:from_graphrag",
    "from-booookscore": "from_booookscore:from_booookscore",
    "pipeline": "pipeline:pipeline",
    "report": "report:report",
    "resume": "resume:resume",
    "cache": "cache:cache",
    "prompts": "prompts:prompts",
    "sirg": "sirg:sirg",
}


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        mod_name, attr = target.split(":")
        mod = importlib.import_module(f"veritrail.cli.{mod_name}")
        cmd: Any = getattr(mod, attr)
        assert isinstance(cmd, click.Command)
        return cmd


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="veritrail")
def cli() -> None:
    """VeriTrail: find unsupported claims in the output of a multi-step LLM pipeline and trace
    each claim back through the intermediate outputs to the source sentences."""


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    cli.main(args=argv if argv is not None else sys.argv[1:], prog_name="veritrail")
