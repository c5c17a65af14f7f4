"""Every reader of reports reads the typed model (issue 40, item 2): the report is validated
once at the reader's boundary (`report.as_report`, `report.as_claim`), an older version migrated
there (`report.migrate`), and attributes are read after, never a report dict by a string key.

The scan below parses each consumer module and fails on a subscript or a `.get`/`.pop` whose
key is a field name of the report (any object of `report_model.ReportDoc`); the few reads of
other documents that share those names (the diff document, the index's table rows, the watch's
checkpoint, the batch summary) are listed with the document they read, by module, function
and receiver, so a new read of a report anywhere else fails.
"""

from __future__ import annotations

import ast
import copy
import json
import typing
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from pydantic import BaseModel

import reportkit
from clikit import oracle_args
from veritrail import report_model
from veritrail.cigate import report_findings, report_input
from veritrail.cli.main import cli
from veritrail.outcome import ExitCode, exit_code, gate_failures
from veritrail.records import Verdict
from veritrail.report import (
    MODEL_LABELS,
    ReportFormatError,
    as_claim,
    as_report,
    load_report_doc,
    report_model_kind,
)
from veritrail.report_model import ReportContractError, ReportDoc
from veritrail.results import load_report
from veritrail.run.summary import outcome_lines, summary_tables
from veritrail.runs.diff import side_from_report

PKG = Path(__file__).resolve().parents[1] / "src" / "veritrail"

CONSUMERS = (
    "results.py",
    "outcome.py",
    "runs/rows.py",
    "runs/files.py",
    "runs/keys.py",
    "runs/diff.py",
    "runs/diffhtml.py",
    "runs/diffstats.py",
    "runs/difftable.py",
    "runs/reviewing.py",
    "runs/reviews.py",
    "cigate/__init__.py",
    "cigate/findings.py",
    "cigate/github.py",
    "cigate/junit.py",
    "cigate/sarif.py",
    "adapters/phoenix/marks.py",
    "adapters/phoenix/watch.py",
    "batch/summary.py",
    "run/summary.py",
)
"""The readers of reports issue 40 names (results, the runs index, diff, reviews, the CI
outputs, the Phoenix marks and watch, the batch summary, the run's summary)."""

OTHER_DOCUMENTS: dict[tuple[str, str, str], str] = {
    ("runs/rows.py", "run_row", "m"): "a row of the index's runs table",
    ("runs/rows.py", "claim_row", "m"): "a row of the index's claims table",
    ("runs/diffhtml.py", "verdict_badge", "claim"): "a claim of the diff document",
    ("runs/diffhtml.py", "_entered", "claim"): "a claim of the diff document",
    ("runs/diffhtml.py", "_ids", "a or {}"): "a claim of the diff document",
    ("runs/diffhtml.py", "_ids", "b or {}"): "a claim of the diff document",
    ("runs/diffhtml.py", "_claim_text", "c"): "a claim of the diff document",
    ("runs/diffhtml.py", "_summary", "d"): "a side of the diff document",
    ("runs/diffhtml.py", "render_diff_html", "a"): "a side of the diff document",
    ("runs/diffhtml.py", "render_diff_html", "b"): "a side of the diff document",
    ("cigate/findings.py", "diff_input", "a"): "a claim of the diff document",
    ("cigate/findings.py", "diff_input", "b"): "a claim of the diff document",
    ("cigate/findings.py", "diff_input", "claim"): "a claim of the diff document",
    ("cigate/findings.py", "diff_input", "b_side"): "a side of the diff document",
    ("cigate/findings.py", "diff_input", "doc.get('a', {})"): "a side of the diff document",
    ("runs/diffhtml.py", "_citation", "claim or {}"): "a claim of the diff document",
    ("runs/diffhtml.py", "_citation", "ct"): "a claim's citation in the diff document",
    ("runs/diffhtml.py", "_cites", "claim or {}"): "a claim of the diff document",
    ("runs/diffhtml.py", "_cites", "ct"): "a claim's citation in the diff document",
    ("cigate/findings.py", "_kind_of", "claim"): "a claim of the diff document",
    ("cigate/findings.py", "_kind_of", "ct"): "a claim's citation in the diff document",
    ("cigate/findings.py", "diff_input", "ct"): "a claim's citation in the diff document",
    ("adapters/phoenix/watch.py", "finish", "entry"): "an entry of the watch's checkpoint",
    ("adapters/phoenix/watch.py", "matches", "trace"): "a Phoenix trace (include_spans form)",
    ("adapters/phoenix/watch.py", "poll", "t"): "a Phoenix trace (include_spans form)",
    ("batch/summary.py", "summary_document", "j"): "a job of the batch summary",
    ("batch/summary.py", "write_index", "j"): "a job of the batch summary",
    ("batch/summary.py", "write_index", "t"): "the batch summary's totals",
    ("batch/summary.py", "write_index", "doc"): "the batch summary",
    ("batch/summary.py", "summary_table", "j"): "a job of the batch summary",
    ("batch/summary.py", "summary_table", "t"): "the batch summary's totals",
}
"""(module, function, receiver) -> the document it reads, which is not a report. The diff
document is read by key in `cigate` too: `cigate` sits below `runs` and cannot import a model
of it."""


