"""One base class for every error veritrail reports to a user.

`VeritrailError` is what the command line catches once (`cli/main.py`) instead of listing each
module's errors: an error that derives from it carries a message meant for a person, already
redacted, and an exit code. Each concrete error keeps its old built-in base too (`ValueError`,
`RuntimeError`, ...), so code that caught it by that base keeps working.

Exit codes follow the table in README.md ("Exit codes"; details in docs/running.md): bad input or usage is 2, decided before any
model call; a failure of the model endpoint that stops the run is 3.
"""

from __future__ import annotations

from typing import ClassVar


class VeritrailError(Exception):
    """Base of every error with a message meant for the user (and the exit code it maps to)."""

    #: The process exit code the CLI uses when this error ends a command.
    exit_code: ClassVar[int] = 2


class InputProblem(VeritrailError):
    """Bad input or usage: a file, a setting or an argument veritrail cannot use (exit 2).

    Raised before any model call wherever the problem can be seen up front.
    """

    exit_code: ClassVar[int] = 2


class RunFailure(VeritrailError):
    """The run could not go on: the model endpoint refused it or failed for good (exit 3)."""

    exit_code: ClassVar[int] = 3
