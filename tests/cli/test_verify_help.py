"""One source for every default (issue 15): `veritrail verify --help` shows the method's defaults
exactly as `VerifyConfig` has them, and the command module stays a thin layer."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import click
from click.testing import CliRunner

import veritrail.cli.verify as verify_module
from veritrail.cli.main import cli
from veritrail.method.config import VerifyConfig
from veritrail.run.settings import Settings

# The flag that sets each field. The evidence sentence limits also take `--evidence-sentences`
# (both at once); `sample_temperature` has no flag of its own and is shown with `--samples`.
FLAGS = {f.name: "--" + f.name.replace("_", "-") for f in dataclasses.fields(VerifyConfig)}
FLAGS["sample_temperature"] = "--samples"


def _options_help() -> dict[str, str]:
    """Each option's help as `verify --help` prints it (click's help record of the option; the
    printed page is checked to contain it, wrapped lines joined)."""
    out = CliRunner().invoke(cli, ["verify", "--help"], terminal_width=100)
    assert out.exit_code == 0, out.output
    page = "".join(out.output.split())  # wrapping may break a line after a hyphen
    command = cli.get_command(click.Context(cli), "verify")
    assert command is not None
    ctx = click.Context(command)
    helps: dict[str, str] = {}
    for param in command.get_params(ctx):
        record = param.get_help_record(ctx)
        if record is None:
            continue
        names, help_text = record
        help_text = " ".join(help_text.split())
        assert "".join(help_text.split()) in page, help_text
        for name in names.split(" ")[0].split("/"):
            helps[name.rstrip(",")] = help_text
        for opt in getattr(param, "opts", []):
            helps[opt] = help_text
    return helps


def _shown(value: object) -> str:
    return "none" if value is None else str(value)


def test_every_verify_config_default_shows_in_verify_help() -> None:
    helps = _options_help()
    for field in dataclasses.fields(VerifyConfig):
        flag = FLAGS[field.name]
        assert flag in helps, flag
        shown = _shown(field.default)
        if field.name == "sample_temperature":
            assert f"sample_temperature {shown}" in helps[flag]
        else:
            assert re.search(rf"\[default: (?:[^\]]*, else )?{re.escape(shown)}\]", helps[flag]), (
                field.name,
                helps[flag],
            )


def test_help_follows_the_dataclass_not_a_copy() -> None:
    # Settings take their method defaults from VerifyConfig: equal field by field.
    method = VerifyConfig()
    settings = Settings()
    for field in dataclasses.fields(VerifyConfig):
        if field.name in ("evidence_sentences_root", "evidence_sentences_nonroot"):
            assert getattr(settings, field.name) is None  # "the method's default"
            assert settings.verify_config() == method
        else:
            assert getattr(settings, field.name) == getattr(method, field.name), field.name
    helps = _options_help()
    assert f"[default: {method.evidence_sentences_root}]" in helps["--evidence-sentences"]
    assert f"[default: {settings.runs_dir}]" in helps["--runs-dir"]


def test_verify_command_module_is_thin() -> None:
    source = Path(verify_module.__file__).read_text(encoding="utf-8")
    assert len(source.splitlines()) <= 300
