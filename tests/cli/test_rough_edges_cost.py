"""A model with no known price: the terminal says the cost is unknown (never `$0.0000`), in
`verify`'s Cost table, `batch`'s progress lines and `eval`'s results table; a priced model (even
at 0 dollars) still shows its figure."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from clikit import TINY_EVAL_DATASET, loopback_model_env
from veritrail.cli.main import cli
from veritrail.display import CallTotals, fmt_dollars, unpriced_models
from veritrail.lm.fake import FakeProvider
from veritrail.lm.model import Model
from veritrail.lm.openai import OpenAIProvider
from veritrail.lm.pricing import PriceTable
from veritrail.testing import FakeOpenAIServer
from veritrail.testing.overlap import responder

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart"


def test_the_models_note_is_what_the_display_reads() -> None:
    """`lm.model.Model`'s "no price known" note is recognised (the two stay in step)."""
    unpriced = Model(
        OpenAIProvider("no-such-model-x", base_url="http://127.0.0.1:9/v1", api_key="k"),
        prices=PriceTable(),
    )
    assert unpriced_models(unpriced.notes) == ("openai/no-such-model-x",)
    assert unpriced_models(Model(FakeProvider(), prices=PriceTable()).notes) == ()


def test_fmt_dollars() -> None:
    assert fmt_dollars(0.0) == "$0.0000"
    assert fmt_dollars(0.0123) == "$0.0123"
    text = fmt_dollars(0.0, ("openai/x",))
    assert "$" not in text and "unknown" in text and "openai/x" in text
    both = fmt_dollars(0.5, ("openai/x",))
    assert "$0.5000" in both and "unknown" in both
    t = CallTotals(dollars=0.0)
    assert t.dollars_text() == "$0.0000"
    t.unpriced = ("openai/x",)
    assert "unknown" in t.dollars_text()


def _summary_part(output: str) -> str:
    # The end-of-run tables (not the "[veritrail] ..." progress lines of a non-terminal).
    return "\n".join(x for x in output.splitlines() if not x.startswith("[veritrail]"))


def test_verify_cost_table_says_unknown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    loopback_model_env(monkeypatch, no_prices=True)
    with FakeOpenAIServer(responder=responder) as srv:
        res = CliRunner().invoke(
            cli,
            [
                "verify",
                str(QUICKSTART / "dag.json"),
                "--claims",
                str(QUICKSTART / "claims.json"),
                "--model",
                "openai/loopback",
                "--base-url",
                srv.base_url,
                "--cache",
                "off",
                "--out",
                str(tmp_path / "r.json"),
            ],
        )
    assert res.exit_code in (0, 1), res.output
    summary = _summary_part(res.output)
    row = next(x for x in summary.splitlines() if "dollars" in x)
    assert "unknown" in row and "$0.0000" not in row, summary
    # The progress lines (a non-terminal's "[veritrail] ..." lines) say it too.
    progress = [x for x in res.output.splitlines() if x.startswith("[veritrail]") and "calls" in x]
    assert progress and all("cost unknown" in x for x in progress), res.output
    assert "$0.0000" not in res.output


def test_verify_cost_table_priced_at_zero(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    loopback_model_env(monkeypatch, no_prices=True)
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"openai/loopback": {"input": 0, "output": 0}}))
    with FakeOpenAIServer(responder=responder) as srv:
        res = CliRunner().invoke(
            cli,
            [
                "verify",
                str(QUICKSTART / "dag.json"),
                "--claims",
                str(QUICKSTART / "claims.json"),
                "--model",
                "openai/loopback",
                "--base-url",
                srv.base_url,
                "--cache",
                "off",
                "--prices",
                str(prices),
                "--out",
                str(tmp_path / "r.json"),
            ],
        )
    assert res.exit_code in (0, 1), res.output
    row = next(x for x in _summary_part(res.output).splitlines() if "dollars" in x)
    assert "$0.0000" in row and "unknown" not in row


def test_batch_progress_says_unknown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    loopback_model_env(monkeypatch, no_prices=True)
    job = {
        "id": "j1",
        "dag": str(QUICKSTART / "dag.json"),
        "claims": str(QUICKSTART / "claims.json"),
        "out": "reports/j1.json",
    }
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps(job) + "\n")
    with FakeOpenAIServer(responder=responder) as srv:
        res = CliRunner().invoke(
            cli,
            [
                "batch",
                str(manifest),
                "--model",
                "openai/loopback",
                "--base-url",
                srv.base_url,
                "--cache",
                "off",
                "--runs-dir",
                str(tmp_path / "runs"),
            ],
        )
    assert res.exit_code in (0, 1), res.output
    assert "$0.0000" not in res.output, res.output
    prog = [x for x in res.output.splitlines() if x.startswith("[veritrail] ") and "calls" in x]
    assert prog and all("cost unknown" in x for x in prog if "claims (" in x), res.output


@pytest.mark.parametrize("fmt", ["table", "markdown"])
def test_eval_table_says_unknown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str) -> None:
    loopback_model_env(monkeypatch, no_prices=True)
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
                "--method",
                "oracle",
                "--format",
                fmt,
                "--quiet",
            ],
            terminal_width=250,
        )
    assert res.exit_code == 0, res.output
    row = next(x for x in res.output.splitlines() if "VeriTrail" in x)
    assert "unknown" in row and "0.0000" not in row, res.output
    assert "no price known for openai/loopback" in res.output


def test_eval_progress_line_says_unknown() -> None:
    from veritrail.eval.runner import EvalProgress

    figures = EvalProgress(["veritrail"], 2, clock=lambda: 0.0)
    figures.unpriced = ("openai/loopback",)
    line = figures.line()
    assert "cost unknown (no price for openai/loopback)" in line and "$0.0000" not in line
