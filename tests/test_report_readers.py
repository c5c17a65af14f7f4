"""Every reader of reports reads the typed model (issue 40, item 2): the report is validated
once at the reader's boundary (`report.as_report`, `report.as_claim`, `report.load_report_doc`),
an older version migrated there (`report.migrate`), and attributes are read after, never a
report dict by a string key.

The scan below parses every module of the package (src/veritrail) and fails on a subscript or a
`.get`/`.pop`/`.setdefault` whose key is a field name of the report (any object of
`report_model.ReportDoc`), so a new keyed read of a report anywhere fails. The exceptions are
explicit, each with what it reads:

* `OTHER_DOCUMENTS`: reads of other documents that share those names (a DAG's records, a
  claims file, a model's reply, the diff document, the index's rows, run.json, a trace, ...),
  by module, function and receiver;
* `BOUNDARY`: the functions that build the report document or are its boundary
  (`report_model.py`, the contract, whose validators may read the raw document; `report.py`
  builds, checks and migrates it; `citations.attach_citations` adds to it before it is
  written), by module and function.

A subscript that only leads to a store (``report["run"]["run_dir"] = None``) is a write: a
writer's business, not a read. `CONSUMERS` names the modules that read reports (through the
boundary's functions); a module that starts reading them through those functions must be listed
(`test_every_reader_of_reports_is_a_consumer`).
"""

from __future__ import annotations

import ast
import copy
import functools
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
    REPORT_VERSION,
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

MODULES = tuple(sorted(p.relative_to(PKG).as_posix() for p in PKG.rglob("*.py")))
"""Every module of the package: the scan's scope."""

CONSUMERS = (
    "results.py",
    "outcome.py",
    "citations.py",
    "runs/rows.py",
    "runs/files.py",
    "runs/keys.py",
    "runs/diff.py",
    "runs/diffhtml.py",
    "runs/diffstats.py",
    "runs/difftable.py",
    "runs/reviewing.py",
    "runs/reviews.py",
    "runs/view/app.py",
    "runs/view/pages.py",
    "cigate/__init__.py",
    "cigate/findings.py",
    "cigate/github.py",
    "cigate/junit.py",
    "cigate/sarif.py",
    "adapters/phoenix/marks.py",
    "adapters/phoenix/watch.py",
    "batch/jobs.py",
    "batch/summary.py",
    "run/ending.py",
    "run/execute.py",
    "run/outputs.py",
    "run/summary.py",
    "eval/injected.py",
    "html/__init__.py",
    "cli/batch.py",
    "cli/common.py",
    "cli/detect.py",
    "cli/diff.py",
    "cli/report.py",
    "cli/verify.py",
)
"""The modules that read reports: the readers issue 40 names (results, the runs index, diff,
reviews, the CI outputs, the Phoenix marks and watch, the batch summary, the run's summary), the
run's ending and outputs, the injection benchmark's citation scoring, the HTML report, the web
view and the commands that print or emit a report. The scan covers every module (`MODULES`); this list says which read reports."""

READING_FUNCTIONS = frozenset(
    {
        "as_report",
        "as_claim",
        "as_dag",
        "load_report_doc",
        "read_report",
        "load_report",
        "report_with_reviews",
        "doc_with_reviews",
        "side_from_report",
        "load_side",
    }
)
"""The boundary's functions a reader of reports gets a report through."""


def _reads(module: str, document: str, *where: tuple[str, str]) -> dict[tuple[str, str, str], str]:
    """`OTHER_DOCUMENTS` entries: `module`'s (function, receiver) pairs that read `document`."""
    return {(module, fn, receiver): document for fn, receiver in where}


DIFF_CLAIM = "a claim of the diff document"
DIFF_SIDE = "a side of the diff document"
DIFF_CITATION = "a claim's citation in the diff document"
DAG_RECORDS = "a DAG's node records (id, text, sources, stage)"
DATASET = "a benchmark data set's rows"

