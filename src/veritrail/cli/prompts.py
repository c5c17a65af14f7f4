"""`veritrail prompts list|export|show`: the packaged prompt templates, for reading and editing.

Export them, edit the copies, and point a run at the folder with `VERITRAIL_PROMPT_DIR=DIR`
(or the config's prompt directory): files found there replace the packaged ones by name.
"""

from __future__ import annotations

from pathlib import Path

import click

from ..method.prompting import export_prompts, packaged_prompt_names, prompt_source


@click.group()
def prompts() -> None:
    """List, show or export the prompt templates."""


@prompts.command("list")
def list_() -> None:
    """Names of the packaged templates."""
    for name in packaged_prompt_names():
        click.echo(name)


@prompts.command()
@click.argument("name")
def show(name: str) -> None:
    """Print one template (the override if VERITRAIL_PROMPT_DIR has one)."""
    click.echo(prompt_source(name), nl=False)


@prompts.command()
@click.argument("dest", type=click.Path(file_okay=False, path_type=Path))
def export(dest: Path) -> None:
    """Write every packaged template to DEST for editing."""
    written = export_prompts(dest)
    click.echo(f"wrote {len(written)} templates to {dest}")
    click.echo(f"use them with: VERITRAIL_PROMPT_DIR={dest} veritrail verify ...")
