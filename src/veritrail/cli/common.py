"""Helpers every subcommand shares: input errors exit with status 2 and a one-line message."""

from __future__ import annotations

import sys
from typing import NoReturn

import click

from ..textio import InputError, read_input_text


def fail(message: str, code: int = 2) -> NoReturn:
    """Print an input error and exit (status 2 = bad input)."""
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def read_text(path: str, what: str = "input file") -> str:
    """A UTF-8 input text file's content (`veritrail.textio` rules: an optional UTF-8 BOM is
    dropped; a file that is not UTF-8 is named with the byte and where), or exit 2 naming it."""
    try:
        return read_input_text(path, what)
    except InputError as exc:
        fail(str(exc))
