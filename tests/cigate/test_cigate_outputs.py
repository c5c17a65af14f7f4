"""The gate's CI outputs (JUnit XML, SARIF 2.1.0, GitHub annotations) through the CLI and the
library, validated against the vendored schemas (tests/fixtures/junit, tests/fixtures/sarif).

The runs are the quick start's oracle run (c3 is Not Fully Supported, entered at stage 2 from
node summary-2): no model, no network.
"""

from __future__ import annotations

import copy
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from clikit import oracle_args
from veritrail.cigate import (
    Kind,
    escape_data,
    escape_property,
    github_annotations,
    junit_xml,
    report_input,
    sarif_json,
    sarif_log,
)
from veritrail.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]
QS = ROOT / "examples" / "quickstart"
FIXTURES = ROOT / "tests" / "fixtures"
JUNIT_XSD = FIXTURES / "junit" / "junit-10.xsd"
SARIF_SCHEMA = FIXTURES / "sarif" / "sarif-schema-2.1.0.json"

NASTY = 'Scrooge ]]> </failure> <script>alert("x")</script> & &amp; \x1b[31m \x00 \x0b end'

C3_LINE = (
    "  c3: Scrooge painted over Marley's name on the warehouse door. "
    "(error stage 2, node summary-2)"
)
"""The summary's line for the quick start's unsupported claim: the stage and the blamed node."""


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def validate_junit(text: str) -> None:
    xmlschema = pytest.importorskip("xmlschema")
    xmlschema.XMLSchema(str(JUNIT_XSD)).validate(text)


def validate_sarif(doc: dict[str, Any]) -> None:
    import jsonschema

    schema = json.loads(SARIF_SCHEMA.read_text(encoding="utf-8"))
    cls = jsonschema.validators.validator_for(schema)
    # No `cls.check_schema(schema)`: the official schema's `language` pattern starts with
    # `^(?i)`, which Python's `re` refuses (a known defect of the published schema); it is
    # only used for a `language` property, which veritrail never writes.
    cls(schema, format_checker=cls.FORMAT_CHECKER).validate(doc)


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One CLI run writing every CI output; its report, files and output."""
    t = tmp_path_factory.mktemp("qs")
    res = invoke(
        *oracle_args(
            t, "--junit", str(t / "ci" / "junit.xml"), "--sarif", str(t / "ci" / "x.sarif")
        ),
        "--annotations",
        "github",
    )
    report = json.loads((t / "report.json").read_text(encoding="utf-8"))
    return {"t": t, "res": res, "report": report}


def test_cli_writes_valid_junit_one_case_per_claim(quickstart: dict[str, Any]) -> None:
    res, t = quickstart["res"], quickstart["t"]
    assert res.exit_code == 0, res.output
    text = (t / "ci" / "junit.xml").read_text(encoding="utf-8")
    validate_junit(text)
    root = ET.fromstring(text)
    cases = root.findall("./testsuite/testcase")
    assert [c.get("name", "").split(":")[0] for c in cases] == ["c1", "c2", "c3", "c4"]
    failed = [c for c in cases if c.find("failure") is not None]
    assert [c.get("name", "")[:2] for c in failed] == ["c3"]
    failure = failed[0].find("failure")
    assert failure is not None
    body = failure.text or ""
    # The reasoning, the error stage with its node, and the evidence trail are all there.
    assert "stage 2, node summary-2" in (failure.get("message") or "")
    assert "oracle verdict #2 over evidence from chunk-3" in body
    assert "evidence chunk-3#0: Scrooge never painted out Old Marley's name." in body
    assert "round 1: checked summary-1, summary-2" in body
    assert root.get("tests") == "4" and root.get("failures") == "1"


def test_cli_writes_valid_sarif_one_result_per_unsupported_claim(
    quickstart: dict[str, Any],
) -> None:
    t = quickstart["t"]
    doc = json.loads((t / "ci" / "x.sarif").read_text(encoding="utf-8"))
    validate_sarif(doc)
    (run,) = doc["runs"]
    (result,) = run["results"]
    assert result["ruleId"] == "not-fully-supported" and result["level"] == "error"
    assert result["properties"]["claimId"] == "c3"
    (loc,) = result["locations"]
    phys = loc["physicalLocation"]
    assert phys["artifactLocation"]["uri"].endswith("examples/quickstart/dag.json")
    dag_lines = (QS / "dag.json").read_text(encoding="utf-8").splitlines()
    assert '"summary-2"' in dag_lines[phys["region"]["startLine"] - 1]
    names = {(lg["name"], lg["kind"]) for lg in loc["logicalLocations"]}
    assert names == {("stage 2", "module"), ("summary-2", "element")}
    assert {r["id"] for r in run["tool"]["driver"]["rules"]} >= {result["ruleId"]}


def test_cli_prints_one_github_error_per_unsupported_claim(quickstart: dict[str, Any]) -> None:
    res = quickstart["res"]
    errors = [line for line in res.stdout.splitlines() if line.startswith("::error ")]
    nfs = [c["id"] for c in quickstart["report"]["claims"] if c["verdict"] == "Not Fully Supported"]
    assert len(errors) == len(nfs) == 1
    assert "title=Not Fully Supported%3A claim c3 (stage 2%2C node summary-2)::" in errors[0]
    assert re.search(r"file=[^,]*examples/quickstart/dag\.json,line=\d+,", errors[0])


def test_summary_names_unsupported_claims_when_the_run_passes(quickstart: dict[str, Any]) -> None:
    res = quickstart["res"]
    assert res.exit_code == 0
    assert "1 of 4 claims are Not Fully Supported:" in res.output
    assert C3_LINE in res.output


def test_quiet_names_unsupported_claims_only_when_they_fail_the_gate(tmp_path: Path) -> None:
    """`--quiet` stays silent on a passing run; a failed gate still names its claims."""
    passing = invoke(*oracle_args(tmp_path / "a", "--quiet"))
    assert passing.exit_code == 0 and passing.output == ""
    failing = invoke(*oracle_args(tmp_path / "b", "--quiet", "--max-unsupported", "0"))
    assert failing.exit_code == 1
    assert "gate failed: 1 of 4 claims (25.0%)" in failing.output
    assert C3_LINE in failing.output


def nasty_report(report: dict[str, Any]) -> dict[str, Any]:
    """The quick start's report with untrusted text that breaks naive XML and annotations."""
    rep = copy.deepcopy(report)
    c3 = next(c for c in rep["claims"] if c["id"] == "c3")
    c3["text"] = NASTY
    c3["reasoning"] = "reason\r\n::error title=forged::x %0A"
    c3["iterations"][-1]["evidence"][0]["text"] = "<b>]]>&</b>\ud800"
    err = next(c for c in rep["claims"] if c["id"] == "c1")
    err.update(verdict=None, termination="error", error="Boom <&> \x07\nTraceback line")
    inc = next(c for c in rep["claims"] if c["id"] == "c2")
    inc["verdict"] = "Inconclusive"
    return rep


