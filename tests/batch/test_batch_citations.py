"""`veritrail batch --citations auto --max-miscited RATE` through the CLI, with the oracle.

The DAG is the one `veritrail check` builds for examples/citations (its answer cites the two
sources; docs/citations.md): c2 is misattributed and c5 cites a source that does not support it,
2 of the 5 cited claims (40%). Job `cited` checks citations from the command line; job `plain`
turns them off in its own settings, so only `cited` is gated.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from veritrail.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]
EX = Path("examples") / "citations"


@pytest.fixture
def manifest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("VERITRAIL_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.chdir(ROOT)  # the oracle names the sources by the paths the docs' command gives
    args = [
        "check", str(EX / "answer.md"), str(EX / "sources" / "museum.txt"),
        str(EX / "sources" / "collection.txt"), "--claims", str(EX / "claims.json"),
        "--oracle", str(EX / "oracle.json"), "--run-dir", str(tmp_path / "made"), "--quiet",
    ]  # fmt: skip
    res = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    monkeypatch.chdir(tmp_path)
    shutil.copy(tmp_path / "made" / "dag.json", tmp_path / "dag.json")
    for name in ("claims.json", "oracle.json"):
        shutil.copy(ROOT / EX / name, tmp_path / name)
    jobs = [
        {"id": "cited", "dag": "dag.json", "claims": "claims.json", "oracle": "oracle.json",
         "out": "reports/cited.json"},
        {"id": "plain", "dag": "dag.json", "claims": "claims.json", "oracle": "oracle.json",
         "out": "reports/plain.json", "run_dir": "plain-run",
         "settings": {"citations": "off", "max_miscited": None}},
    ]  # fmt: skip
    path = tmp_path / "jobs.jsonl"
    path.write_text("".join(json.dumps(j) + "\n" for j in jobs), encoding="utf-8")
    return path


def batch(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(cli, ["batch", *args], catch_exceptions=False)
    return res.exit_code, res.stdout, res.stderr


def summary(tmp: Path) -> dict[str, Any]:
    return json.loads((tmp / "batch-summary.json").read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def test_miscited_gate_fails_the_batch(manifest: Path) -> None:
    tmp = manifest.parent
    code, out, err = batch(str(manifest), "--citations", "auto", "--max-miscited", "0.2")
    assert code == 1, out + err
    doc = summary(tmp)
    jobs = {j["id"]: j for j in doc["jobs"]}
    assert (jobs["cited"]["miscited"], jobs["cited"]["miscited_gate_failed"]) == (2, True)
    assert jobs["cited"]["gate_failed"]
    assert (jobs["plain"]["miscited"], jobs["plain"]["miscited_gate_failed"]) == (None, False)
    assert not jobs["plain"]["gate_failed"]
    assert doc["totals"]["miscited"] == 2 and doc["totals"]["miscited_gates_failed"] == 1
    assert doc["exit_code"] == 1
    # The table says which gate; stderr names the claims, as verify does.
    assert "FAILED (miscited)" in out and "2 miscited" in out
    assert "job cited: gate failed: 2 of 5 cited claims (40.0%)" in err
    assert "c2: The Harbour Museum was founded by Marta Reyes" in err and "(misattributed)" in err
    assert "(cited_not_supporting)" in err and "job plain: gate failed" not in err
    report = json.loads((tmp / "reports" / "cited.json").read_text(encoding="utf-8"))
    assert report["run"]["max_miscited"] == 0.2
    assert "citation" not in json.loads((tmp / "reports" / "plain.json").read_text())["claims"][0]
    index = (tmp / "batch-index.html").read_text(encoding="utf-8")
    assert "failed (miscited)" in index


def test_a_looser_gate_passes(manifest: Path) -> None:
    code, out, err = batch(str(manifest), "--citations", "auto", "--max-miscited", "0.5")
    assert code == 0, out + err
    doc = summary(manifest.parent)
    assert [j["miscited"] for j in doc["jobs"]] == [2, None]
    assert doc["totals"]["miscited_gates_failed"] == 0 and "FAILED" not in out


def test_max_miscited_without_citations_is_bad_input(manifest: Path) -> None:
    code, out, err = batch(str(manifest), "--max-miscited", "0.2")
    assert code == 2
    assert "--max-miscited needs --citations" in out + err
    assert "Traceback" not in out + err
    assert not (manifest.parent / "batch-summary.json").exists()
    code, out, err = batch(str(manifest), "--citations", "[unclosed(")
    assert code == 2 and "Traceback" not in out + err
