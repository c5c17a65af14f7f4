"""Helpers every subcommand shares: input errors exit with status 2 and a one-line message."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import NoReturn

import click


def fail(message: str, code: int = 2) -> NoReturn:
    """Print an input error and exit (status 2 = bad input)."""
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def read_text(path: str) -> str:
    """A UTF-8 text file's content, or an input error naming the file."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"{path}: {exc}")
