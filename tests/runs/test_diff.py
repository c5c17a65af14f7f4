"""`veritrail diff`: two runs of the quick-start DAG through the CLI (the issue's done-when),
claim matching and its duplicates, reviews, the bootstrap interval, the three outputs, bad input,
and pipeline text that tries to be markup."""

from __future__ import annotations

import json
import random
import re
import statistics
from html.parser import HTMLParser
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner
from rich.console import Console

import reportkit
from veritrail.cli.main import cli, main
from veritrail.runs.diff import (
    claim_key,
    compare,
    diff_document,
    gate_failed,
    side_from_report,
)
from veritrail.runs.diffhtml import render_diff_html
from veritrail.runs.diffstats import Outcomes, binomial, share_difference
from veritrail.runs.difftable import diff_tables

EX = Path(__file__).resolve().parents[2] / "examples" / "quickstart"
NEW_SENTENCE = "Marley left Scrooge a fortune of ten thousand gold pounds."
FS, NFS, INC = "Fully Supported", "Not Fully Supported", "Inconclusive"
XSS = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'


def schema() -> dict[str, Any]:
    text = (resources.files("veritrail") / "schemas" / "diff.schema.json").read_text()
    return json.loads(text)  # type: ignore[no-any-return]


# -- two real runs of the quick-start DAG --------------------------------------------------------


def edited_quickstart(tmp: Path) -> tuple[Path, Path, Path]:
    """The quick-start DAG with one pipeline stage edited: summary-1 (stage 2) gains a sentence
    the chunks never say, and the final summary repeats it. Returns (dag, claims, oracle)."""
    dag = json.loads((EX / "dag.json").read_text())
    for node in dag["nodes"]:
        if node["id"] == "summary-1":
            node["text"] += " " + NEW_SENTENCE
        if node["id"] == "final":
            first, rest = node["text"].split(" Later, ", 1)
            node["text"] = f"{first} {NEW_SENTENCE} Later, {rest}"
    claims = json.loads((EX / "claims.json").read_text())
    for c in claims:  # the new sentence comes before the third and fourth claims' sentences
        c["sentence_indices"] = [i + 1 if i >= 2 else i for i in c["sentence_indices"]]
    claims.append({"id": "c5", "text": NEW_SENTENCE, "sentence_indices": [2]})
    oracle = json.loads((EX / "oracle.json").read_text())
    oracle["claims"].append(
        {
            "claim": NEW_SENTENCE,
            "evidence": {"summary-1": [4]},  # said by summary-1, by no chunk
            "summaries": {"summary-1": "Summary 1 says Marley left Scrooge a fortune."},
            "verdicts": [FS, NFS],
        }
    )
    paths = (tmp / "dag-b.json", tmp / "claims-b.json", tmp / "oracle-b.json")
    for p, doc in zip(paths, (dag, claims, oracle), strict=True):
        p.write_text(json.dumps(doc), encoding="utf-8")
    return paths


def verify(dag: Path, claims: Path, oracle: Path, run_dir: Path) -> None:
    res = CliRunner().invoke(
        cli,
        [
            "verify",
            str(dag),
            "--claims",
            str(claims),
            "--oracle",
            str(oracle),
            "--run-dir",
            str(run_dir),
            "--out",
            str(run_dir / "report.json"),
            "--quiet",
        ],
        catch_exceptions=False,
    )
    assert res.exit_code == 0, res.output


@pytest.fixture
def two_runs(tmp_path: Path) -> tuple[Path, Path]:
    run_a, run_b = tmp_path / "runs" / "before", tmp_path / "runs" / "after"
    verify(EX / "dag.json", EX / "claims.json", EX / "oracle.json", run_a)
    verify(*edited_quickstart(tmp_path), run_b)
    return run_a, run_b