OTHER_DOCUMENTS: dict[tuple[str, str, str], str] = {
    # -- the diff document (`runs.diff.diff_document`) and its renderers. `cigate` sits below
    # `runs` and cannot import a model of it.
    **_reads(
        "runs/diffhtml.py",
        DIFF_CLAIM,
        ("verdict_badge", "claim"),
        ("_entered", "claim"),
        ("_ids", "a or {}"),
        ("_ids", "b or {}"),
        ("_claim_text", "c"),
        ("_citation", "claim or {}"),
        ("_cites", "claim or {}"),
    ),
    **_reads("runs/diffhtml.py", DIFF_CITATION, ("_citation", "ct"), ("_cites", "ct")),
    **_reads(
        "runs/diffhtml.py",
        DIFF_SIDE,
        ("_summary", "d"),
        ("render_diff_html", "a"),
        ("render_diff_html", "b"),
    ),
    **_reads(
        "runs/diffmd.py",
        DIFF_CLAIM,
        ("_verdict", "claim"),
        ("_entered", "claim"),
        ("_ids", "a"),
        ("_ids", "b"),
        ("_ids", "c"),
        ("_text", "c"),
        ("_citation", "claim or {}"),
        ("_cites", "claim or {}"),
    ),
    **_reads("runs/diffmd.py", DIFF_CITATION, ("_citation", "ct"), ("_cites", "ct")),
    **_reads("runs/diffmd.py", DIFF_SIDE, ("_runs_table", "side")),
    **_reads(
        "cigate/findings.py",
        DIFF_CLAIM,
        ("diff_input", "a"),
        ("diff_input", "b"),
        ("diff_input", "claim"),
        ("_kind_of", "claim"),
    ),
    **_reads("cigate/findings.py", DIFF_CITATION, ("_kind_of", "ct"), ("diff_input", "ct")),
    **_reads(
        "cigate/findings.py",
        DIFF_SIDE,
        ("diff_input", "b_side"),
        ("diff_input", "doc.get('a', {})"),
    ),
    # -- the runs index's table rows, the batch summary, the watch's checkpoint, run.json
    **_reads("runs/rows.py", "a row of the index's runs table", ("run_row", "m")),
    **_reads("runs/rows.py", "a row of the index's claims table", ("claim_row", "m")),
    **_reads(
        "batch/summary.py",
        "the batch summary (its jobs and totals)",
        ("summary_document", "j"),
        ("write_index", "j"),
        ("write_index", "t"),
        ("write_index", "doc"),
        ("summary_table", "j"),
        ("summary_table", "t"),
    ),
    **_reads("cli/batch.py", "the batch summary", ("batch", "result.summary")),
    **_reads(
        "adapters/phoenix/watch.py", "an entry of the watch's checkpoint", ("finish", "entry")
    ),
    **_reads("adapters/phoenix/checkpoint.py", "the watch's checkpoint file", ("open", "doc")),
    **_reads(
        "run/store.py",
        "the run store's run.json",
        ("open", "doc"),
        ("from_json", "doc"),
        ("from_json", "doc['inputs']"),
        ("from_json", "doc['inputs']['dag']"),
        ("from_json", "doc['inputs'].get('claims', {})"),
    ),
    **_reads("run/ending.py", "run.json's extra fields", ("run_block", "store.info.extra")),
    **_reads("run/execute.py", "the extraction's cost totals it adds up", ("_cost_dict", "out")),
    # -- DAGs, claims files, the engine's own records
    **_reads("dag_io.py", "a DAG file's JSON document", ("_open_records", "doc")),
    **_reads("dag_validate.py", DAG_RECORDS, ("check_records", "rec")),
    **_reads("api.py", "the arguments of the Python API", ("_check_arguments", "args")),
    **_reads("api.py", "a DAG given as a document", ("_dag_input", "dag")),
    **_reads("cli/dag.py", "`veritrail dag`'s statistics", ("validate", "s"), ("stats", "s")),
    **_reads("cli/dag.py", "a stage row of `veritrail dag stats`", ("stats", "row")),
    **_reads("cli/verify.py", "the command's options as click gives them", ("run_command", "o")),
    **_reads(
        "method/claims.py",
        "a claims file, or a claim as `claim_to_json` writes it",
        ("parse_claims", "doc"),
        ("parse_claims", "item"),
        ("claim_from_json", "doc"),
    ),
    **_reads("records.py", "a selection issue as `to_json` writes it", ("from_json", "d")),
    **_reads("offsets.py", "a sentence span it computed", ("claim", "s")),
    **_reads("run/sources.py", DAG_RECORDS, ("single_step_dag", "r")),
    **_reads(
        "run/guard.py",
        "the keyword arguments of the guard",
        ("guard", "kwargs"),
        ("guard_stream", "kwargs"),
        ("_check_stream_inputs", "kwargs"),
    ),
    # -- a model's replies (parsed JSON) and endpoints' answers
    **_reads("method/evidence.py", "the model's evidence-selection reply", ("_selection", "value")),
    **_reads(
        "method/extraction_batch.py",
        "the model's batched extraction reply",
        ("_entries", "value"),
        ("_entry_id", "entry"),
        ("_run_stage", "entry"),
    ),
    **_reads("method/sharing.py", "the model's shared-prompt reply", ("entries_by_claim", "value")),
    **_reads("method/verdict.py", "the model's verdict reply", ("_verdict", "value")),
    **_reads("detectors/g2l/method.py", "the model's G2L check reply", ("_read_check", "value")),
    **_reads(
        "lm/openai.py",
        "an OpenAI-compatible endpoint's error body",
        ("_error_message", "body"),
        ("_error_code", "body"),
    ),
    **_reads(
        "lm/local_server.py", "the embedded server's start-up result", ("start_server", "box")
    ),
    **_reads(
        "testing/fake_openai_server.py",
        "a chat completion request",
        ("_fault", "request"),
        ("_completion", "request"),
    ),
    **_reads(
        "cigate/comment.py",
        "GitHub's comment objects",
        ("_object", "reply.body"),
        ("upsert_comment", "ours[0]"),
        ("upsert_comment", "done"),
    ),
    **_reads("adapters/phoenix/client.py", "Phoenix's annotation answer", ("annotate_spans", "d")),
    **_reads("adapters/langfuse_scores.py", "Langfuse's score answer", ("write_scores", "body")),
    # -- traces, pipelines and their adapters
    **_reads(
        "adapters/phoenix/watch.py",
        "a Phoenix trace (include_spans form)",
        ("matches", "trace"),
        ("poll", "t"),
    ),
    **_reads(
        "adapters/conversation.py",
        DAG_RECORDS,
        ("since_last", "r"),
        ("add", "r"),
        ("conversation_dag", "r"),
    ),
    **_reads(
        "adapters/graphrag/capture.py",
        "GraphRAG's search context data",
        ("answer_text", "p"),
        ("ids", "r"),
        ("from_context_data", "data"),
    ),
    **_reads(
        "adapters/graphrag/dag.py",
        DAG_RECORDS,
        ("sinks", "r"),
        ("ancestors", "self.records[stack.pop()]"),
        ("to_dag", "r"),
        ("build_index_dag", "g.records[tid]"),
    ),
    **_reads("adapters/graphrag/index.py", "GraphRAG's index tables", ("load_index", "r")),
    **_reads("adapters/trace/build.py", DAG_RECORDS, ("_check_encodable", "r"), ("build_dag", "r")),
    **_reads(
        "adapters/trace/genai.py",
        "a GenAI span's message parts",
        ("_content_text", "b"),
        ("genai_texts", "d"),
    ),
    **_reads(
        "adapters/trace/langfuse.py",
        "a Langfuse trace and its observations",
        ("_spans_of_trace", "trace"),
        ("_spans_of_trace", "o"),
    ),
    **_reads("adapters/trace/model.py", "a LangChain serialized value", ("text_leaves", "value")),
    **_reads(
        "adapters/trace/otel.py",
        "an OTLP trace's spans and attributes",
        ("_generation_texts", "g"),
        ("_generation_texts", "c"),
        ("walk", "v"),
        ("read_otlp", "ss"),
    ),
    **_reads("adapters/trace/otel.py", "LlamaIndex's ToolOutput blocks", ("_tool_output", "b")),
    **_reads("integrations/langchain.py", "LangChain's serialized object", ("_name", "serialized")),
    **_reads(
        "integrations/langchain_guard.py",
        "a LangChain chain's input and output",
        ("_text", "p"),
        ("_split", "value"),
    ),
    **_reads("pipelines/graphrag_search.py", "GraphRAG's rated points", ("_points", "p")),
    **_reads("pipelines/recorder.py", DAG_RECORDS, ("stage_names", "r")),
    # -- detectors' own files and options
    **_reads(
        "detectors/registry.py",
        "a detector's spec",
        ("_veritrail", "spec"),
        ("_nli", "spec"),
    ),
    **_reads("detectors/sirg/detector.py", "SIRG's options", ("sirg_from_spec", "options")),
    **_reads(
        "detectors/sirg/cache.py",
        "SIRG's analysis cache",
        ("_node_from_dict", "d"),
        ("load_analysis", "meta"),
    ),
    **_reads(
        "detectors/sirg/graph.py",
        "SIRG's graph file",
        ("graph_from_dict", "d"),
        ("graph_from_dict", "n"),
        ("graph_from_dict", "e"),
    ),
    # -- evaluation data sets
    **_reads(
        "eval/datasets/fables.py",
        DATASET,
        ("fables_items", "entry"),
        ("fables_items", "c"),
        ("fables_items", "r"),
    ),
    **_reads(
        "eval/datasets/format.py",
        DAG_RECORDS,
        ("_ancestors_of_last_sink", "r"),
        ("_ancestors_of_last_sink", "by_id[nid]"),
        ("_item_from_model", "m.dag"),
    ),
    **_reads(
        "eval/datasets/injected.py",
        "the injection benchmark's manifest and claims files",
        ("_read", "doc"),
        ("injected_dataset", "doc"),
        ("_claims", "doc"),
        ("_claims", "c"),
        ("injected_dataset", "doc['clean']"),
        ("injected_dataset", "v"),
    ),
    **_reads(
        "eval/datasets/layout.py",
        DATASET,
        ("veritrail_layout_items", "row"),
        ("veritrail_layout_items", "ref"),
    ),
    **_reads(
        "eval/datasets/wice.py",
        DATASET,
        ("chunk_article", "r"),
        ("wice_items", "row"),
        ("wice_items", "row['meta']"),
        ("wice_items", "r"),
    ),
    **_reads("eval/injected.py", "an injected item's metadata", ("summarize_injected", "g.meta")),
    **_reads(
        "eval/injected.py",
        "the claims-only document it hands `attach_citations` (its claims are read typed)",
        ("citation_statuses", "checked"),
    ),
    # -- the view's requests
    **_reads(
        "runs/view/app.py",
        "a request's query parameters",
        ("runs_page", "q"),
        ("run_page", "request.query_params"),
        ("trail_page", "request.query_params"),
    ),
    **_reads("runs/view/app.py", "the review form", ("review", "form")),
    **_reads(
        "runs/view/safety.py",
        "the ASGI scope",
        ("__call__", "scope"),
        ("send_with_headers", "scope"),
    ),
}
"""(module, function, receiver) -> the document it reads, which is not a report."""

