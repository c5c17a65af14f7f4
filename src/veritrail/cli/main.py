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
    "check": "check:check",
    "batch": "batch:batch",
    "eval": "eval:eval_cmd",
    "extract": "extract:extract",
    "detect": "detect:detect",
    "from-graphrag": "from_graphrag:from_graphrag",
    "from-booookscore": "from_booookscore:from_booookscore",
    "from-trace": "from_trace:from_trace",
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
    each claim back through the intermediate outputs to the source sentences.

    Exit status of the commands that verify (verify, check, resume): 0 every claim verified and
    no gate failed; 1 a gate failed (--max-unsupported); 2 bad input or usage; 3 one or more
    claims could not be verified; 130 interrupted.
    """


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point.

    The last line of defence for the "never a traceback" contract: a model failure that a
    command did not handle itself (claim extraction in `extract`, a detector's call, a pipeline
    step) is printed as one redacted line and exits 3 ("could not be done", as `verify` uses it);
    Ctrl-C exits 130. `verify` and `resume` handle both themselves, with more detail.
    """
    from ..lm.base import EndpointError, ProviderError
    from ..redaction import redact

    try:
        rv = cli.main(
            args=argv if argv is not None else sys.argv[1:],
            prog_name="veritrail",
            standalone_mode=False,
        )
        # Outside standalone mode click returns `ctx.exit(n)`'s code instead of exiting with it.
        if isinstance(rv, int) and rv != 0:
            sys.exit(rv)
    except click.exceptions.Abort:
        click.echo("\ninterrupted.", err=True)
        sys.exit(130)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        click.echo("\ninterrupted.", err=True)
        sys.exit(130)
    except ProviderError as exc:
        kind = (
            "the endpoint refused the run"
            if isinstance(exc, EndpointError)
            else "model call failed"
        )
        click.echo(f"error: {kind}: {redact(exc.cause)}", err=True)
        sys.exit(3)