def test_diff_names_the_new_unsupported_claim_its_stage_and_fails_the_gate(
    two_runs: tuple[Path, Path], tmp_path: Path
) -> None:
    run_a, run_b = two_runs
    out_json, out_html = tmp_path / "out" / "diff.json", tmp_path / "out" / "diff.html"
    res = CliRunner().invoke(
        cli,
        [
            "diff",
            str(run_a),
            str(run_b),
            "--max-new-unsupported",
            "0",
            "--json",
            str(out_json),
            "--html",
            str(out_html),
        ],
        catch_exceptions=False,
    )
    assert res.exit_code == 1, res.output
    flat = " ".join(res.output.split())
    assert "Newly unsupported" in flat
    assert "c5" in flat and NEW_SENTENCE in flat
    assert "stage 2 (summary-1)" in flat  # the stage and the node where it entered
    assert "gate failed: 1 newly unsupported claim(s), more than --max-new-unsupported 0" in flat

    doc = json.loads(out_json.read_text())
    jsonschema.validate(doc, schema())
    assert (doc["format"], doc["version"]) == ("veritrail-diff", 3)
    (change,) = [c for c in doc["changes"] if c["newly_unsupported"]]
    assert change["status"] == "added" and change["a"] is None
    assert change["b"]["id"] == "c5" and change["b"]["verdict"] == NFS
    assert change["b"]["error_stages"] == [2] and change["b"]["entered_at"] == ["summary-1"]
    assert doc["stages"] == {"2": 1}
    assert doc["matching"] == {
        "key": doc["matching"]["key"],
        "matched": 4,
        "added": 1,
        "removed": 0,
        "duplicate_keys": 0,
        "same_terminal": True,
    }
    assert doc["share"]["a"] == 0.25 and doc["share"]["b"] == 0.4
    assert doc["share"]["ci_low"] <= doc["share"]["difference"] <= doc["share"]["ci_high"]
    assert doc["gate"] == {"max_new_unsupported": 0, "newly_unsupported": 1, "failed": True}
    page = out_html.read_text()
    assert NEW_SENTENCE in page and "summary-1" in page and "Gate failed" in page

    # One claim allowed: the gate passes, exit 0; the console script exits the same way.
    ok = CliRunner().invoke(cli, ["diff", str(run_a), str(run_b), "--max-new-unsupported", "1"])
    assert ok.exit_code == 0, ok.output
    with pytest.raises(SystemExit) as stop:
        main(["diff", str(run_a / "report.json"), str(run_b), "--max-new-unsupported", "0", "-q"])
    assert stop.value.code == 1


def test_same_run_twice_changes_nothing(two_runs: tuple[Path, Path]) -> None:
    run_a, _ = two_runs
    res = CliRunner().invoke(cli, ["diff", str(run_a), str(run_a), "--max-new-unsupported", "0"])
    assert res.exit_code == 0, res.output
    assert "gate passed: 0 newly unsupported" in " ".join(res.output.split())


def test_a_review_counts_unless_no_reviews(two_runs: tuple[Path, Path]) -> None:
    from veritrail.runs.reviewing import add_review

    run_a, run_b = two_runs
    add_review(run_b, "c5", "Fully Supported", "the will says so", author="ana")
    args = ["diff", str(run_a), str(run_b), "--max-new-unsupported", "0"]
    reviewed = CliRunner().invoke(cli, args)
    assert reviewed.exit_code == 0, reviewed.output
    assert "(reviewed)" in reviewed.output
    model_only = CliRunner().invoke(cli, [*args, "--no-reviews"])
    assert model_only.exit_code == 1, model_only.output


# -- bad input: exit 2, one line ---------------------------------------------------------------


def test_bad_inputs_exit_2_with_one_line(two_runs: tuple[Path, Path], tmp_path: Path) -> None:
    run_a, run_b = two_runs
    (tmp_path / "unfinished").mkdir()
    (tmp_path / "notreport.json").write_text('{"hello": 1}')
    (tmp_path / "broken.json").write_text("{")
    cases = [
        ([str(tmp_path / "nope"), str(run_b)], "no such run directory or report file"),
        ([str(tmp_path / "unfinished"), str(run_b)], "no report.json in this directory"),
        ([str(tmp_path / "notreport.json"), str(run_b)], "not a VeriTrail report"),
        ([str(tmp_path / "broken.json"), str(run_b)], "broken.json"),
        ([str(run_a), str(run_b), "--json", str(run_b / "report.json")], "is an input"),
        ([str(run_a), str(run_b), "--json", "x.out", "--html", "x.out"], "both --json and --html"),
        ([str(run_a), str(run_b), "--max-new-unsupported", "-1"], "-1"),
    ]
    before = (run_b / "report.json").read_bytes()
    for args, message in cases:
        res = CliRunner().invoke(cli, ["diff", *args])
        assert res.exit_code == 2, (args, res.output)
        assert message in res.output, (args, res.output)
        assert "Traceback" not in res.output
    assert (run_b / "report.json").read_bytes() == before  # an input is never overwritten