BOUNDARY: dict[tuple[str, str], str] = {
    ("report_model.py", "*"): "the contract itself: its validators read the raw document",
    ("report.py", "_step_cost"): "a run store's claim fragment (`claim_to_dict`'s inverse)",
    ("report.py", "claim_from_dict"): "a run store's claim fragment (`claim_to_dict`'s inverse)",
    ("report.py", "with_claim_reviews"): "edits the document before it is written",
    ("report.py", "report_header_problem"): "checks the header before validation",
    ("report.py", "comparable"): "drops the fields that vary between identical runs",
    ("citations.py", "attach_citations"): "adds the claims' citations before it is written",
}
"""(module, function) -> why it reads the report document by key: it builds the document or is
the boundary that checks it before `as_report` (function ``*``: every function of the module)."""


def _exempt(module: str, fn: str, receiver: str) -> bool:
    return (
        (module, fn, receiver) in OTHER_DOCUMENTS
        or (module, fn) in BOUNDARY
        or (module, "*") in BOUNDARY
    )


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


def keyed_reads(source: str | ast.Module) -> list[tuple[str, str, str, int]]:
    """(function, receiver, key, line) of each read by a report field name in `source` (text,
    or its tree): a
    subscript that loads (and does not only lead to a store), or a `.get`/`.pop`/`.setdefault`
    called with the name. The function is the innermost one the read is in."""
    tree = ast.parse(source) if isinstance(source, str) else source
    out: list[tuple[str, str, str, int]] = []
    to_store: set[int] = set()

    def check(node: ast.AST, fn: str) -> None:
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store | ast.Del):
            # `report["run"]["run_dir"] = None` loads `report["run"]` only to store into it.
            inner = node.value
            while isinstance(inner, ast.Subscript):
                to_store.add(id(inner))
                inner = inner.value
        key: object = None
        receiver: ast.expr | None = None
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            if isinstance(node.slice, ast.Constant) and id(node) not in to_store:
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
            out.append((fn, ast.unparse(receiver), key, node.lineno))

    # One pass, parents before children (a store is seen before the subscripts it leads to).
    todo: list[tuple[ast.AST, str]] = [(tree, "<module>")]
    while todo:
        node, fn = todo.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            fn = node.name
        check(node, fn)
        todo.extend((child, fn) for child in ast.iter_child_nodes(node))
    return out