def test_untrusted_text_is_escaped_in_junit(quickstart: dict[str, Any]) -> None:
    gi = report_input(nasty_report(quickstart["report"]), dag_uri="dag.json")
    text = junit_xml([gi])
    validate_junit(text)  # well-formed and valid: nothing closed an element or a CDATA
    root = ET.fromstring(text)
    case = root.findall("./testsuite/testcase")[2]
    failure = case.find("failure")
    assert failure is not None and failure.text is not None
    shown = NASTY.replace("\x1b", "[U+001B]").replace("\x00", "[U+0000]")
    shown = shown.replace("\x0b", "[U+000B]")
    assert f"claim c3: {shown}" in failure.text  # verbatim, control characters made visible
    assert "<b>]]>&</b>[U+D800]" in failure.text
    assert root.find("./testsuite/testcase/error") is not None  # c1 ended in error
    assert root.find("./testsuite/testcase/skipped") is not None  # c2 is Inconclusive
    suite = root.find("testsuite")
    assert suite is not None
    assert (suite.get("failures"), suite.get("errors"), suite.get("skipped")) == ("1", "1", "1")


def test_untrusted_text_stays_inside_one_annotation_line(quickstart: dict[str, Any]) -> None:
    gi = report_input(nasty_report(quickstart["report"]), dag_uri="a:b,c.json")
    lines = github_annotations([gi])
    assert [line.split(" ", 1)[0] for line in lines] == ["::error", "::warning", "::notice"]
    for line in lines:
        assert "\n" not in line and "\r" not in line
    err = lines[0]
    assert err.startswith("::error file=a%3Ab%2Cc.json,line=")
    props, message = err.split("::", 2)[1:]
    assert "forged" not in props  # the reasoning cannot add a property or a command
    assert "reason%0D%0A::error title=forged::x %250A" in message