# -- matching ----------------------------------------------------------------------------------


def claim(
    cid: str,
    text: str,
    verdict: str | None,
    *,
    evidence: tuple[tuple[str, int], ...] = (),
    prov: tuple[tuple[str, ...], ...] = (),
    stages: tuple[int, ...] = (),
    review: str | None = None,
) -> dict[str, Any]:
    """A report claim with what the diff reads (one iteration holding all its evidence)."""
    out: dict[str, Any] = {
        "id": cid,
        "text": text,
        "sentence_indices": [0],
        "verdict": verdict,
        "iterations": [
            {
                "index": 1,
                "nodes_with_evidence": sorted({n for n, _ in evidence if n.startswith("s")}),
                "evidence": [{"node_id": n, "sentence_index": i, "text": "x"} for n, i in evidence],
                "verdict": FS if stages else (verdict or NFS),
            }
        ],
        "provenance": [list(p) for p in prov],
        "error_stages": list(stages),
        "error_stage_status": "identified" if stages else "not_applicable",
    }
    if review:
        out["review"] = {"verdict": review, "reason": "r", "author": "a", "time": "t", "count": 1}
    return out


def report(claims: list[dict[str, Any]], terminal: str = "t") -> dict[str, Any]:
    nodes = [{"id": f"r{i}", "is_root": True} for i in range(5)] + [
        {"id": f"s{i}", "is_root": False} for i in range(5)
    ]
    return reportkit.report(
        claims, dag={"terminal": terminal, "max_stage": 3, "nodes_touched": nodes}
    )


def diff_of(a: list[dict[str, Any]], b: list[dict[str, Any]], **kw: Any) -> Any:
    return compare(
        side_from_report(report(a), label="A"), side_from_report(report(b), label="B"), **kw
    )


def test_claim_key_ignores_case_width_spacing_and_punctuation() -> None:
    assert claim_key("The  ﬁle was\tSigned.") == claim_key("the file was signed")
    assert claim_key("Ｍarley DIED!") == claim_key("marley died")
    assert claim_key("Marley died.") != claim_key("Marley lived.")


def test_matching_flips_added_removed_and_evidence() -> None:
    a = [
        claim("c1", "Alpha is one.", FS, evidence=(("r1", 0),)),
        claim("c2", "Beta is two.", NFS),
        claim("c3", "Gamma is three.", FS),
        claim("c4", "Gone claim.", NFS),
    ]
    b = [
        claim("d1", "ALPHA is one", FS, evidence=(("r1", 0), ("r2", 3))),
        claim("d2", "Beta is two.", FS),
        claim("d3", "Gamma  is three.", NFS, evidence=(("s1", 0),), stages=(2,)),
        claim("d4", "New claim.", INC),
    ]
    d = diff_of(a, b)
    by = {(p.a.id if p.a else None, p.b.id if p.b else None): p for p in d.pairs}
    assert set(by) == {("c1", "d1"), ("c2", "d2"), ("c3", "d3"), (None, "d4"), ("c4", None)}
    assert by["c1", "d1"].evidence_added == ["r2#3"] and not by["c1", "d1"].flipped
    assert by["c2", "d2"].resolved and by["c2", "d2"].flipped
    assert by["c3", "d3"].newly_unsupported and by["c3", "d3"].b.entered_at == ("s1",)
    assert [p.b.id for p in d.newly_unsupported] == ["d3"]
    assert (d.count("matched"), d.count("added"), d.count("removed")) == (3, 1, 1)
    assert not gate_failed(d, 1) and gate_failed(d, 0) and not gate_failed(d, None)
    doc = diff_document(d, max_new_unsupported=0)
    jsonschema.validate(doc, schema())
    assert doc["counts"] == {
        "newly_unsupported": 1,
        "resolved": 1,
        "flipped": 2,
        "evidence_changed": 2,
        "trail_moved": 0,
        "citation_changed": 0,
        "newly_miscited": 0,
    }


