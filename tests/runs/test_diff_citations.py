"""`veritrail diff` with citation statuses (diff format 3), through the CLI.

Two `check --citations auto` runs of examples/citations with its oracle: in A the answer cites
`[1]` (museum.txt, which holds the founder) for c2, in B it cites `[2]` (collection.txt) as the
example does, so c2 goes from supported_by_cited to misattributed: one citation change and one
newly miscited claim. c5 is cited_not_supporting in both runs: not newly miscited, not changed.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner

from veritrail.cli.main import cli
from veritrail.runs.diff import DIFF_VERSION

ROOT = Path(__file__).resolve().parents[2]
EX = Path("examples") / "citations"
"""Relative: the oracle names the sources' nodes by the paths the docs' command gives."""


def _check(answer: Path, run_dir: Path, *citations: str) -> None:
    args = [
        "check", str(answer), str(EX / "sources" / "museum.txt"),
        str(EX / "sources" / "collection.txt"), "--claims", str(EX / "claims.json"),
        "--oracle", str(EX / "oracle.json"), *citations, "--run-dir", str(run_dir), "--quiet",
    ]  # fmt: skip
    res = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert res.exit_code == 0, res.output


@pytest.fixture
def runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("VERITRAIL_RUNS_DIR", str(tmp_path / "runs"))
    text = (EX / "answer.md").read_text(encoding="utf-8")
    assert "captain [2]" in text
    fixed = tmp_path / "answer.md"
    fixed.write_text(text.replace("captain [2]", "captain [1]"), encoding="utf-8")
    _check(fixed, tmp_path / "a", "--citations", "auto")
    _check(EX / "answer.md", tmp_path / "b", "--citations", "auto")
    _check(EX / "answer.md", tmp_path / "plain")  # no --citations: no status at all
    return {"a": tmp_path / "a", "b": tmp_path / "b", "plain": tmp_path / "plain", "t": tmp_path}


def _diff(a: Path, b: Path, t: Path, *extra: str) -> tuple[int, str, dict[str, Any]]:
    out = t / f"diff-{a.name}-{b.name}.json"
    args = ["diff", str(a), str(b), "--json", str(out), "--rows", "0", *extra]
    res = CliRunner().invoke(cli, args, catch_exceptions=False, terminal_width=200)
    return res.exit_code, res.output, json.loads(out.read_text(encoding="utf-8"))


def _schema() -> dict[str, Any]:
    text = (resources.files("veritrail") / "schemas" / "diff.schema.json").read_text()
    return json.loads(text)  # type: ignore[no-any-return]


def test_a_claim_that_became_miscited(runs: dict[str, Path]) -> None:
    t = runs["t"]
    code, out, doc = _diff(
        runs["a"], runs["b"], t, "--markdown", str(t / "d.md"), "--html", str(t / "d.html")
    )
    assert code == 0, out
    jsonschema.validate(doc, _schema())
    assert doc["version"] == DIFF_VERSION == 3
    assert doc["counts"]["citation_changed"] == 1 and doc["counts"]["newly_miscited"] == 1
    changed = [ch for ch in doc["changes"] if ch["citation_changed"]]
    assert [ch["b"]["id"] for ch in changed] == ["c2"]
    ch = changed[0]
    assert ch["newly_miscited"] and not ch["flipped"]
    assert ch["a"]["citation"]["kind"] == "supported_by_cited"
    assert ch["a"]["citation"]["cited_nodes"] == [f"{EX}/sources/museum.txt#1"]
    assert ch["b"]["citation"] == {
        "kind": "misattributed",
        "cited_nodes": [f"{EX}/sources/collection.txt#1"],
        "supporting_nodes": [f"{EX}/sources/museum.txt#1"],
    }
    # c5 is miscited in both runs: neither changed nor newly miscited.
    assert all(c["b"]["id"] != "c5" for c in doc["changes"] if c["b"])
    # The terminal table, the pull-request comment (the job summary) and the page show it.
    assert "Citation changed" in out and "1 newly miscited" in out
    assert "supported_by_cited" in out and "misattributed" in out
    md = (t / "d.md").read_text(encoding="utf-8")
    assert "#### Citation changed (1)" in md and "newly miscited 1." in md
    assert "**misattributed**" in md and "supported\\_by\\_cited" in md
    page = (t / "d.html").read_text(encoding="utf-8")
    assert 'id="vt-citations"' in page and "newly miscited" in page


def test_diff_ci_outputs_warn_of_the_newly_miscited_claim(runs: dict[str, Path]) -> None:
    t = runs["t"]
    code, out, _ = _diff(runs["a"], runs["b"], t, "--sarif", str(t / "d.sarif"))
    assert code == 0, out
    sarif = json.loads((t / "d.sarif").read_text(encoding="utf-8"))
    miscited = [r for r in sarif["runs"][0]["results"] if r["ruleId"] == "miscited"]
    assert [r["properties"]["claimId"] for r in miscited] == ["c2"]
    assert miscited[0]["level"] == "warning"  # the diff's gate is --max-new-unsupported
    assert miscited[0]["properties"]["citation"] == "misattributed"


def test_a_side_without_citations_changes_nothing(runs: dict[str, Path]) -> None:
    code, out, doc = _diff(runs["plain"], runs["b"], runs["t"])
    assert code == 0, out
    jsonschema.validate(doc, _schema())
    assert doc["counts"]["citation_changed"] == 0 and doc["counts"]["newly_miscited"] == 0
    assert doc["changes"] == [] and "Citation changed" not in out
    _, _, back = _diff(runs["b"], runs["plain"], runs["t"])
    assert back["counts"]["newly_miscited"] == 0 and back["changes"] == []