@functools.cache
def module_tree(module: str) -> ast.Module:
    """A module of the package, parsed once for all the tests."""
    return ast.parse((PKG / module).read_text(encoding="utf-8"))


@functools.cache
def module_reads(module: str) -> tuple[tuple[str, str, str, int], ...]:
    """`keyed_reads` of a module of the package."""
    return tuple(keyed_reads(module_tree(module)))


def test_the_field_names_are_the_reports() -> None:
    assert {"claims", "verdict", "summary", "verdicts", "iterations", "run_dir"} <= FIELDS
    assert "changes" not in FIELDS  # a diff document's, not a report's


def test_the_scan_finds_string_key_reads_of_a_report() -> None:
    source = (
        "def f(report, c):\n"
        "    n = report['summary']['claims']\n"
        "    v = c.get('verdict')\n"
        "    report['claims'] = []\n"  # a store is a writer's business, not a read
        "    report['run']['run_dir'] = None\n"  # so is the way to one
        "    del report['dag']['path']\n"
        "    report['run']['notes'] = report['run']['notes'][:1]\n"  # the right side reads
        "    return report.get('not_a_field'), n, v\n"
    )
    got = {(fn, recv, key) for fn, recv, key, _ in keyed_reads(source)}
    assert got == {
        ("f", "report['summary']", "claims"),
        ("f", "report", "summary"),
        ("f", "c", "verdict"),
        ("f", "report['run']", "notes"),
        ("f", "report", "run"),
    }


