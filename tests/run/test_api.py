"""`veritrail.verify` / `averify` and the `Report`: the oracle and the loopback server, compared
with what the CLI does on the same inputs."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import veritrail as vt
from loopback_model import loopback
from veritrail.cli.main import cli
from veritrail.report import comparable
from veritrail.results import TABLE_COLUMNS
from veritrail.run.job import ExitCode

QS = Path(__file__).resolve().parents[2] / "examples" / "quickstart"


@pytest.fixture
def qs(tmp_path: Path) -> Path:
    d = tmp_path / "qs"
    shutil.copytree(QS, d)
    return d


def _oracle_verify(qs: Path, **kw: Any) -> vt.Report:
    return vt.verify(qs / "dag.json", qs / "claims.json", oracle=qs / "oracle.json", **kw)


def test_verify_with_the_oracle_returns_a_report(qs: Path, tmp_path: Path) -> None:
    report = _oracle_verify(qs)
    assert isinstance(report, vt.Report)
    assert [r.claim.id for r in report.claims] == ["c1", "c2", "c3", "c4"]
    assert [r.claim.id for r in report.unsupported] == ["c3"]
    assert report.errors == [] and report.exit_code is ExitCode.OK and report.ok
    s = report.summary
    assert (s.claims, s.unsupported, s.errors) == (4, 1, 0)
    assert s.unsupported_share == 0.25
    assert s.verdicts["Fully Supported"] == 3
    assert "25.0% unsupported" in str(s)
    # The run store is opt-in: nothing kept, nothing written in the working directory.
    assert report.run_dir is None and not (tmp_path / "runs").exists()
    assert report["summary"]["claims"] == 4  # a Mapping over the document
    doc = report.to_dict()
    doc["claims"].clear()
    assert len(report.claims) == 4  # to_dict is a copy


def test_exit_code_and_report_equal_the_cli(qs: Path, tmp_path: Path) -> None:
    report = _oracle_verify(qs, max_unsupported=0.2)
    assert report.exit_code is ExitCode.GATE
    out = tmp_path / "cli.json"
    res = CliRunner().invoke(
        cli,
        [
            "verify",
            str(qs / "dag.json"),
            "--claims",
            str(qs / "claims.json"),
            "--oracle",
            str(qs / "oracle.json"),
            "--out",
            str(out),
            "--max-unsupported",
            "0.2",
            "--quiet",
        ],
    )
    assert res.exit_code == int(report.exit_code) == 1
    cli_doc = json.loads(out.read_text())
    api_doc = report.to_dict()
    cli_doc["dag"]["path"] = api_doc["dag"]["path"]
    assert comparable(api_doc) == comparable(cli_doc)


def test_a_loaded_report_applies_the_gate_its_run_recorded(qs: Path, tmp_path: Path) -> None:
    out = tmp_path / "gated.json"
    res = CliRunner().invoke(
        cli,
        [
            *("verify", str(qs / "dag.json"), "--claims", str(qs / "claims.json")),
            *("--oracle", str(qs / "oracle.json"), "--out", str(out)),
            *("--max-unsupported", "0.2", "--quiet"),
        ],
    )
    assert res.exit_code == 1, res.output
    doc = json.loads(out.read_text())
    assert doc["run"]["max_unsupported"] == 0.2
    loaded = vt.load_report(out)
    assert loaded.max_unsupported == 0.2 and loaded.exit_code is ExitCode.GATE
    assert vt.load_report(out, max_unsupported=1.0).exit_code is ExitCode.OK
    # Without a gate the run records null; a report from before the key existed has none: no gate.
    assert _oracle_verify(qs, out=tmp_path / "free.json")["run"]["max_unsupported"] is None
    assert vt.load_report(tmp_path / "free.json").exit_code is ExitCode.OK
    del doc["run"]["max_unsupported"]
    (tmp_path / "old.json").write_text(json.dumps(doc))
    assert vt.load_report(tmp_path / "old.json").exit_code is ExitCode.OK


def test_save_load_html_and_pandas(qs: Path, tmp_path: Path) -> None:
    report = _oracle_verify(qs, out=tmp_path / "r.json", html=tmp_path / "r.html")
    assert (tmp_path / "r.json").is_file() and (tmp_path / "r.html").is_file()
    assert report.path == tmp_path / "r.json"
    again = vt.load_report(tmp_path / "r.json", max_unsupported=0.0)
    assert isinstance(again, vt.Report) and again.exit_code is ExitCode.GATE
    assert [r.verdict for r in again.claims] == [r.verdict for r in report.claims]
    report.save(tmp_path / "copy.json")
    assert vt.load_report(tmp_path / "copy.json").to_dict()["claims"] == report.to_dict()["claims"]
    html = report.write_html(tmp_path / "copy.html")
    assert html.read_text(encoding="utf-8").lstrip().lower().startswith("<!doctype html")
    df = report.to_pandas()
    assert list(df.columns) == list(TABLE_COLUMNS)
    assert df.shape == (4, 11)
    assert df.loc[df["id"] == "c3", "verdict"].item() == "Not Fully Supported"
    assert (df["provenance_paths"] >= 0).all()


def test_to_pandas_without_pandas_says_how(qs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    report = _oracle_verify(qs)
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas -> ImportError
    with pytest.raises(ImportError, match="pip install pandas"):
        report.to_pandas()
    assert len(report.rows()) == 4


def test_run_dir_keeps_the_run_and_a_second_call_is_served_from_it(
    qs: Path, tmp_path: Path
) -> None:
    first = _oracle_verify(qs, run_dir=tmp_path / "run")
    assert first.run_dir == tmp_path / "run" and (tmp_path / "run" / "run.json").is_file()
    second = _oracle_verify(qs, run_dir=tmp_path / "run")
    assert second["run"]["resumed_claims"] == 4
    assert comparable(first.to_dict()) == comparable(second.to_dict())


def test_claims_as_texts_and_dag_as_dict(qs: Path) -> None:
    dag = json.loads((qs / "dag.json").read_text())
    report = vt.verify(
        dag,
        [
            "Scrooge was Marley's sole executor.",
            vt.Claim("x", "Scrooge signed the register of Marley's burial."),
        ],
        oracle=qs / "oracle.json",
    )
    assert [(r.claim.id, r.verdict) for r in report.claims] == [
        ("c1", vt.Verdict.FULLY_SUPPORTED),
        ("x", vt.Verdict.FULLY_SUPPORTED),
    ]
    assert report["dag"]["path"] is None  # built in memory, kept in a temporary run dir


def test_sync_verify_works_inside_a_running_loop_and_averify_is_its_twin(qs: Path) -> None:
    async def main() -> tuple[vt.Report, vt.Report]:
        inside = _oracle_verify(qs)  # a running loop: runs in a worker thread
        twin = await vt.averify(qs / "dag.json", qs / "claims.json", oracle=qs / "oracle.json")
        return inside, twin

    inside, twin = asyncio.run(main())
    assert comparable(inside.to_dict()) == comparable(twin.to_dict())


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"claims": []}, "no claims"),
        ({"dag": "missing.json"}, "missing.json"),
        ({"q": -1}, "must not be negative"),
        ({"nonsense": 1}, "unknown setting"),
        ({"oracle": "nope.json"}, "oracle file nope.json not found"),
    ],
)
def test_bad_input_raises_before_any_call(
    qs: Path, kwargs: dict[str, Any], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    args: dict[str, Any] = {"dag": qs / "dag.json", "claims": qs / "claims.json"}
    args.update(kwargs)
    with loopback(monkeypatch) as srv:
        with pytest.raises(vt.JobInputError, match=message):
            vt.verify(args.pop("dag"), args.pop("claims"), **args)
        assert srv.count == 0


def test_output_never_overwrites_an_input(qs: Path) -> None:
    with pytest.raises(ValueError, match="never overwritten"):
        _oracle_verify(qs, out=qs / "claims.json")


def test_verify_over_http_extracts_claims_and_closes_the_model(
    qs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with loopback(monkeypatch) as srv:
        report = vt.verify(qs / "dag.json", q=1)
        assert srv.count > 0
    assert report.claims and report.errors == []
    assert report["model"] == "openai/loopback"
    assert report.summary.cost["lm_calls"] > 0
    assert report.exit_code is ExitCode.OK


def test_errored_claims_give_exit_code_3(qs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from veritrail.testing import Fault

    with loopback(monkeypatch) as srv:
        srv.responder = lambda req: Fault.server_error()
        monkeypatch.setenv("VERITRAIL_RETRY_BASE_DELAY", "0.001")
        report = vt.verify(qs / "dag.json", qs / "claims.json", max_reasks=0)
    assert len(report.errors) == 4 and report.exit_code is ExitCode.ERRORS
    assert all(r.error for r in report.errors)
