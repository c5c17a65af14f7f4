"""The third red team's findings on model endpoints (issue 40, item 5, low), through the CLI.

A provider with no key is bad input, said up front naming the key variable (exit 2, before any
call: no 30 seconds of retries ending in "connection failed"); a refused connection reads
"connection refused (endpoint ...)", not LiteLLM's "HTTP 500 ... SSLContext object at 0x...";
a malformed `--base-url` is bad input (exit 2) for every provider, not exit 3.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from veritrail.cli.main import cli

EX = Path(__file__).resolve().parents[2] / "examples" / "quickstart"

KEY_VARIABLES = (
    "VERITRAIL_API_KEY",
    "VERITRAIL_BASE_URL",
    "VERITRAIL_MODEL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "AZURE_OPENAI_ENDPOINT",
    "ANTHROPIC_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "MISTRAL_API_KEY",
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in KEY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setenv("VERITRAIL_CACHE", "0")
    monkeypatch.setenv("VERITRAIL_PRICES", "")
    monkeypatch.setenv("VERITRAIL_RETRY_BASE_DELAY", "0")


def verify(t: Path, *extra: str) -> tuple[int, str]:
    res = CliRunner().invoke(
        cli,
        [
            "verify",
            str(EX / "dag.json"),
            "--claims",
            str(EX / "claims.json"),
            "--run-dir",
            str(t / "run"),
            "--out",
            str(t / "report.json"),
            *extra,
        ],
    )
    return res.exit_code, res.output


@pytest.mark.parametrize(
    "model, variable",
    [
        ("gemini/gemini-2.5-flash", "GEMINI_API_KEY"),
        ("anthropic/claude-x", "ANTHROPIC_API_KEY"),
        ("openai/gpt-4o-mini", "OPENAI_API_KEY"),
    ],
)
def test_no_key_is_exit_2_up_front_naming_the_variable(
    tmp_path: Path, model: str, variable: str
) -> None:
    t0 = time.monotonic()
    code, out = verify(tmp_path, "--model", model)
    assert code == 2, out
    assert variable in out and "Traceback" not in out
    assert "connection failed" not in out
    assert time.monotonic() - t0 < 20, "retried before saying the key is missing"
    assert not (tmp_path / "report.json").exists()


def test_a_key_in_the_environment_is_enough_for_the_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dry run with the key set passes the check (and calls nothing)."""
    monkeypatch.setenv("GOOGLE_API_KEY", "k-test")
    code, out = verify(tmp_path, "--model", "gemini/gemini-2.5-flash", "--dry-run")
    assert code == 0, out


@pytest.mark.parametrize(
    "url",
    ["htp:/bad", "127.0.0.1:8000/v1", "http://", "ftp://127.0.0.1/v1", "http://host:port/"],
)
@pytest.mark.parametrize("model", ["anthropic/claude-x", "gemini/gemini-2.5-flash"])
def test_a_malformed_base_url_is_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model: str, url: str
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k-test")
    monkeypatch.setenv("GEMINI_API_KEY", "k-test")
    code, out = verify(tmp_path, "--model", model, "--base-url", url)
    assert code == 2, out
    assert "base URL" in out and "Traceback" not in out
    assert not (tmp_path / "run").exists()


@pytest.mark.slow  # >= 5 s on 2 cores: out of the fast tier
def test_a_refused_connection_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("litellm")  # the `litellm` extra (the full suite fails such a skip)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k-test")
    monkeypatch.setenv("VERITRAIL_RETRY_MAX_ATTEMPTS", "1")
    code, out = verify(
        tmp_path, "--model", "anthropic/claude-x", "--base-url", f"http://127.0.0.1:{port}"
    )
    assert code == 3, out
    assert f"connection refused (endpoint http://127.0.0.1:{port})" in out, out
    assert "SSLContext" not in out and " at 0x" not in out
    assert "HTTP 500" not in out
