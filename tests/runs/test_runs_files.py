"""Reading run directories without the run layer: the file names are the run layer's, run
directories are found where `verify` and `batch` put them, DAG names, claim keys."""

from __future__ import annotations

import json
from pathlib import Path

import reportkit
from runsynth import write_run
from veritrail.run import spec, store
from veritrail.runs import layout
from veritrail.runs.files import dag_name, find_run_dirs, pipeline_name, read_run_dir
from veritrail.runs.keys import claim_sources, claim_text_key, normalize_claim_text


def test_the_file_names_are_the_run_layers() -> None:
    assert layout.RUN_FORMAT == store.RUN_FORMAT
    assert layout.RUN_FILE == store.RUN_FILE
    assert layout.CLAIMS_FILE == store.CLAIMS_FILE
    assert layout.RESULTS_FILE == store.RESULTS_FILE
    assert layout.REPORT_FILE == store.REPORT_FILE
    assert layout.LOCK_FILE == store.LOCK_FILE
    assert layout.PARTIAL_REPORT == spec.PARTIAL_REPORT
    assert layout.DAG_FILE == spec.DAG_FILE
    # The reviews are a file no run writes, so a run never overwrites them.
    assert layout.REVIEWS_FILE not in spec.RUN_DIR_FILES


def test_run_directories_are_found_two_levels_down(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    a = write_run(root, "a-000000000001", claims=1)
    b = write_run(root / "batch-1", "b-000000000002", claims=1)
    write_run(root / "x" / "y", "too-deep-000000000003", claims=1)
    (root / ".hidden").mkdir()
    (root / "notes.txt").write_text("not a run")
    assert find_run_dirs(root) == [a, b]
    assert find_run_dirs(a) == [a]  # a run directory itself
    assert find_run_dirs(tmp_path / "missing") == []


def test_dag_and_pipeline_names(tmp_path: Path) -> None:
    run = tmp_path / "answer-0123456789ab"
    run.mkdir()
    assert dag_name(run, str(tmp_path / "my.dag.json")) == "my.dag"
    assert dag_name(run, str(run / "dag.json")) == "answer"  # a DAG given in memory (check)
    assert dag_name(run, None) == "answer"
    dag = tmp_path / "d.json"
    dag.write_text(json.dumps({"meta": {"pipeline": "hierarchical"}, "nodes": []}))
    assert pipeline_name(str(dag)) == "hierarchical"
    lines = tmp_path / "d.jsonl"
    lines.write_text('{"meta": {"pipeline": "qa"}}\n{"id": "t", "text": "x"}\n')
    assert pipeline_name(str(lines)) == "qa"
    assert pipeline_name(str(tmp_path / "missing.json")) is None
    assert pipeline_name(None) is None


def test_claim_keys_ignore_case_spacing_and_punctuation() -> None:
    assert normalize_claim_text("  The FUND grew 5%,\tin 2020! ") == "the fund grew 5 in 2020"
    assert claim_text_key("The fund grew 5% in 2020.") == claim_text_key(
        "the fund grew 5 % in 2020"
    )
    assert claim_text_key("The fund grew 5% in 2020.") != claim_text_key(
        "The fund grew 6% in 2020."
    )
    assert normalize_claim_text("Ｆｕｌｌ ｗｉｄｔｈ") == "full width"  # NFKC
    assert len(claim_text_key("x")) == 16
    paths = [["m1", "r2"], ["m1", "r1"], ["m2", "r2"]]
    assert claim_sources(reportkit.claim(provenance=paths)) == ("r1", "r2")
    assert claim_sources(reportkit.claim(provenance=[])) == ()


def test_read_run_dir_figures(tmp_path: Path) -> None:
    run = write_run(tmp_path, "s-000000000001", claims=10, finished=6, status="interrupted")
    rec = read_run_dir(run)
    assert len(rec.claims) == 10 and rec.status == "interrupted" and not rec.has_report
    assert sum(c.verdict is not None for c in rec.claims) == 6
    assert rec.unsupported_share() == 1 / 10 and rec.dollars == round(6 * 0.0012, 6)
    assert rec.dag == "summary" and rec.pipeline == "summary"


def test_a_run_with_no_claim_finished_has_no_unsupported_share(tmp_path: Path) -> None:
    """A run that has just started is not "0% unsupported" (the runs list and the trend chart
    leave it out until a claim is finished)."""
    run = write_run(tmp_path, "s-000000000002", claims=4, finished=0, status="running")
    rec = read_run_dir(run)
    assert len(rec.claims) == 4 and rec.unsupported_share() is None
