"""The index of runs, on SQLite and on a real PostgreSQL server (the same tests): refresh reads
only what changed, reindex rebuilds the same rows from the files, filters, claims, reviews, and
nothing of one runs directory leaks into another's."""

from __future__ import annotations

import json
import os
import shutil
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import veritrail.runs.index as index_mod
from runsynth import write_run
from veritrail.runs import RunFilter, open_index
from veritrail.runs.files import RunDirError, read_run_dir
from veritrail.runs.index import RunIndex, index_finished_run
from veritrail.runs.keys import claim_text_key

DAY = 86400.0
T0 = datetime(2025, 5, 1, 12, 0, tzinfo=UTC).timestamp()


def make_runs(root: Path) -> Path:
    """Five runs over two DAGs and two models, one a day from 2025-05-01 12:00 UTC backwards,
    plus one interrupted run with 10 of its 20 claims done."""
    root.mkdir(parents=True, exist_ok=True)
    for i in range(4):
        write_run(
            root,
            f"summary-{i:012x}",
            claims=10,
            seed=i,
            created=T0 - i * DAY,
            model="openai/gpt-4o" if i % 2 else "local/qwen",
        )
    write_run(
        root,
        f"qa-{9:012x}",
        claims=20,
        finished=10,
        status="interrupted",
        dag_name="qa",
        pipeline="question answering",
        created=T0 - 10 * DAY,
    )
    return root


def ids(rows: list[object]) -> list[str]:
    return [r.id for r in rows]  # type: ignore[attr-defined]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return make_runs(tmp_path / "runs")


def test_refresh_indexes_every_run_and_lists_them_newest_first(
    root: Path, db_url: str | None
) -> None:
    with open_index(root, db_url) as index:
        stats = index.refresh()
        assert (stats.added, stats.updated, stats.removed, stats.failed) == (5, 0, 0, ())
        rows = index.list_runs()
    assert ids(rows) == [f"summary-{i:012x}" for i in range(4)] + [f"qa-{9:012x}"]
    first = rows[0]
    assert first.dag == "summary" and first.model == "local/qwen" and first.status == "complete"
    assert first.created == datetime.fromtimestamp(T0, UTC)
    assert (first.claims, first.verified, first.supported, first.not_supported) == (10, 10, 8, 2)
    assert first.unsupported_share == pytest.approx(0.2)
    assert first.dollars == pytest.approx(10 * 0.0012) and first.lm_calls == 30
    assert first.has_report and first.reviewed == 0
    qa = rows[-1]
    assert (qa.dag, qa.pipeline, qa.status, qa.claims, qa.verified) == (
        "qa",
        "question answering",
        "interrupted",
        20,
        10,
    )
    assert not qa.has_report
    assert qa.unsupported_share == pytest.approx(2 / 20)  # over every claim, as the gate counts
    assert json.loads(json.dumps(first.to_json()))["created"] == "2025-05-01T12:00:00+00:00"


