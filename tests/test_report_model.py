"""The report's typed contract (issue 40): `schemas/report.schema.json` is generated from
`report_model` (stale → this test fails; `python -m veritrail.report_model` writes it), every
report the product writes validates against the models and the schema, and the HTML viewer's
script reads only fields the schema has."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner

from clikit import oracle_args
from veritrail.cli.main import cli
from veritrail.records import Verdict
from veritrail.report_model import (
    SCHEMA_FILE,
    ReportContractError,
    ReportDoc,
    parse_report,
    report_schema,
    schema_text,
)

ROOT = Path(__file__).resolve().parents[1]


def test_the_schema_file_is_generated_from_the_models() -> None:
    assert SCHEMA_FILE.read_text(encoding="utf-8") == schema_text(), (
        "schemas/report.schema.json is stale: run `python -m veritrail.report_model`"
    )


def test_verdict_names_come_from_the_one_enum() -> None:
    defs = report_schema()["$defs"]
    assert defs["Verdict"]["enum"] == [v.value for v in Verdict]


@pytest.fixture(scope="module")
def oracle_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    t = tmp_path_factory.mktemp("oracle")
    res = CliRunner().invoke(cli, oracle_args(t, "--max-unsupported", "0.5"))
    assert res.exit_code == 0, res.output
    doc: dict[str, Any] = json.loads((t / "report.json").read_text(encoding="utf-8"))
    return doc


def test_a_written_report_follows_the_contract(oracle_report: dict[str, Any]) -> None:
    jsonschema.validate(oracle_report, report_schema())
    typed = parse_report(oracle_report)
    assert isinstance(typed, ReportDoc)
    assert typed.run.max_unsupported == 0.5
    assert [c.id for c in typed.claims] == [c["id"] for c in oracle_report["claims"]]
    assert {c.verdict for c in typed.claims} <= set(Verdict)


def test_a_broken_report_is_named_by_its_field(oracle_report: dict[str, Any]) -> None:
    bad = json.loads(json.dumps(oracle_report))
    bad["claims"][0]["verdict"] = "Mostly Supported"
    with pytest.raises(ReportContractError, match=r"claims\.0\.verdict"):
        parse_report(bad)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, report_schema())


def _schema_fields(schema: dict[str, Any]) -> set[str]:
    names: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.get("properties", {}).items():
                names.add(key)
                walk(value)
            for value in node.values():
                if isinstance(value, (dict, list)):
                    walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    return names


# Installed before the page's own script: every report object the viewer parses is wrapped in
# a Proxy that records which field it reads (with the path it was read at).
RECORDER = r"""
<script>
(function () {
  var reads = window.__vtReads = [];
  var parse = JSON.parse;
  var skip = {constructor: 1, toJSON: 1, hasOwnProperty: 1, toString: 1, valueOf: 1, then: 1};
  function wrap(v, path) {
    if (v === null || typeof v !== 'object') return v;
    return new Proxy(v, {
      get: function (t, k, r) {
        var got = Reflect.get(t, k, r);
        if (typeof k !== 'string' || skip[k]) return got;
        if (Array.isArray(t)) return /^\d+$/.test(k) ? wrap(got, path + '[]') : got;
        if (Object.prototype.hasOwnProperty.call(t, k) || got === undefined) reads.push(path + '.' + k);
        return wrap(got, path + '.' + k);
      }
    });
  }
  JSON.parse = function (text, reviver) {
    var v = parse(text, reviver);
    JSON.parse = parse;  // only the report (the first parse) is recorded
    return wrap(v, '');
  };
})();
</script>
"""

DUMP = r"""
<script>
setTimeout(function () {
  var pre = document.createElement('pre');
  pre.id = 'vt-reads';
  pre.textContent = JSON.stringify(window.__vtReads || null);
  document.body.append(pre);
}, 120);
</script>
"""

# Fields whose values are maps with data for keys (verdict names, stages, step names, settings).
_MAPS = {
    "config",
    "nodes_per_stage",
    "verdicts",
    "terminations",
    "error_stages",
    "per_step",
    "extraction_cost",
}
# Documents of other formats a report may carry (G2LDetect's report, SIRG's detection).
_EXTRAS = {"g2l", "sirg"}


@pytest.mark.browser
def test_the_viewer_reads_only_fields_the_schema_has(tmp_path: Path) -> None:
    import html
    import subprocess

    from test_html_report import CHROMIUM, HARNESS, chromium_args, sample_report
    from veritrail.html import render_html

    if CHROMIUM is None:
        pytest.fail("chromium not installed (scripts/test.sh installs it)")
    page = render_html(sample_report())
    page = page.replace("<head>", "<head>" + RECORDER, 1).replace(
        "</body>", HARNESS + DUMP + "</body>", 1
    )
    f = tmp_path / "recorded.html"
    f.write_text(page, encoding="utf-8")
    proc = subprocess.run(
        [*chromium_args(tmp_path), "--virtual-time-budget=4000", "--dump-dom", f.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    m = re.search(r'<pre id="vt-reads">(.*?)</pre>', proc.stdout, re.S)
    assert m, f"no reads in the DOM; chromium stderr:\n{proc.stderr[-2000:]}"
    reads = json.loads(html.unescape(m.group(1)))
    assert reads, "the recorder saw no read: it did not wrap the report"
    fields = _schema_fields(report_schema())
    unknown = set()
    for path in reads:
        parts = [p.removesuffix("[]") for p in path.strip(".").split(".")]
        if (parts[0] in _EXTRAS and len(parts) > 1) or parts[-1].startswith("_"):
            continue  # another format's document, or the script's own cache on an object
        if len(parts) > 1 and parts[-2] in _MAPS:
            continue  # a key of a map: data, not a field
        if parts[-1] not in fields:
            unknown.add(path)
    assert not unknown, f"report.js reads fields the schema does not have: {sorted(unknown)}"
