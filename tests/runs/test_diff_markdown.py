"""`veritrail diff --markdown`: the pull-request comment's body (runs/diffmd.py).

The body is checked as GitHub would read it: rendered by a CommonMark parser with GFM tables
(markdown-it-py, which rich depends on), pipeline text must come out as text, never as a link,
an image, HTML or an extra table cell.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from markdown_it import MarkdownIt

import reportkit
from veritrail.cli.main import cli
from veritrail.report import indented_json
from veritrail.runs.diff import compare, diff_document, side_from_report
from veritrail.runs.diffmd import MARKER, MAX_CHARS, md_text, render_diff_markdown

FS, NFS, INC = "Fully Supported", "Not Fully Supported", "Inconclusive"
NASTY = (
    'See <img src="https://evil.test/x.png"> and [docs](https://evil.test) | cell '
    "![pic](https://evil.test/p.png) **bold** @octo-org/team #12 `code` \x1b[31m \u202e end\nnext"
)


def claim(cid: str, text: str, verdict: str, *, stage: int | None = None) -> dict[str, Any]:
    """A report claim; an unsupported one with a stage entered at node s1 (the evidence of its
    last Fully Supported iteration)."""
    if stage is None:
        return reportkit.claim(id=cid, text=text, verdict=verdict)
    return reportkit.claim(
        id=cid,
        text=text,
        verdict=verdict,
        iterations=[
            reportkit.iteration(
                index=1,
                nodes_with_evidence=["s1"],
                evidence=[{"node_id": "s1", "sentence_index": 0, "text": "x"}],
                verdict=FS,
            ),
            reportkit.iteration(index=2, verdict=NFS),
        ],
        provenance=[["t", "s1", "r1"]],
        error_stages=[stage],
        error_stage_status="identified",
    )


def report(claims: list[dict[str, Any]]) -> dict[str, Any]:
    nodes = [{"id": "r1", "is_root": True}, {"id": "s1", "is_root": False}]
    return reportkit.report(claims, dag={"terminal": "t", "max_stage": 3, "nodes_touched": nodes})


def doc_of(a: list[dict[str, Any]], b: list[dict[str, Any]], gate: int | None = 0) -> Any:
    d = compare(side_from_report(report(a), label="A"), side_from_report(report(b), label="B"))
    return diff_document(d, max_new_unsupported=gate)


class Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def rendered(body: str) -> tuple[str, list[tuple[str, dict[str, str | None]]]]:
    html = MarkdownIt("commonmark").enable("table").render(body)
    parser = Tags()
    parser.feed(html)
    return html, parser.tags


def test_the_comment_names_flips_new_unsupported_claims_their_stage_and_node_and_the_ci() -> None:
    a = [
        claim("c1", "Alpha holds.", FS),
        claim("c2", "Beta holds.", FS),
        claim("c3", "Gamma.", NFS),
    ]
    b = [
        claim("c1", "Alpha holds.", NFS, stage=2),  # newly unsupported, entered at stage 2, s1
        claim("c2", "Beta holds.", INC),  # another flip
        claim("c3", "Gamma.", NFS),
    ]
    doc = doc_of(a, b)
    body = render_diff_markdown(doc)
    lines = body.splitlines()
    assert lines[0] == MARKER
    assert (
        "**Gate failed:** 1 newly unsupported claim(s), more than `--max-new-unsupported 0`."
        in body
    )
    (row,) = [line for line in lines if line.startswith("| c1 |")]
    assert row == "| c1 | Alpha holds\\. | Fully Supported | Not Fully Supported | stage 2 (s1) |"
    assert "#### Other verdict flips (1)" in body
    assert "| c2 | Beta holds\\. | Fully Supported | Inconclusive |" in body
    s = doc["share"]
    assert s["difference"] == pytest.approx(1 / 3, abs=1e-6)
    ci = (
        f"(95% CI {100 * s['ci_low']:+.1f} pp to {100 * s['ci_high']:+.1f} pp; bootstrap, "
        "2,000 resamples, seed 0)"
    ).replace("-", "−")
    assert f"**Unsupported share B − A: +33.3 pp** {ci}." in body
    assert "| A (base) |" in body and "| 3 | 1 | 33.3% |" in body and "| 3 | 1 | 33.3% |" in body
    # Rendered, the tables are tables: the newly unsupported one has 5 columns.
    html, _ = rendered(body)
    assert html.count("<table>") == 3  # the runs, the newly unsupported, the other flips
    assert "<!-- veritrail-report -->" in html  # kept as a hidden HTML comment


def test_no_change_and_passed_gate_and_no_gate() -> None:
    same = [claim("c1", "Alpha holds.", FS)]
    body = render_diff_markdown(doc_of(same, same, gate=0))
    assert "**Gate passed:** 0 newly unsupported claim(s), at most 0." in body
    assert "No claim became unsupported and no verdict changed." in body
    assert "####" not in body
    ungated = render_diff_markdown(doc_of(same, same, gate=None))
    assert "no gate (`--max-new-unsupported`)" in ungated


def test_pipeline_text_renders_as_text() -> None:
    a = [claim("c1", NASTY, FS)]
    b = [claim("c1", NASTY, NFS, stage=1)]
    body = render_diff_markdown(doc_of(a, b))
    (row,) = [line for line in body.splitlines() if line.startswith("| c1 |")]
    html, tags = rendered(body)
    # Only the tables' own tags: no link, image or element from the claim.
    assert {t for t, _ in tags} <= {"h3", "p", "strong", "code", "table", "thead", "tbody"} | {
        "tr",
        "th",
        "td",
        "h4",
        "sub",
        "em",
    }
    assert "<img" not in html and "<a " not in html
    (table,) = re.findall(r"<table>.*?</table>", html, re.S)[1:]
    first_row = re.findall(r"<tr>.*?</tr>", table, re.S)[1]
    assert first_row.count("<td>") == 5  # the `|` in the claim made no cell
    assert "&lt;img src=&quot;https://evil.test/x.png&quot;&gt;" in html  # shown as text
    assert "[U+001B][31m" in html and "[U+202E]" in html and "\x1b" not in body
    assert "@\u2060octo-org" in html and "#\u206012" in html  # no mention, no issue link
    assert "\n" not in row  # one line: the claim's newline joined


def test_md_text_escapes_every_markdown_character_and_cuts_long_text() -> None:
    assert md_text("a*b_c[d](e)<f>|g`h~i\\j") == "a\\*b\\_c\\[d\\]\\(e\\)\\<f\\>\\|g\\`h\\~i\\\\j"
    cut = md_text("x" * 1000, 50)
    assert len(cut) == 50 and cut.endswith("…")


def test_a_long_diff_fits_one_comment() -> None:
    long = "word " * 200
    a = [claim(f"c{i}", f"{long} {i}", FS) for i in range(400)]
    b = [claim(f"c{i}", f"{long} {i}", NFS, stage=2) for i in range(400)]
    doc = doc_of(a, b)
    body = render_diff_markdown(doc)
    assert len(body) <= MAX_CHARS
    assert "#### Newly unsupported (400)" in body
    assert "_… 375 more: `veritrail diff --json` has all._" in body
    every = render_diff_markdown(doc, rows=0)
    assert len(every) <= MAX_CHARS and "cut to fit one comment" in every


def test_cli_writes_the_markdown_and_refuses_bad_outputs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "ghp_s3cretvalue0123456789"
    monkeypatch.setenv("MY_SERVICE_TOKEN", secret)
    pa, pb = tmp_path / "a.json", tmp_path / "b.json"
    pa.write_text(indented_json(report([claim("c1", f"Alpha {secret}.", FS)])))
    pb.write_text(indented_json(report([claim("c1", f"Alpha {secret}.", NFS, stage=2)])))
    out = tmp_path / "pr" / "comment.md"
    args = ["diff", str(pa), str(pb), "--markdown", str(out), "--max-new-unsupported", "0", "-q"]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 1, res.output
    assert f"Markdown diff written to {out}" in res.output
    body = out.read_text(encoding="utf-8")
    assert body.startswith(MARKER + "\n") and "stage 2 (s1)" in body
    assert secret not in body and "\\*\\*\\*" in body  # redacted, then escaped

    before = pb.read_bytes()
    for extra, message in (
        (["--markdown", str(pb)], "is an input"),
        (["--markdown", str(tmp_path / "x.md"), "--sarif", str(tmp_path / "x.md")], "two outputs"),
        (["--markdown", str(tmp_path)], "directory"),
    ):
        res = CliRunner().invoke(cli, ["diff", str(pa), str(pb), *extra])
        assert res.exit_code == 2, (extra, res.output)
        assert message in res.output and "Traceback" not in res.output

    assert pb.read_bytes() == before