def test_escaping_rules() -> None:
    assert escape_data("100% a\r\nb:c,d") == "100%25 a%0D%0Ab:c,d"
    assert escape_property("100% a\r\nb:c,d") == "100%25 a%0D%0Ab%3Ac%2Cd"


def test_sarif_of_untrusted_text_validates(quickstart: dict[str, Any]) -> None:
    gi = report_input(nasty_report(quickstart["report"]), dag_uri="my dags/dag.json")
    doc = sarif_log([gi])
    validate_sarif(doc)
    levels = [r["level"] for r in doc["runs"][0]["results"]]
    assert sorted(levels) == ["error", "note", "warning"]
    uri = doc["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert uri["uri"] == "my%20dags/dag.json"
    # JSON escapes the rest: the text written to the file reads back verbatim.
    back = json.loads(sarif_json([gi]))
    unsupported = [r for r in back["runs"][0]["results"] if r["level"] == "error"]
    assert unsupported[0]["message"]["text"].endswith(NASTY)


def test_secrets_are_redacted(quickstart: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-test-0123456789abcdefghijklmnop"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    rep = copy.deepcopy(quickstart["report"])
    rep["claims"][2]["reasoning"] = f"key {secret} and https://user:pw123456@host/x"
    gi = report_input(rep, dag_uri="dag.json")
    for text in (junit_xml([gi]), json.dumps(sarif_log([gi])), "\n".join(github_annotations([gi]))):
        assert secret not in text and "pw123456" not in text


@pytest.mark.parametrize("flag", ["--junit", "--sarif"])
def test_ci_output_that_is_an_input_is_refused_before_the_run(tmp_path: Path, flag: str) -> None:
    claims = tmp_path / "claims.json"
    claims.write_bytes((QS / "claims.json").read_bytes())
    args = oracle_args(tmp_path, flag, str(claims))
    args[args.index("--claims") + 1] = str(claims)
    res = invoke(*args)
    assert res.exit_code == 2
    assert "an input is never overwritten" in res.output
    assert claims.read_bytes() == (QS / "claims.json").read_bytes()
    assert not (tmp_path / "run").exists()


def test_ci_output_that_is_the_report_is_refused(tmp_path: Path) -> None:
    res = invoke(*oracle_args(tmp_path, "--sarif", str(tmp_path / "report.json")))
    assert res.exit_code == 2 and "are the same file" in res.output
    assert not (tmp_path / "run").exists()


def test_batch_writes_one_file_with_a_suite_per_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    lines = [
        {
            "id": f"job{k}",
            "dag": str(QS / "dag.json"),
            "claims": str(QS / "claims.json"),
            "oracle": str(QS / "oracle.json"),
            "out": f"reports/job{k}.json",
            "settings": {"q": 1 + k},
        }
        for k in range(2)
    ]
    manifest = tmp_path / "manifest.jsonl"
    manifest.write_text("".join(json.dumps(j) + "\n" for j in lines))
    res = invoke(
        "batch",
        str(manifest),
        "--quiet",
        "--junit",
        "ci/junit.xml",
        "--sarif",
        "ci/batch.sarif",
        "--annotations",
        "github",
    )
    assert res.exit_code == 0, res.output
    text = (tmp_path / "ci" / "junit.xml").read_text(encoding="utf-8")
    validate_junit(text)
    suites = ET.fromstring(text).findall("testsuite")
    assert [s.get("name") for s in suites] == ["job0", "job1"]
    doc = json.loads((tmp_path / "ci" / "batch.sarif").read_text(encoding="utf-8"))
    validate_sarif(doc)
    assert [len(r["results"]) for r in doc["runs"]] == [1, 1]
    assert sum(line.startswith("::error ") for line in res.stdout.splitlines()) == 2
    # The manifest is an input: a CI output never overwrites it.
    again = invoke("batch", str(manifest), "--junit", str(manifest))
    assert again.exit_code == 2 and manifest.read_text().startswith('{"id": "job0"')


def test_batch_names_each_jobs_unsupported_claims(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As `verify`: named at every exit status; with --quiet only for jobs whose gate failed."""
    monkeypatch.chdir(tmp_path)
    job = {"dag": str(QS / "dag.json"), "claims": str(QS / "claims.json")}
    lines = [
        {**job, "id": f"job{k}", "oracle": str(QS / "oracle.json"), "out": f"r/job{k}.json"}
        | {"run_dir": f"runs/job{k}"}
        for k in range(2)
    ]
    manifest = tmp_path / "manifest.jsonl"
    manifest.write_text("".join(json.dumps(j) + "\n" for j in lines))
    named = C3_LINE
    loud = invoke("batch", str(manifest))
    assert loud.exit_code == 0, loud.output
    for k in range(2):
        assert f"job job{k}: 1 of 4 claims are Not Fully Supported:\n{named}" in loud.stderr
    quiet = invoke("batch", str(manifest), "--quiet")
    assert quiet.exit_code == 0 and quiet.output == ""
    gated = invoke("batch", str(manifest), "--quiet", "--max-unsupported", "0")
    assert gated.exit_code == 1
    assert f"job job1: 1 of 4 claims are Not Fully Supported (its gate failed):\n{named}" in (
        gated.stderr
    )


def test_diff_reports_newly_unsupported_claims(quickstart: dict[str, Any], tmp_path: Path) -> None:
    b = quickstart["report"]
    a = copy.deepcopy(b)
    for c in a["claims"]:
        c["verdict"], c["error_stages"] = "Fully Supported", []
        c["error_stage_status"] = "not_applicable"
    a["summary"]["verdicts"] = {**a["summary"]["verdicts"], "Fully Supported": 4}
    a["summary"]["verdicts"]["Not Fully Supported"] = 0
    (tmp_path / "a.json").write_text(json.dumps(a))
    (tmp_path / "b.json").write_text(json.dumps(b))
    res = invoke(
        "diff",
        str(tmp_path / "a.json"),
        str(tmp_path / "b.json"),
        "--quiet",
        "--junit",
        str(tmp_path / "d.xml"),
        "--sarif",
        str(tmp_path / "d.sarif"),
        "--annotations",
        "github",
    )
    assert res.exit_code == 0, res.output
    errors = [line for line in res.stdout.splitlines() if line.startswith("::error ")]
    assert len(errors) == 1 and "claim c3" in errors[0]
    validate_junit((tmp_path / "d.xml").read_text(encoding="utf-8"))
    doc = json.loads((tmp_path / "d.sarif").read_text(encoding="utf-8"))
    validate_sarif(doc)
    (result,) = doc["runs"][0]["results"]
    names = {lg["name"] for lg in result["locations"][0]["logicalLocations"]}
    assert names == {"stage 2", "summary-2"}
    clash = invoke(
        "diff",
        str(tmp_path / "a.json"),
        str(tmp_path / "b.json"),
        "--junit",
        str(tmp_path / "a.json"),
    )
    assert clash.exit_code == 2


def test_kinds_follow_the_gate(quickstart: dict[str, Any]) -> None:
    gi = report_input(nasty_report(quickstart["report"]))
    assert [f.kind for f in gi.findings] == [
        Kind.ERROR,
        Kind.INCONCLUSIVE,
        Kind.UNSUPPORTED,
        Kind.PASSED,
    ]


def test_check_takes_the_ci_options_and_refuses_an_input_as_output(tmp_path: Path) -> None:
    for cmd in ("verify", "check", "batch", "diff"):
        text = invoke(cmd, "--help").output
        assert "--junit" in text and "--sarif" in text and "--annotations" in text, cmd
    answer, source = tmp_path / "answer.txt", tmp_path / "source.txt"
    answer.write_text("Scrooge was a miser.\n")
    source.write_text("Scrooge was a tight-fisted hand at the grindstone.\n")
    res = invoke(
        "check",
        str(answer),
        str(source),
        "--run-dir",
        str(tmp_path / "run"),
        "--out",
        str(tmp_path / "r.json"),
        "--sarif",
        str(source),
        # Keyless and installed everywhere: the refusal must not depend on the default model.
        "--model",
        "demo/overlap",
    )
    assert res.exit_code == 2 and "an input is never overwritten" in res.output
    assert source.read_text() == "Scrooge was a tight-fisted hand at the grindstone.\n"
