"""Checks `veritrail verify` makes before any model call: a malformed base URL and prompt
overrides are bad input (exit 2, one line, nothing written, no request)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from veritrail.cli.main import cli
from veritrail.testing import FakeOpenAIServer

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "quickstart"


def _verify(*extra: str) -> tuple[int, str]:
    args = [
        "verify",
        str(EXAMPLE / "dag.json"),
        "--claims",
        str(EXAMPLE / "claims.json"),
        "--cache",
        "off",
        *extra,
    ]
    res = CliRunner().invoke(cli, args)
    return res.exit_code, res.output


def test_malformed_base_url_is_bad_input_before_any_call(tmp_path: Path) -> None:
    for url in ("htp:/bad url", "127.0.0.1:8000/v1", "ftp://host/v1", "http://host:port/v1"):
        code, out = _verify("--model", "openai/x", "--base-url", url)
        assert code == 2, (url, out)
        assert out.startswith("error: malformed base URL") and "Traceback" not in out
        code, out = _verify("--model", "openai/x", "--base-url", url, "--dry-run")
        assert code == 2, (url, out)
    assert not (tmp_path / "runs").exists()


def test_prompt_overrides_are_checked_before_any_call(tmp_path: Path) -> None:
    pd = tmp_path / "prompts"
    pd.mkdir()
    with FakeOpenAIServer() as srv:
        common = ("--model", "openai/x", "--base-url", srv.base_url, "--prompt-dir", str(pd))
        (pd / "verdikt.md").write_text("## user\n{{claim}}\n", encoding="utf-8")
        code, out = _verify(*common)
        assert code == 2 and "verdikt.md matches no prompt" in out
        (pd / "verdikt.md").unlink()
        (pd / "verdict.md").write_text("no sections at all\n", encoding="utf-8")
        code, out = _verify(*common)
        assert code == 2 and "has no '## user' section" in out
        (pd / "verdict.md").write_bytes(b"## user\ncaf\xe9\n")
        code, out = _verify(*common)
        assert code == 2 and "not UTF-8: byte 0xe9" in out
        code, out = _verify(
            "--model", "openai/x", "--base-url", srv.base_url, "--prompt-dir", str(tmp_path / "x")
        )
        assert code == 2 and "is not a directory" in out
        assert srv.count == 0
