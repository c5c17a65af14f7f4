"""`--cache` means the same in every command that calls a model: the model's response cache, a
SQLite file or `off`, the user cache by default (`cli.common.CACHE_HELP`, parsed by
`run.settings.model_cache`). SIRG's cache of analyses is another thing with another name."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from veritrail.cli.common import CACHE_HELP
from veritrail.cli.main import cli
from veritrail.run.settings import model_cache

MODEL_COMMANDS = [
    ["verify"],
    ["check"],
    ["batch"],
    ["eval"],
    ["detect"],
    ["extract"],
    ["from-graphrag"],
]


def _help(args: list[str]) -> str:
    res = CliRunner().invoke(cli, [*args, "--help"], terminal_width=400)
    assert res.exit_code == 0, res.output
    return " ".join(res.output.split())


@pytest.mark.parametrize("args", MODEL_COMMANDS, ids=lambda a: " ".join(a))
def test_every_model_command_documents_one_cache(args: list[str]) -> None:
    text = _help(args)
    assert " ".join(CACHE_HELP.split()) in text
    assert "--cache-dir" not in text


def test_the_one_parser_of_a_cache_value() -> None:
    assert model_cache(None) is True
    assert model_cache("off") is False
    assert model_cache("/tmp/x.sqlite") == "/tmp/x.sqlite"


def test_batch_has_no_second_cache_flag() -> None:
    res = CliRunner().invoke(cli, ["batch", "m.jsonl", "--cache-dir", "d"])
    assert res.exit_code == 2 and "--cache-dir" in res.output


def test_sirg_names_its_analysis_cache_differently() -> None:
    text = _help(["sirg", "detect"])
    assert "--analysis-cache" in text and CACHE_HELP.split(":")[0] not in text
