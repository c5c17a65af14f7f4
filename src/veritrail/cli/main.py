"""Entry point. Subcommands are imported only when invoked, so `veritrail dag validate` on a big
file does not pay for the model layer's imports."""

from __future__ import annotations

import importlib
import sys
from typing import Any, NoReturn

import click

from ..errors import VeritrailError

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
    "export": "export:export",
    "watch": "watch:watch",
    "pipeline": "pipeline:pipeline",
    "report": "report:report",
    "resume": "resume:resume",
    "cache": "cache:cache",
    "prompts": "prompts:prompts",
    "sirg": "sirg:sirg",
    "diff": "diff:diff",
    "view": "view:view",
    "runs": "runs:runs",
    "review": "review:review",
    "inject": "inject:inject",
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

    def invoke(self, ctx: click.Context) -> Any:
        """Run the subcommand; a `VeritrailError` it raises ends the process here (`exit_on`).

        The one place every command's errors are reported, so a command raises its errors
        instead of catching them one by one. Here rather than in `main` so that every way of
        running the group (the console script, `CliRunner` in the tests) reports them alike.
        """
        try:
            return super().invoke(ctx)
        except VeritrailError as exc:
            exit_on(exc)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="veritrail")
def cli() -> None:
    """VeriTrail: find unsupported claims in the output of a multi-step LLM pipeline and trace
    each claim back through the intermediate outputs to the source sentences.

    Exit status of the commands that verify (verify, check, resume): 0 every claim verified and
    no gate failed; 1 a gate failed (--max-unsupported); 2 bad input or usage; 3 one or more
    claims could not be verified; 130 interrupted.
    """


def error_line(exc: VeritrailError) -> str:
    """The one `error: ...` text for an error a command did not handle, redacted.

    A model failure names what failed ("the endpoint refused the run" for an `EndpointError`,
    else "model call failed") and its short cause; any other error is its own message, which
    names the file or setting at fault (a DAG file with several problems lists them on indented
    lines below the first).
    """
    from ..lm.base import EndpointError, ProviderError
    from ..redaction import redact

    if isinstance(exc, ProviderError):
        kind = (
            "the endpoint refused the run"
            if isinstance(exc, EndpointError)
            else "model call failed"
        )
        return f"error: {kind}: {redact(exc.cause)}"
    return f"error: {redact(str(exc))}"


def exit_on(exc: VeritrailError) -> NoReturn:
    """Print `error_line(exc)` on stderr and exit with the error's code: 2 for bad input or
    usage (`InputProblem`), 3 when the run could not go on (`RunFailure`, e.g. a model endpoint
    that failed for good)."""
    click.echo(error_line(exc), err=True)
    sys.exit(int(exc.exit_code))


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point.

    Errors of veritrail's own (`VeritrailError`: bad input, a model failure no command handled
    itself, e.g. claim extraction in `extract`, a detector's call, a pipeline step) are reported
    by the group (`LazyGroup.invoke`, `exit_on`): one redacted line, exit 2 or 3. Here: click's
    own usage errors, and Ctrl-C exits 130. `verify` and `resume` handle model failures and
    interrupts themselves, with more detail.
    """
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
