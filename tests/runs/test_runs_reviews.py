"""Reviews: appended with author, time and reason, history kept, the latest effective; torn
lines tolerated; the run's reports show the model's verdict and the reviewed one; `veritrail
review`'s exit codes; a review survives `resume`, a re-run of the same command and a reindex."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner

from dagkit import make_dag
from runsynth import write_run
from veritrail.cli.main import cli
from veritrail.records import Verdict
from veritrail.report import REPORT_VERSION, read_report
from veritrail.runs import open_index
from veritrail.runs.reviewing import add_review, report_with_reviews, update_run_reports
from veritrail.runs.reviews import (
    REVIEWS_FILE,
    Review,
    ReviewError,
    append_review,
    apply_reviews,
    effective_reviews,
    parse_verdict,
    read_reviews,
)


def schema() -> dict[str, Any]:
    text = (resources.files("veritrail") / "schemas" / "report.schema.json").read_text()
    return json.loads(text)  # type: ignore[no-any-return]


@pytest.fixture
def run(tmp_path: Path) -> Path:
    return write_run(tmp_path / "runs", "summary-000000000001", claims=10)


def test_verdict_spellings() -> None:
    assert parse_verdict("supported") is Verdict.FULLY_SUPPORTED
    assert parse_verdict("not-supported") is Verdict.NOT_FULLY_SUPPORTED
    assert parse_verdict("Not_Supported") is Verdict.NOT_FULLY_SUPPORTED
    assert parse_verdict("inconclusive") is Verdict.INCONCLUSIVE
    assert parse_verdict("Not Fully Supported") is Verdict.NOT_FULLY_SUPPORTED
    assert parse_verdict("fully-supported") is Verdict.FULLY_SUPPORTED
    with pytest.raises(ReviewError, match="unknown verdict"):
        parse_verdict("maybe")


def test_history_is_kept_and_the_latest_review_is_effective(run: Path) -> None:
    add_review(run, "c1", "supported", "first", author="ana", time="2025-01-01T00:00:00Z")
    add_review(run, "c1", "not-supported", "second", author="bo", time="2024-01-01T00:00:00Z")
    add_review(run, "c2", "inconclusive", "only", author="ana")
    got = read_reviews(run)
    assert [(r.claim_id, r.verdict, r.author) for r in got] == [
        ("c1", Verdict.FULLY_SUPPORTED, "ana"),
        ("c1", Verdict.NOT_FULLY_SUPPORTED, "bo"),
        ("c2", Verdict.INCONCLUSIVE, "ana"),
    ]
    eff = effective_reviews(got)
    # File order decides, not the clock: the second line is the latest review.
    assert eff["c1"].latest.reason == "second" and eff["c1"].count == 2
    assert eff["c2"].count == 1 and got[0].model_verdict == "Fully Supported"
    lines = (run / REVIEWS_FILE).read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[0])["format"] == "veritrail-review" and len(lines) == 3


def test_a_torn_last_line_is_ignored_and_the_next_review_starts_a_new_line(run: Path) -> None:
    add_review(run, "c1", "supported", "kept", author="ana")
    with (run / REVIEWS_FILE).open("ab") as fh:
        fh.write(b'{"format": "veritrail-review", "claim_id": "c1", "verd')  # killed mid-append
    assert [r.reason for r in read_reviews(run)] == ["kept"]
    add_review(run, "c3", "supported", "after the tear", author="ana")
    assert [r.reason for r in read_reviews(run)] == ["kept", "after the tear"]


def test_the_author_defaults_to_the_os_user_and_time_is_utc(run: Path) -> None:
    import getpass

    got = add_review(run, "c1", "supported", "  spaced reason  ")
    assert got.author == getpass.getuser() and got.reason == "spaced reason"
    assert got.time.endswith("Z") and len(got.time) == len("2025-01-01T00:00:00Z")


@pytest.mark.parametrize(
    ("claim", "verdict", "reason", "match"),
    [
        ("nope", "supported", "x", "has no claim 'nope'"),
        ("c1", "sort of", "x", "unknown verdict"),
        ("c1", "supported", "   ", "needs a reason"),
        ("c1", "supported", "x" * 10_001, "longer than"),
    ],
)
def test_bad_reviews_are_refused_and_nothing_is_written(
    run: Path, claim: str, verdict: str, reason: str, match: str
) -> None:
    with pytest.raises(ReviewError, match=match):
        add_review(run, claim, verdict, reason)
    assert not (run / REVIEWS_FILE).exists()


def test_a_directory_that_is_not_a_run_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ReviewError, match="not a run directory"):
        add_review(tmp_path, "c1", "supported", "x")


def test_reports_show_the_models_and_the_reviewed_verdict(run: Path) -> None:
    add_review(run, "c4", "supported", "the <b>source</b> says so", author="ana")
    report = read_report(run / "report.json")
    assert report["version"] == REPORT_VERSION == 5
    jsonschema.validate(report, schema())
    c4 = report["claims"][4]
    assert c4["verdict"] == "Not Fully Supported"  # the model's verdict is never replaced
    assert c4["review"] == {
        "verdict": "Fully Supported",
        "reason": "the <b>source</b> says so",
        "author": "ana",
        "time": c4["review"]["time"],
        "count": 1,
    }
    assert "review" not in report["claims"][3]
    page = (run / "report.html").read_text(encoding="utf-8")
    assert "the \\u003cb\\u003esource\\u003c/b\\u003e says so" in page  # data, never markup
    assert "reviewLine" in page  # the viewer that shows it


def test_a_review_secret_is_redacted(run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-abcdefghijklmnopqrstuvwxyz123456")
    add_review(run, "c1", "supported", "key sk-test-abcdefghijklmnopqrstuvwxyz123456 leaked")
    assert "abcdefghijklmnop" not in (run / REVIEWS_FILE).read_text(encoding="utf-8")
    assert "abcdefghijklmnop" not in (run / "report.json").read_text(encoding="utf-8")


def test_while_a_run_holds_the_directory_its_reports_are_left_to_it(run: Path) -> None:
    from veritrail.run.store import lock_run_dir

    before = (run / "report.json").read_bytes()
    lock = lock_run_dir(run)
    try:
        got = add_review(run, "c1", "not-supported", "while running", author="ana")
        assert update_run_reports(run).busy
    finally:
        lock.release()
    assert (run / "report.json").read_bytes() == before
    assert read_reviews(run) == [got]
    assert not update_run_reports(run).busy
    assert read_report(run / "report.json")["claims"][1]["review"]["reason"] == "while running"


def test_apply_reviews_drops_stale_reviews_and_reads_version_1(tmp_path: Path, run: Path) -> None:
    report = json.loads((run / "report.json").read_text(encoding="utf-8"))
    report["version"] = 1
    report["claims"][0]["review"] = {"verdict": "Inconclusive"}  # stale: no such review
    v1 = tmp_path / "v1.json"
    v1.write_text(json.dumps(report), encoding="utf-8")
    doc = read_report(v1)
    assert doc["version"] == 1
    out = apply_reviews(doc, {})
    assert out["version"] == REPORT_VERSION and "review" not in out["claims"][0]
    assert doc["claims"][0]["review"] == {"verdict": "Inconclusive"}  # the input is not changed
    review = Review("c2", Verdict.INCONCLUSIVE, "r", "a", "2025-01-01T00:00:00Z")
    append_review(run, review)
    assert report_with_reviews(doc, run)["claims"][2]["review"]["verdict"] == "Inconclusive"


# -- the command ----------------------------------------------------------------------------------


def invoke(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args))


def test_review_command(run: Path) -> None:
    res = invoke(
        "review", str(run), "c4", "--verdict", "supported", "--reason", "checked", "--author", "ana"
    )
    assert res.exit_code == 0, res.output
    assert "c4: model Not Fully Supported, reviewed Fully Supported by ana" in res.output
    assert "updated report.json, report.html" in res.output
    res = invoke("review", str(run), "c4", "--verdict", "inconclusive", "--reason", "x", "--json")
    assert json.loads(res.output)["verdict"] == "Inconclusive"
    assert [r.verdict for r in read_reviews(run)] == [Verdict.FULLY_SUPPORTED, Verdict.INCONCLUSIVE]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["c99", "--verdict", "supported", "--reason", "x"], "has no claim 'c99'"),
        (["c1", "--verdict", "perhaps", "--reason", "x"], "unknown verdict"),
        (["c1", "--verdict", "supported", "--reason", ""], "needs a reason"),
        (["c1", "--verdict", "supported"], "Missing option '--reason'"),
    ],
)
def test_review_command_exits_2_on_bad_input(
    run: Path, args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from veritrail.cli.main import main

    with pytest.raises(SystemExit) as exc:
        main(["review", str(run), *args])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err
    assert not (run / REVIEWS_FILE).exists()


def test_review_command_on_a_missing_or_foreign_directory_exits_2(tmp_path: Path) -> None:
    from veritrail.cli.main import main

    for target in (tmp_path / "missing", tmp_path):
        with pytest.raises(SystemExit) as exc:
            main(["review", str(target), "c1", "--verdict", "supported", "--reason", "x"])
        assert exc.value.code == 2


# -- reviews survive what runs do -----------------------------------------------------------------

EDGES = {"R1": [], "R2": [], "M": ["R1", "R2"], "T": ["M"]}
CLAIMS = ["First claim text.", "Second claim text.", "Unknown to the oracle."]
ORACLE = {
    "claims": [
        {"claim": CLAIMS[0], "evidence": {"M": [0], "R1": [1]}, "verdicts": ["Fully Supported"]},
        {"claim": CLAIMS[1], "evidence": {"M": [0]}, "verdicts": ["Not Fully Supported"]},
    ]
}


def test_a_review_survives_resume_a_rerun_and_reindex(tmp_path: Path) -> None:
    (tmp_path / "dag.json").write_text(json.dumps(make_dag(EDGES)))
    (tmp_path / "claims.json").write_text(json.dumps(CLAIMS))
    (tmp_path / "oracle.json").write_text(json.dumps(ORACLE))
    verify = [
        "verify",
        str(tmp_path / "dag.json"),
        "--claims",
        str(tmp_path / "claims.json"),
        "--oracle",
        str(tmp_path / "oracle.json"),
        "--out",
        str(tmp_path / "out.json"),
        "--quiet",
    ]
    first = CliRunner().invoke(cli, verify)
    assert first.exit_code == 3, first.output  # the claim unknown to the oracle ends in error
    (run_dir,) = [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]
    res = invoke("review", str(run_dir), "c2", "--verdict", "supported", "--reason", "M says it")
    assert res.exit_code == 0, res.output
    reviews = (run_dir / REVIEWS_FILE).read_bytes()

    assert CliRunner().invoke(cli, ["resume", str(run_dir), "--quiet"]).exit_code == 3
    assert CliRunner().invoke(cli, verify).exit_code == 3  # the same command again: same run
    assert (run_dir / REVIEWS_FILE).read_bytes() == reviews
    with open_index(tmp_path / "runs") as index:
        index.reindex()
        (row,) = index.list_runs()
        assert row.reviewed == 1
        assert index.run_claims(row.id)[1].review_verdict == "Fully Supported"
    # What the run layer writes with `report_with_reviews` shows the review again.
    doc = report_with_reviews(read_report(run_dir / "report.json"), run_dir)
    assert doc["claims"][1]["review"]["reason"] == "M says it"


def test_a_rerun_writes_its_report_with_the_reviews(tmp_path: Path) -> None:
    (tmp_path / "dag.json").write_text(json.dumps(make_dag(EDGES)))
    (tmp_path / "claims.json").write_text(json.dumps(CLAIMS))
    (tmp_path / "oracle.json").write_text(json.dumps(ORACLE))
    verify = [
        "verify",
        str(tmp_path / "dag.json"),
        "--claims",
        str(tmp_path / "claims.json"),
        "--oracle",
        str(tmp_path / "oracle.json"),
        "--out",
        str(tmp_path / "out.json"),
        "--quiet",
    ]
    CliRunner().invoke(cli, verify)
    (run_dir,) = [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]
    invoke("review", str(run_dir), "c2", "--verdict", "supported", "--reason", "M says it")
    CliRunner().invoke(cli, ["resume", str(run_dir), "--quiet"])
    assert read_report(run_dir / "report.json")["claims"][1]["review"]["reason"] == "M says it"
    assert read_report(tmp_path / "out.json")["claims"][1]["review"]["reason"] == "M says it"
