"""The run directory: durable appends, torn-line recovery, fingerprints, secrets never written."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from veritrail.dag import Dag
from veritrail.records import (
    Claim,
    ClaimResult,
    Cost,
    ErrorStageStatus,
    Iteration,
    SentenceRef,
    StepCost,
    Summary,
    Termination,
    Verdict,
)
from veritrail.report import build_report, claim_to_dict, comparable
from veritrail.run.fingerprint import run_fingerprint
from veritrail.run.store import (
    RESULTS_FILE,
    RUN_FILE,
    RunStore,
    RunStoreError,
    Status,
    default_run_dir,
    redact,
)

DAG = Dag.from_records(
    [
        {"id": "r1", "text": "Alice founded Acme in 1999. It makes anvils."},
        {"id": "s1", "text": "Acme was founded by Alice.", "sources": ["r1"]},
        {"id": "t", "text": "Alice founded Acme. Acme sells rockets.", "sources": ["s1"]},
    ]
)


def result(cid: str, text: str, verdict: Verdict = Verdict.FULLY_SUPPORTED) -> ClaimResult:
    it = Iteration(
        index=1,
        nodes_checked=("s1",),
        carried_roots=(),
        nodes_with_evidence=("s1",),
        evidence=(SentenceRef("s1", 0, "Acme was founded by Alice."),),
        summaries=(Summary(("s1",), "Alice founded Acme."),),
        dropped_ids=(),
        verdict=verdict,
        reasoning="because",
        verdict_called_lm=True,
    )
    return ClaimResult(
        claim=Claim(cid, text, (0,)),
        subclaims=(text,),
        verdict=verdict,
        reasoning="because",
        termination=Termination.ROOTS_ONLY,
        iterations=(it,),
        provenance=(("s1", "r1"),),
        error_stages=(),
        error_stage_status=ErrorStageStatus.NOT_APPLICABLE,
        cost=Cost(
            lm_calls=3,
            input_tokens=100,
            output_tokens=20,
            nodes_read=2,
            nodes_read_share=2 / 3,
            wall_seconds=1.5,
            per_step={"verdict": StepCost(lm_calls=1, input_tokens=50, output_tokens=10)},
        ),
    )


CLAIMS = [Claim("c1", "Alice founded Acme.", (0,)), Claim("c2", "Acme sells rockets.", (1,))]


def open_store(path: Path, **kw: object) -> RunStore:
    args: dict[str, object] = {
        "fingerprint": "f" * 64,
        "dag_path": "dag.json",
        "dag_sha256": "0" * 64,
        "model": "fake/x",
        "config": {"q": 3, "openai_api_key": "sk-secret", "nested": {"api_key": "sk-2", "k": 1}},
        "claims": CLAIMS,
    }
    args.update(kw)
    return RunStore.create_or_open(path, **args)  # type: ignore[arg-type]


def test_record_then_reopen_keeps_results_and_order(tmp_path: Path) -> None:
    store = open_store(tmp_path / "run")
    assert [c.id for c in store.remaining()] == ["c1", "c2"]
    store.record(result("c2", "Acme sells rockets.", Verdict.NOT_FULLY_SUPPORTED))
    again = RunStore.open(tmp_path / "run")
    assert [c.id for c in again.remaining()] == ["c1"]
    assert again.done["c2"] == result("c2", "Acme sells rockets.", Verdict.NOT_FULLY_SUPPORTED)
    again.record(result("c1", "Alice founded Acme."))
    assert [r.claim.id for r in RunStore.open(tmp_path / "run").results_in_order()] == ["c1", "c2"]


def test_resumed_report_equals_uninterrupted(tmp_path: Path) -> None:
    rs = [result("c1", "Alice founded Acme."), result("c2", "Acme sells rockets.")]
    store = open_store(tmp_path / "run")
    store.record(rs[0])
    store = RunStore.open(tmp_path / "run")
    for c in store.remaining():
        store.record(next(r for r in rs if r.claim.id == c.id))
    a = build_report(store.results_in_order(), DAG, model="fake/x", config={"q": 3})
    b = build_report(rs, DAG, model="fake/x", config={"q": 3}, run={"started": 1})
    assert comparable(a) == comparable(b)


def test_torn_last_line_is_discarded_and_cut(tmp_path: Path) -> None:
    store = open_store(tmp_path / "run")
    store.record(result("c1", "Alice founded Acme."))
    f = tmp_path / "run" / RESULTS_FILE
    good = f.read_bytes()
    partial = json.dumps(claim_to_dict(result("c2", "Acme sells rockets.")))[:57]
    f.write_bytes(good + partial.encode())
    again = RunStore.open(tmp_path / "run")
    assert list(again.done) == ["c1"]
    assert f.read_bytes() == good  # the torn tail is gone, so the next append is a clean line
    again.record(result("c2", "Acme sells rockets."))
    assert set(RunStore.open(tmp_path / "run").done) == {"c1", "c2"}


def test_secrets_are_never_written(tmp_path: Path) -> None:
    store = open_store(tmp_path / "run")
    store.set_status(Status.INTERRUPTED, authorization="Bearer sk-3", note="ok")
    text = "".join(p.read_text() for p in (tmp_path / "run").iterdir())
    assert "sk-secret" not in text and "sk-2" not in text and "sk-3" not in text
    doc = json.loads((tmp_path / "run" / RUN_FILE).read_text())
    assert doc["config"] == {"q": 3, "nested": {"k": 1}}
    assert doc["status"] == "interrupted" and doc["extra"] == {"note": "ok"}


def test_other_run_in_directory_is_refused(tmp_path: Path) -> None:
    open_store(tmp_path / "run")
    with pytest.raises(RunStoreError, match="different run"):
        open_store(tmp_path / "run", fingerprint="e" * 64)


def test_open_rejects_non_run_directory(tmp_path: Path) -> None:
    with pytest.raises(RunStoreError, match="not a run directory"):
        RunStore.open(tmp_path)
    (tmp_path / RUN_FILE).write_text('{"format": "other"}')
    (tmp_path / "claims.json").write_text("[]")
    with pytest.raises(RunStoreError, match="not a VeriTrail run"):
        RunStore.open(tmp_path)


def test_fingerprint_depends_on_inputs_not_secrets() -> None:
    base = {"dag_sha256": "a", "claims": CLAIMS, "model": "m", "config": {"q": 3}}
    fp = run_fingerprint(**base)  # type: ignore[arg-type]
    assert fp == run_fingerprint(**{**base, "config": {"q": 3, "api_key": "k"}})  # type: ignore[arg-type]
    assert fp != run_fingerprint(**{**base, "config": {"q": 1}})  # type: ignore[arg-type]
    assert fp != run_fingerprint(**{**base, "model": "m2"})  # type: ignore[arg-type]
    assert fp != run_fingerprint(**{**base, "dag_sha256": "b"})  # type: ignore[arg-type]
    assert fp != run_fingerprint(**{**base, "claims": CLAIMS[:1]})  # type: ignore[arg-type]
    d = default_run_dir("runs", "/x/my dag.json", fp)
    assert d.parent == Path("runs") and d.name == f"my_dag-{fp[:12]}"


@settings(max_examples=50, deadline=None)
@given(st.dictionaries(st.text(min_size=1, max_size=12), st.integers() | st.text(max_size=5)))
def test_redact_drops_exactly_secret_keys(cfg: dict[str, object]) -> None:
    out = redact(cfg)
    for k in cfg:
        secret = any(
            m in k.lower()
            for m in ("api_key", "apikey", "secret", "password", "authorization", "token_value")
        )
        assert (k in out) != secret


def test_one_writer_at_a_time(tmp_path: Path) -> None:
    first = open_store(tmp_path / "run")
    first.lock()
    second = RunStore.open(tmp_path / "run")
    with pytest.raises(
        RunStoreError, match=rf"being run by another veritrail process \(pid {os.getpid()}\)"
    ):
        second.lock()
    first.record(result("c1", "Alice founded Acme."))
    first.unlock()
    second.lock()  # and it sees what the first writer saved meanwhile
    assert list(second.done) == ["c1"]
    second.unlock()


def test_errored_claims_are_remaining_and_the_last_line_wins(tmp_path: Path) -> None:
    from dataclasses import replace

    store = open_store(tmp_path / "run")
    failed = replace(
        result("c1", "Alice founded Acme."),
        verdict=None,
        termination=Termination.ERROR,
        error="TransientError: cannot connect",
    )
    store.record(failed)
    store.record(result("c2", "Acme sells rockets."))
    assert [c.id for c in store.remaining()] == ["c1"]
    assert list(store.done) == ["c2"] and list(store.errored) == ["c1"]
    assert [r.claim.id for r in store.results_in_order()] == ["c1", "c2"]
    store.record(result("c1", "Alice founded Acme."))  # the retry succeeded
    store.unlock()
    again = RunStore.open(tmp_path / "run")
    assert again.remaining() == [] and again.errored == {}
    lines = (tmp_path / "run" / RESULTS_FILE).read_text().splitlines()
    assert len(lines) == 3  # appended, never rewritten


def test_lock_is_taken_before_any_file_is_written(tmp_path: Path) -> None:
    from veritrail.run.store import lock_run_dir

    held = lock_run_dir(tmp_path / "run")
    # Another opener (a second flock on a new file description conflicts, as another process's
    # would) is refused before writing anything.
    with pytest.raises(RunStoreError, match="being run by another veritrail process"):
        open_store(tmp_path / "run")
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == [".lock"]
    held.release()
    store = open_store(tmp_path / "run")
    assert store.locked
    assert not [p for p in (tmp_path / "run").iterdir() if p.name.endswith(".tmp")]