def test_duplicates_pair_by_sources_then_claim_id_order() -> None:
    text = "It was sold."
    a = [
        claim("c10", text, FS, prov=(("s1", "r1"),)),
        claim("c2", text, FS, prov=(("s2", "r2"),)),
        claim("c3", text, FS, prov=(("s3", "r3"),)),
    ]
    b = [
        claim("x1", text, FS, prov=(("s2", "r2"),)),  # shares c2's source
        claim("x2", text, NFS),  # no sources: the first free A claim in id order (c3)
    ]
    d = diff_of(a, b)
    pairs = {(p.a.id if p.a else None, p.b.id if p.b else None) for p in d.pairs}
    # c2 before c10 in natural id order; c2 takes x1 (same source), c3 takes x2; c10 is left.
    assert pairs == {("c2", "x1"), ("c3", "x2"), ("c10", None)}
    assert d.duplicate_keys == 1


def test_reviewed_verdict_counts_and_keeps_the_models() -> None:
    d = diff_of([claim("c1", "A claim.", FS)], [claim("c1", "A claim.", FS, review=NFS)])
    (p,) = d.newly_unsupported
    assert p.b.reviewed and p.b.model_verdict == FS and p.b.verdict == NFS
    d2 = compare(
        side_from_report(report([claim("c1", "A claim.", FS)]), label="A"),
        side_from_report(
            report([claim("c1", "A claim.", FS, review=NFS)]), label="B", use_reviews=False
        ),
    )
    assert not d2.newly_unsupported


# -- the bootstrap -------------------------------------------------------------------------------


def test_binomial_draws_have_the_binomial_mean_and_variance() -> None:
    rng = random.Random(7)
    for n, p in [(12, 0.3), (5000, 0.05), (5000, 0.98), (1, 0.5)]:
        xs = [binomial(rng, n, p) for _ in range(4000)]
        assert all(0 <= x <= n for x in xs)
        assert abs(statistics.mean(xs) - n * p) < 4 * (n * p * (1 - p) / 4000) ** 0.5 + 1e-9
        assert statistics.pvariance(xs) == pytest.approx(n * p * (1 - p), rel=0.15)


def test_interval_is_seeded_paired_and_covers_the_difference() -> None:
    # 5,000 matched claims: 300 became unsupported, 200 stopped being: +2.0 pp. Paired, the
    # interval is about +-0.9 pp (sd of a paired difference: sqrt(0.1 / 5000) = 0.45 pp).
    o = Outcomes(((4000, 300), (200, 500)), 0, 0, 0, 0)
    s = share_difference(o, resamples=2000, seed=0)
    assert s.difference == pytest.approx(0.02)
    assert s.low is not None and s.high is not None
    assert 0.005 < s.low < 0.02 < s.high < 0.035
    assert share_difference(o, resamples=2000, seed=0) == s  # seeded: the same interval
    assert share_difference(o, resamples=2000, seed=1) != s
    # Unmatched claims on their own side widen the interval, never shift the point estimate.
    o2 = Outcomes(((4000, 300), (200, 500)), 100, 50, 0, 0)
    s2 = share_difference(o2, resamples=2000, seed=0)
    assert s2.share_a == pytest.approx(750 / 5100)
    assert s2.low is not None and s2.high is not None and s2.low < s2.difference < s2.high
    empty = share_difference(Outcomes(((0, 0), (0, 0)), 0, 0, 3, 1))
    assert (empty.share_a, empty.difference, empty.low) == (None, None, None)


# -- outputs: pipeline text is text ----------------------------------------------------------------

TRICKY = XSS + " [bold red]markup[/] \u202eevil"


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs.extend(attrs)


def test_html_shows_pipeline_text_as_text() -> None:
    a = [claim("c1", TRICKY, FS)]
    b = [claim("c1" + XSS, TRICKY, NFS, evidence=((XSS, 1),), stages=(2,))]
    page = render_diff_html(diff_document(diff_of(a, b)))
    parser = _Tags()
    parser.feed(page)
    assert "script" not in parser.tags and "img" not in parser.tags
    assert not [k for k, _ in parser.attrs if k.startswith("on")]
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in page
    assert "[U+202E]evil" in page and "\u202e" not in page  # a bidi override is shown, not applied
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page)
    assert csp and "default-src 'none'" in csp.group(1) and "script-src" not in csp.group(1)


def test_terminal_tables_print_markup_as_text() -> None:
    d = diff_of([claim("c1", TRICKY, FS)], [claim("c1", TRICKY, NFS, stages=(2,))])
    console = Console(width=400, record=True, color_system=None)
    console.print(diff_tables(d, max_new_unsupported=0))
    shown = console.export_text()
    assert "[bold red]markup[/]" in shown and XSS in shown
    assert "gate failed" in shown