def test_refresh_reads_only_the_runs_that_changed(
    root: Path, db_url: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    with open_index(root, db_url) as index:
        index.refresh()
        read: list[Path] = []
        real = index_mod.read_run_dir

        def counting(path: Path) -> object:
            read.append(Path(path))
            return real(path)

        monkeypatch.setattr(index_mod, "read_run_dir", counting)
        stats = index.refresh()
        assert read == [] and stats.unchanged == 5 and stats.added == stats.updated == 0

        # One run gets more results (a resume), another is deleted, a new one appears.
        write_run(
            root,
            f"qa-{9:012x}",
            claims=20,
            status="complete",
            dag_name="qa",
            pipeline="question answering",
            created=T0 - 10 * DAY,
        )
        shutil.rmtree(root / f"summary-{3:012x}")
        write_run(root, "new-000000000001", claims=3, created=T0 + DAY)
        stats = index.refresh()
        assert sorted(p.name for p in read) == ["new-000000000001", f"qa-{9:012x}"]
        assert (stats.added, stats.updated, stats.removed, stats.unchanged) == (1, 1, 1, 3)
        qa = index.get_run(f"qa-{9:012x}")
        assert qa is not None and (qa.verified, qa.status, qa.has_report) == (20, "complete", True)
        assert index.get_run(f"summary-{3:012x}") is None
        assert index.count_runs() == 5


def test_reindex_rebuilds_the_same_rows_from_the_files(root: Path, db_url: str | None) -> None:
    with open_index(root, db_url) as index:
        index.refresh()
        before = [r.to_json() for r in index.list_runs()]
        claims_before = [c.to_json() for c in index.run_claims(f"summary-{0:012x}")]
        stats = index.reindex()
        assert stats.added == 5
        assert [r.to_json() for r in index.list_runs()] == before
        assert [c.to_json() for c in index.run_claims(f"summary-{0:012x}")] == claims_before


def test_filters(root: Path, db_url: str | None) -> None:
    with open_index(root, db_url) as index:
        index.refresh()
        assert ids(index.list_runs(RunFilter(dag="QA"))) == [f"qa-{9:012x}"]
        assert ids(index.list_runs(RunFilter(dag="answer"))) == [f"qa-{9:012x}"]  # the pipeline
        assert ids(index.list_runs(RunFilter(model="GPT-4o"))) == [
            f"summary-{1:012x}",
            f"summary-{3:012x}",
            f"qa-{9:012x}",
        ]
        assert ids(index.list_runs(RunFilter(model="4o-mini"))) == [f"qa-{9:012x}"]
        assert ids(index.list_runs(RunFilter(status="interrupted"))) == [f"qa-{9:012x}"]
        day = datetime(2025, 4, 30, tzinfo=UTC)
        assert ids(index.list_runs(RunFilter(since=day, until=day + timedelta(days=1)))) == [
            f"summary-{1:012x}"
        ]
        assert ids(index.list_runs(RunFilter(since=T0 - 1.5 * DAY))) == [
            f"summary-{0:012x}",
            f"summary-{1:012x}",
        ]
        assert index.count_runs(RunFilter(dag="summary", model="qwen")) == 2
        # LIKE's wildcards in a filter are plain characters.
        assert (
            index.list_runs(RunFilter(dag="%")) == [] and index.list_runs(RunFilter(dag="_")) == []
        )
        assert ids(index.list_runs(limit=2, offset=1)) == [f"summary-{1:012x}", f"summary-{2:012x}"]
        assert index.dags() == ["qa", "summary"]
        assert index.models() == ["local/qwen", "openai/gpt-4o", "openai/gpt-4o-mini"]


def test_claims_of_a_run_in_report_order_with_key_sources_and_stages(
    root: Path, db_url: str | None
) -> None:
    with open_index(root, db_url) as index:
        index.refresh()
        claims = index.run_claims(f"summary-{0:012x}")
        assert index.run_claims("no-such-run") == []
        qa = index.run_claims(f"qa-{9:012x}")
    assert [c.claim_id for c in claims] == [f"c{i}" for i in range(10)]
    supported, unsupported = claims[0], claims[4]
    assert supported.verdict == "Fully Supported" and supported.sources == ("r0",)
    assert supported.error_stages == () and supported.error_stage_status == "not_applicable"
    assert unsupported.verdict == "Not Fully Supported" and unsupported.sources == ()
    assert unsupported.error_stages == (2,) and unsupported.error_stage_status == "identified"
    assert supported.key == claim_text_key(supported.text)
    assert claim_text_key("Fact 0 holds, in place 0") == supported.key  # case, punctuation
    # Not verified yet: the claim is there, without a verdict.
    assert qa[15].verdict is None and qa[15].termination is None and len(qa) == 20


def test_a_review_through_the_index_shows_in_the_run_and_its_claims(
    root: Path, db_url: str | None
) -> None:
    with open_index(root, db_url) as index:
        index.refresh()
        run_id = f"summary-{0:012x}"
        got = index.review(run_id, "c4", "supported", "the source says so", author="ana")
        assert got.model_verdict == "Not Fully Supported"
        index.review(run_id, "c4", "inconclusive", "second look", author="bo")
        row = index.get_run(run_id)
        c4 = index.run_claims(run_id)[4]
        assert row is not None and row.reviewed == 1
        assert row.unsupported_share == pytest.approx(0.2)
        assert row.reviewed_unsupported_share == pytest.approx(0.1)
        assert (c4.verdict, c4.review_verdict, c4.review_author, c4.review_count) == (
            "Not Fully Supported",
            "Inconclusive",
            "bo",
            2,
        )
        assert c4.review_reason == "second look" and c4.effective_verdict == "Inconclusive"
        # The reviews are in the run directory: a rebuild from the files keeps them.
        index.reindex()
        assert index.run_claims(run_id)[4].review_verdict == "Inconclusive"
        with pytest.raises(RunDirError):
            index.record_run(root.parent)


def test_a_run_changed_just_before_it_was_read_is_read_again(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A change in the same tick of the file system's clock as the reading would not move the
    times: a run younger than `RACY_SECONDS` when read is read again at the next refresh."""
    import veritrail.runs.files as files_mod

    monkeypatch.setattr(files_mod, "RACY_SECONDS", 3600.0)
    with open_index(root) as index:
        index.refresh()
        assert index.refresh().unchanged == 0  # all were "just written": read again
        monkeypatch.setattr(files_mod, "RACY_SECONDS", 0.0)
        assert index.refresh().updated == 5  # read once more, now settled
        assert index.refresh().unchanged == 5


def test_a_status_change_alone_is_seen(root: Path, db_url: str | None) -> None:
    with open_index(root, db_url) as index:
        index.refresh()
        run = root / f"summary-{0:012x}"
        doc = json.loads((run / "run.json").read_text())
        doc["status"] = "incomplete"
        tmp = run / ".run.json.tmp"
        tmp.write_text(json.dumps(doc))
        os.replace(tmp, run / "run.json")
        assert index.refresh().updated == 1
        row = index.get_run(run.name)
        assert row is not None and row.status == "incomplete"


def test_an_unreadable_run_is_reported_and_left_out(root: Path, db_url: str | None) -> None:
    with open_index(root, db_url) as index:
        index.refresh()
        bad = root / f"summary-{2:012x}"
        (bad / "claims.json").write_text("{not json", encoding="utf-8")
        stats = index.refresh()
        assert [Path(p).name for p, _ in stats.failed] == [bad.name]
        assert "claims.json" in stats.failed[0][1]
        assert index.get_run(bad.name) is None and index.count_runs() == 4


def test_a_run_recorded_from_outside_the_root_is_listed_and_kept_by_reindex(
    tmp_path: Path, root: Path, db_url: str | None
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run = write_run(elsewhere, "mine-000000000001", claims=2)
    with open_index(root, db_url) as index:
        row = index.record_run(run)
        assert row is not None and row.id == run.resolve().as_posix()
        index.refresh()
        index.reindex()
        assert index.get_run(row.id) is not None and index.count_runs() == 6
        shutil.rmtree(run)
        index.refresh()
        assert index.get_run(row.id) is None


def test_two_runs_directories_share_one_database_without_mixing(
    tmp_path: Path, db_url: str | None
) -> None:
    if db_url is None:
        db_url = str(tmp_path / "shared.sqlite")  # a SQLite file given as --db
    a = make_runs(tmp_path / "a")
    b = tmp_path / "b"
    b.mkdir()
    write_run(b, "other-000000000001", claims=1)
    with open_index(a, db_url) as ia, open_index(b, db_url) as ib:
        ia.refresh()
        ib.refresh()
        ib.reindex()
        ia.refresh()
        assert ia.count_runs() == 5 and ids(ib.list_runs()) == ["other-000000000001"]


def test_index_finished_run_is_best_effort(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    root.mkdir()
    inside = write_run(root, "in-000000000001", claims=2)
    assert index_finished_run(inside, root)
    with open_index(root) as index:
        assert index.get_run("in-000000000001") is not None
    # A run with its own --run-dir elsewhere creates no index where there is none.
    other_root = tmp_path / "nothing-here"
    other_root.mkdir()
    outside = write_run(tmp_path / "own", "x-000000000001", claims=1)
    assert not index_finished_run(outside, other_root)
    assert list(other_root.iterdir()) == []
    # A database that cannot be used never raises.
    assert not index_finished_run(inside, root, "postgresql://u:pw@127.0.0.1:1/none")
    assert not index_finished_run(tmp_path / "missing", root)


def test_reading_a_run_directory_tolerates_a_torn_results_line(tmp_path: Path) -> None:
    run = write_run(tmp_path, "torn-000000000001", claims=4, finished=3)
    with (run / "results.jsonl").open("ab") as fh:
        fh.write(b'{"id": "c3", "verd')
    rec = read_run_dir(run)
    assert [c.verdict is not None for c in rec.claims] == [True, True, True, False]


def test_the_runs_directory_must_exist(tmp_path: Path) -> None:
    from veritrail.runs.db import RunsIndexError

    with pytest.raises(RunsIndexError, match="not a directory of runs"):
        open_index(tmp_path / "missing")


def test_refresh_of_a_thousand_unchanged_runs_only_stats_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The incremental refresh is cheap: with nothing changed, no run file is read."""
    root = tmp_path / "runs"
    root.mkdir()
    template = write_run(root, "r-000000000000", claims=2)
    for i in range(1, 300):
        shutil.copytree(template, root / f"r-{i:012x}")
    with open_index(root) as index:
        index.refresh()
        monkeypatch.setattr(
            index_mod,
            "read_run_dir",
            lambda p: pytest.fail(f"read {p}"),
        )
        t0 = time.perf_counter()
        stats = index.refresh()
        assert stats.unchanged == 300
    assert time.perf_counter() - t0 < 30  # a sanity bound; the benchmark measures it
    assert isinstance(index, RunIndex) and os.path.isdir(root)
