"""`veritrail eval --base-url URL` points the methods' model at an OpenAI-compatible endpoint,
as `--base-url` does in every other command that calls a model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from clikit import TINY_EVAL_DATASET
from veritrail.cli.main import cli
from veritrail.testing import FakeOpenAIServer
from veritrail.testing.overlap import responder


def test_eval_takes_base_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Nothing in the environment names the endpoint: only the flag can.
    for name in ("VERITRAIL_BASE_URL", "OPENAI_BASE_URL", "VERITRAIL_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-loopback")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    data = tmp_path / "tiny.json"
    data.write_text(json.dumps(TINY_EVAL_DATASET))
    with FakeOpenAIServer(responder=responder) as srv:
        res = CliRunner().invoke(
            cli,
            [
                "eval",
                str(data),
                "--model",
                "openai/loopback",
                "--base-url",
                srv.base_url,
                "--cache",
                "off",
                "--method",
                "veritrail:q=1",
                "--format",
                "json",
                "--quiet",
            ],
        )
        assert res.exit_code == 0, res.output
        assert srv.requests  # the calls went to the flag's endpoint
    assert "--base-url" in CliRunner().invoke(cli, ["eval", "--help"]).output


def test_eval_base_url_without_model_is_a_usage_error(tmp_path: Path) -> None:
    data = tmp_path / "tiny.json"
    data.write_text(json.dumps(TINY_EVAL_DATASET))
    res = CliRunner().invoke(cli, ["eval", str(data), "--base-url", "http://127.0.0.1:9/v1"])
    assert res.exit_code == 2, res.output
    assert "--model" in res.output
