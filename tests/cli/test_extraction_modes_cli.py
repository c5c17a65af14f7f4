"""`--extraction batched|per-sentence` (issue 38, item 1) on `extract`, `check` and `verify`, and
as the `extraction` setting (environment, TOML): both forms give the same claims and verdicts with
the demonstration model (`demo/overlap`, in-process), at 3 extraction calls or 3 a sentence."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from veritrail.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]
CHECK = ROOT / "examples" / "check"
QUICKSTART = ROOT / "examples" / "quickstart"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("VERITRAIL_MODEL", "VERITRAIL_EXTRACTION", "VERITRAIL_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("VERITRAIL_CACHE", "off")
    monkeypatch.chdir(tmp_path)  # no ./veritrail.toml of the caller's


def _run(args: list[str], env: dict[str, str] | None = None) -> Any:
    res = CliRunner().invoke(cli, args, env=env, catch_exceptions=False)
    return res


def test_extract_in_both_forms_gives_the_same_claims_file(tmp_path: Path) -> None:
    docs = {}
    for mode in ("batched", "per-sentence"):
        out = tmp_path / f"{mode}.json"
        res = _run(
            [
                "extract",
                str(CHECK / "answer.txt"),
                "--model",
                "demo/overlap",
                "--extraction",
                mode,
                "--out",
                str(out),
            ]
        )
        assert res.exit_code == 0, res.output
        docs[mode] = json.loads(out.read_text())
    calls = {m: {s: c["lm_calls"] for s, c in d["cost"].items()} for m, d in docs.items()}
    assert calls["batched"] == {"claim_selection": 1, "claim_disambiguation": 1, "decomposition": 1}
    assert calls["per-sentence"] == {
        "claim_selection": 3,
        "claim_disambiguation": 3,
        "decomposition": 3,
    }
    assert docs["batched"]["claims"] == docs["per-sentence"]["claims"]
    assert len(docs["batched"]["claims"]) == 3


def _report(tmp_path: Path, name: str, args: list[str], env: dict[str, str] | None = None) -> Any:
    out = tmp_path / f"{name}.json"
    res = _run([*args, "--out", str(out), "--run-dir", str(tmp_path / name), "--quiet"], env)
    assert res.exit_code in (0, 1), res.output
    return json.loads(out.read_text())


def _claims(report: Any) -> list[tuple[str, list[int], str]]:
    return [(c["text"], c["sentence_indices"], c["verdict"]) for c in report["claims"]]


def test_check_in_both_forms_gives_the_same_claims_and_verdicts(tmp_path: Path) -> None:
    sources = sorted(str(p) for p in (CHECK / "sources").glob("*.txt"))
    args = ["check", str(CHECK / "answer.txt"), *sources, "--model", "demo/overlap"]
    batched = _report(tmp_path, "b", args)
    per_flag = _report(tmp_path, "p", [*args, "--extraction", "per-sentence"])
    per_env = _report(tmp_path, "e", args, env={"VERITRAIL_EXTRACTION": "per-sentence"})
    toml = tmp_path / "settings.toml"
    toml.write_text('extraction = "per-sentence"\n')
    per_toml = _report(tmp_path, "t", [*args, "--config", str(toml)])
    assert _claims(batched) == _claims(per_flag) == _claims(per_env) == _claims(per_toml)
    assert len(batched["claims"]) == 3
    assert batched["run"]["extraction_cost"]["lm_calls"] == 3
    for per in (per_flag, per_env, per_toml):
        assert per["run"]["extraction_cost"]["lm_calls"] == 9


def test_verify_without_claims_in_both_forms_gives_the_same_report_claims(tmp_path: Path) -> None:
    args = ["verify", str(QUICKSTART / "dag.json"), "--model", "demo/overlap"]
    batched = _report(tmp_path, "b", args)
    per = _report(tmp_path, "p", [*args, "--extraction", "per-sentence"])
    assert _claims(batched) == _claims(per) and batched["claims"]


def test_an_unknown_form_is_bad_input(tmp_path: Path) -> None:
    res = _run(
        ["check", str(CHECK / "answer.txt"), str(CHECK / "answer.txt"), "--extraction", "sometimes"]
    )
    assert res.exit_code == 2 and "sometimes" in res.output
    res = _run(
        ["check", str(CHECK / "answer.txt"), str(CHECK / "answer.txt"), "--model", "demo/overlap"],
        env={"VERITRAIL_EXTRACTION": "sometimes"},
    )
    assert res.exit_code == 2 and "extraction" in res.output