def _models(annotation: Any) -> typing.Iterator[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
    for arg in typing.get_args(annotation):
        yield from _models(arg)


def report_field_names() -> set[str]:
    """Every field name of the report's models (`ReportDoc` and the objects it holds)."""
    names: set[str] = set()
    todo: list[type[BaseModel]] = [ReportDoc]
    seen: set[type[BaseModel]] = set()
    while todo:
        model = todo.pop()
        if model in seen:
            continue
        seen.add(model)
        for name, info in model.model_fields.items():
            names.add(name)
            todo.extend(_models(info.annotation))
    return names


FIELDS = report_field_names()


def keyed_reads(source: str) -> list[tuple[str, str, str, int]]:
    """(function, receiver, key, line) of each read by a report field name in `source`: a
    subscript that loads, or a `.get`/`.pop`/`.setdefault` called with the name."""
    tree = ast.parse(source)
    owner: dict[int, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for sub in ast.walk(node):
                owner[id(sub)] = node.name  # the innermost function wins (walked last)
    out = []
    for node in ast.walk(tree):
        key: object = None
        receiver: ast.expr | None = None
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            if isinstance(node.slice, ast.Constant):
                key, receiver = node.slice.value, node.value
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("get", "pop", "setdefault")
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            key, receiver = node.args[0].value, node.func.value
        if isinstance(key, str) and key in FIELDS and receiver is not None:
            out.append((owner.get(id(node), "<module>"), ast.unparse(receiver), key, node.lineno))
    return out


def test_the_field_names_are_the_reports() -> None:
    assert {"claims", "verdict", "summary", "verdicts", "iterations", "run_dir"} <= FIELDS
    assert "changes" not in FIELDS  # a diff document's, not a report's


def test_the_scan_finds_string_key_reads_of_a_report() -> None:
    source = (
        "def f(report, c):\n"
        "    n = report['summary']['claims']\n"
        "    v = c.get('verdict')\n"
        "    report['claims'] = []\n"  # a store is a writer's business, not a read
        "    return report.get('not_a_field'), n, v\n"
    )
    got = {(fn, recv, key) for fn, recv, key, _ in keyed_reads(source)}
    assert got == {
        ("f", "report['summary']", "claims"),
        ("f", "report", "summary"),
        ("f", "c", "verdict"),
    }


@pytest.mark.parametrize("module", CONSUMERS)
def test_no_reader_indexes_a_report_by_key(module: str) -> None:
    reads = keyed_reads((PKG / module).read_text(encoding="utf-8"))
    bad = [
        f"{module}:{line} {fn}: {recv}[{key!r}]"
        for fn, recv, key, line in reads
        if (module, fn, recv) not in OTHER_DOCUMENTS
    ]
    assert not bad, (
        "a report read by string key (validate once with report.as_report / as_claim and read "
        "the typed model's attributes; a read of another document goes in OTHER_DOCUMENTS):\n"
        + "\n".join(bad)
    )


def test_every_listed_other_document_is_still_read() -> None:
    found = {
        (module, fn, recv)
        for module in CONSUMERS
        for fn, recv, _, _ in keyed_reads((PKG / module).read_text(encoding="utf-8"))
    }
    stale = sorted(set(OTHER_DOCUMENTS) - found)
    assert not stale, f"OTHER_DOCUMENTS lists reads that are gone: {stale}"


# -- the boundary: validated once, older versions migrated in one place ---------------------------


@pytest.fixture(scope="module")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    t = tmp_path_factory.mktemp("oracle")
    res = CliRunner().invoke(cli, oracle_args(t, "--max-unsupported", "0.1"))
    assert res.exit_code == 1, res.output
    path = t / "report.json"
    return path, json.loads(path.read_text(encoding="utf-8"))


def _as_version_1(doc: dict[str, Any]) -> dict[str, Any]:
    """The report as version 1 wrote it: no model kind or label, no review."""
    old = copy.deepcopy(doc)
    old["version"] = 1
    del old["model_kind"], old["model_label"]
    for c in old["claims"]:
        c.pop("review", None)
    return old


def test_a_typed_report_is_not_validated_again(oracle: tuple[Path, dict[str, Any]]) -> None:
    _, doc = oracle
    typed = as_report(doc)
    assert as_report(typed) is typed
    assert as_claim(typed.claims[0]) is typed.claims[0]


def test_an_older_version_is_migrated_in_one_place(oracle: tuple[Path, dict[str, Any]]) -> None:
    _, doc = oracle
    old = as_report(_as_version_1(doc))
    assert old.version == 1  # what the file says
    assert old.model_kind is report_model.ModelKind.ORACLE
    assert old.model_label == MODEL_LABELS["oracle"]
    assert report_model_kind(old) == report_model_kind(doc)
    assert all(c.review is None for c in old.claims)


@pytest.mark.parametrize("version", [1, 2, 3])
def test_every_reader_accepts_every_readable_version(
    oracle: tuple[Path, dict[str, Any]], tmp_path: Path, version: int
) -> None:
    _, doc = oracle
    old = _as_version_1(doc) if version == 1 else {**copy.deepcopy(doc), "version": version}
    path = tmp_path / "report.json"
    path.write_text(json.dumps(old), encoding="utf-8")
    loaded = load_report(path)
    assert loaded.exit_code == ExitCode.GATE  # the gate the run recorded (0.1; one claim of 4)
    assert loaded.doc.model_kind is report_model.ModelKind.ORACLE
    assert [f.kind.value for f in report_findings(old)] == [
        f.kind.value for f in report_findings(doc)
    ]
    side = side_from_report(old, label="A")
    assert [c.verdict for c in side.claims] == [c["verdict"] for c in doc["claims"]]
    assert outcome_lines(old, max_unsupported=0.1) == outcome_lines(doc, max_unsupported=0.1)


def test_a_dict_and_the_typed_model_read_alike(oracle: tuple[Path, dict[str, Any]]) -> None:
    _, doc = oracle
    typed = as_report(doc)
    assert exit_code(doc, 0.1) is exit_code(typed, 0.1) is ExitCode.GATE
    assert gate_failures(doc, 0.1) == gate_failures(typed, 0.1)
    assert report_input(doc) == report_input(typed)
    assert outcome_lines(doc, max_unsupported=0.1) == outcome_lines(typed, max_unsupported=0.1)
    from rich.console import Console

    def shown(report: Any) -> str:
        console = Console(file=__import__("io").StringIO(), width=120)
        console.print(summary_tables(report))
        return str(console.file.getvalue())

    assert shown(doc) == shown(typed)


def test_verdict_names_come_from_the_enum(oracle: tuple[Path, dict[str, Any]]) -> None:
    _, doc = oracle
    typed = as_report(doc)
    assert all(isinstance(c.verdict, Verdict) for c in typed.claims)
    assert typed.summary.count(Verdict.NOT_FULLY_SUPPORTED) == sum(
        c.unsupported for c in typed.claims
    )


def test_a_report_that_breaks_the_contract_is_named_by_its_field(
    oracle: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    _, doc = oracle
    bad = copy.deepcopy(doc)
    bad["claims"][1]["termination"] = "gave_up"
    with pytest.raises(ReportContractError, match=r"claims\.1\.termination"):
        as_report(bad)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad), encoding="utf-8")
    with pytest.raises(ReportFormatError, match=r"bad\.json: report field claims\.1\.termination"):
        load_report_doc(path)
    with pytest.raises(ReportFormatError, match=r"claims\.1\.termination"):
        load_report(path)
    res = CliRunner().invoke(cli, ["diff", str(path), str(path)])
    assert res.exit_code == 2 and "claims.1.termination" in res.output, res.output
    assert "Traceback" not in res.output


def test_reportkit_builds_valid_reports() -> None:
    doc = reportkit.report([{"id": "c1", "verdict": "Not Fully Supported"}])
    typed = as_report(doc)
    assert typed.summary.count(Verdict.NOT_FULLY_SUPPORTED) == 1
    assert exit_code(typed, 0.5) is ExitCode.GATE


def test_the_one_pass_read_and_the_strict_read_agree(
    oracle: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    path, doc = oracle
    assert load_report_doc(path) == as_report(doc)
    old = tmp_path / "v1.json"
    old.write_text(json.dumps(_as_version_1(doc)), encoding="utf-8")
    assert load_report_doc(old) == as_report(_as_version_1(doc))
    # What pydantic's JSON parser would take and JSON does not is refused as every file is.
    text = path.read_text(encoding="utf-8")
    for name, bad, message in (
        ("nan.json", text.replace('"score": null', '"score": NaN', 1), "NaN"),
        ("surrogate.json", text.replace('"c1"', '"\\ud800"', 1), "surrogate"),
        ("v9.json", text.replace('"version": 4', '"version": 9', 1), "report version 9"),
    ):
        assert bad != text, name
        (tmp_path / name).write_text(bad, encoding="utf-8")
        with pytest.raises(ReportFormatError, match=message):
            load_report_doc(tmp_path / name)


def test_a_diff_sees_a_run_directorys_reviews() -> None:
    from veritrail.runs.reviews import ClaimReview, Review, reviewed_doc

    doc = as_report(reportkit.report([{"id": "c1", "verdict": "Not Fully Supported"}]))
    latest = Review(
        "c1", Verdict.FULLY_SUPPORTED, "the source says so", "ann", "2026-01-01T00:00:00Z"
    )
    review = ClaimReview(latest, count=2)
    seen = reviewed_doc(doc, {"c1": review})
    assert seen.claims[0].review is not None
    assert seen.claims[0].review.verdict is Verdict.FULLY_SUPPORTED
    assert seen.claims[0].verdict is Verdict.NOT_FULLY_SUPPORTED  # the model's stays
    assert reviewed_doc(seen, {}).claims[0].review is None  # a stale review is dropped