def test_the_scan_covers_every_module_of_the_package() -> None:
    assert len(MODULES) > 100 and "report.py" in MODULES and "cli/batch.py" in MODULES
    assert set(CONSUMERS) <= set(MODULES), sorted(set(CONSUMERS) - set(MODULES))


def test_no_module_reads_a_report_by_key() -> None:
    bad = [
        f"{module}:{line} {fn}: {recv}[{key!r}]"
        for module in MODULES
        for fn, recv, key, line in module_reads(module)
        if not _exempt(module, fn, recv)
    ]
    assert not bad, (
        "a report read by string key (validate once with report.as_report / as_claim and read "
        "the typed model's attributes; a read of another document goes in OTHER_DOCUMENTS, "
        "with the document it reads):\n" + "\n".join(bad)
    )


def test_every_listed_exception_is_still_read() -> None:
    found = {(module, fn, recv) for module in MODULES for fn, recv, _, _ in module_reads(module)}
    stale = sorted(set(OTHER_DOCUMENTS) - found)
    assert not stale, f"OTHER_DOCUMENTS lists reads that are gone: {stale}"
    # A whole module (``*``) is the boundary whether or not it reads by key today.
    gone = sorted({b for b in BOUNDARY if b[1] != "*"} - {(m, fn) for m, fn, _ in found})
    assert not gone, f"BOUNDARY lists functions that read no report field: {gone}"


def _reading_imports(module: str) -> set[str]:
    """The boundary's reading functions `module` imports (`READING_FUNCTIONS`)."""
    names: set[str] = set()
    for node in ast.walk(module_tree(module)):
        if isinstance(node, ast.ImportFrom):
            names |= {a.name for a in node.names} & READING_FUNCTIONS
    return names


def test_every_reader_of_reports_is_a_consumer() -> None:
    boundary = {"report.py", "report_model.py"}
    readers = {m for m in MODULES if m not in boundary and _reading_imports(m)}
    missing = sorted(readers - set(CONSUMERS))
    assert not missing, f"modules that read reports, not in CONSUMERS: {missing}"


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
        (
            "v9.json",
            text.replace(f'"version": {REPORT_VERSION}', '"version": 9', 1),
            "report version 9",
        ),
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


def test_the_html_report_embeds_a_typed_report_as_its_document(
    oracle: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    from veritrail.html import render_html, report_json, write_html
    from veritrail.report import report_document

    _, doc = oracle
    typed = as_report(doc)

    def embedded(page: str) -> Any:
        return json.loads(page.split('id="vt-data">', 1)[1].split("</script>", 1)[0])

    assert embedded(render_html(typed)) == embedded(render_html(doc)) == doc
    # pydantic's serializer writes the document `report_document` gives, escaped as
    # `embed_json` escapes it: no text of the report can close the data element.
    hostile = copy.deepcopy(doc)
    hostile["claims"][0]["text"] = "</script><script>alert(1)</script> & \u2028"
    text = report_json(as_report(hostile))
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == report_document(as_report(hostile)) == hostile
    written = write_html(typed, tmp_path / "typed.html")
    assert embedded(written.read_text(encoding="utf-8")) == doc


def test_the_report_command_refuses_a_report_that_breaks_the_contract(
    oracle: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    _, doc = oracle
    bad = copy.deepcopy(doc)
    bad["claims"][1]["termination"] = "gave_up"
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad), encoding="utf-8")
    out = tmp_path / "bad.html"
    res = CliRunner().invoke(cli, ["report", str(path), "--html", str(out)])
    assert res.exit_code == 2, res.output
    assert "bad.json: report field claims.1.termination" in res.output
    assert "Traceback" not in res.output and not out.exists()
