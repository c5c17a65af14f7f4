"""`veritrail detect --method g2l --max-unsupported RATE`: the exit codes of `verify` — 0 when
every path is supported or the gate holds, 1 when the share of unsupported paths is above RATE,
3 when the text could not be checked (no usable tree, or a path no reply decided), 2 for a bad
RATE. Against the loopback word-overlap model (veritrail.testing.overlap), no key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from clikit import loopback_model_env
from veritrail.cli.main import cli
from veritrail.testing import FakeOpenAIServer
from veritrail.testing.overlap import responder

REF = "Acme was founded in 1990 in Oslo. It makes bicycles."
MIXED = "Acme was founded in 1990. Acme sells submarines worldwide."
SUPPORTED = "Acme was founded in 1990. It makes bicycles."


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch) -> None:
    loopback_model_env(monkeypatch)


def _detect(tmp_path: Path, text: str, *extra: str, reply: object = responder) -> tuple[int, str]:
    (tmp_path / "text.txt").write_text(text)
    (tmp_path / "ref.txt").write_text(REF)
    with FakeOpenAIServer(responder=reply) as srv:  # type: ignore[arg-type]
        res = CliRunner().invoke(
            cli,
            [
                "detect",
                "--method",
                "g2l",
                "--text",
                str(tmp_path / "text.txt"),
                "--refs",
                str(tmp_path / "ref.txt"),
                "--model",
                "openai/loopback",
                "--base-url",
                srv.base_url,
                "--cache",
                "off",
                "--out",
                str(tmp_path / "g2l.json"),
                *extra,
            ],
        )
    return res.exit_code, res.output


def test_unsupported_path_fails_the_gate(tmp_path: Path) -> None:
    code, out = _detect(tmp_path, MIXED, "--max-unsupported", "0")
    assert code == 1, out
    assert "gate" in out and "1 of 2 paths" in out
    report = json.loads((tmp_path / "g2l.json").read_text())
    assert report["status"] == "failed"  # the report is written before the exit


def test_gate_not_exceeded(tmp_path: Path) -> None:
    code, out = _detect(tmp_path, MIXED, "--max-unsupported", "0.5")
    assert code == 0, out


def test_no_gate_exits_0_as_verify_does(tmp_path: Path) -> None:
    code, out = _detect(tmp_path, MIXED)
    assert code == 0, out
    assert "1 unsupported" in out


def test_all_supported(tmp_path: Path) -> None:
    code, out = _detect(tmp_path, SUPPORTED, "--max-unsupported", "0")
    assert code == 0, out


def test_no_tree_exits_3(tmp_path: Path) -> None:
    code, out = _detect(tmp_path, MIXED, "--max-unsupported", "0", reply=lambda req: "no tree")
    assert code == 3, out
    assert "could not build a tree" in out


def test_undecided_path_exits_3(tmp_path: Path) -> None:
    def tree_then_nonsense(req: dict[str, object]) -> str:
        user = req["messages"][-1]["content"]  # type: ignore[index]
        return responder(req) if str(user).startswith("Text to organise:") else "nonsense"

    code, out = _detect(tmp_path, MIXED, reply=tree_then_nonsense)
    assert code == 3, out


def test_bad_rate_is_a_usage_error(tmp_path: Path) -> None:
    code, out = _detect(tmp_path, MIXED, "--max-unsupported", "1.5")
    assert code == 2, out


def test_other_methods_take_the_gate_over_the_one_text(tmp_path: Path) -> None:
    (tmp_path / "text.txt").write_text(MIXED)
    (tmp_path / "ref.txt").write_text(REF)
    with FakeOpenAIServer(responder=responder) as srv:
        args = [
            "detect",
            "--method",
            "veritrail:q=1",
            "--text",
            str(tmp_path / "text.txt"),
            "--refs",
            str(tmp_path / "ref.txt"),
            "--model",
            "openai/loopback",
            "--base-url",
            srv.base_url,
            "--cache",
            "off",
            "--out",
            str(tmp_path / "d.json"),
        ]
        gated = CliRunner().invoke(cli, [*args, "--max-unsupported", "0"])
        free = CliRunner().invoke(cli, args)
    assert gated.exit_code == 1, gated.output
    assert "Not Fully Supported" in gated.output and "gate failed" in gated.output
    assert free.exit_code == 0, free.output
