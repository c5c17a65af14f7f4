"""The Ray executor's cheap path on the driver: results encoded by the worker
(`run.store.result_line`), appended as a group with one write and one fsync
(`RunStore.record_lines`, `JobState.record_lines`), and gathered into one Ray item per
`send_interval` by each shard on its worker (`ray_worker._gather`). No Ray needed: the
pieces run here.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import pytest
from batchkit import write_jobs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from veritrail.batch import open_states, prepare_jobs
from veritrail.batch.jobs import JobState
from veritrail.batch.ray_worker import ShardSpec, ShardWorker, _gather, _pack
from veritrail.method.loop import not_started
from veritrail.records import (
    Claim,
    ClaimResult,
    Cost,
    ErrorStageStatus,
    Iteration,
    SentenceRef,
    Summary,
    Termination,
    Verdict,
)
from veritrail.run.store import RESULTS_FILE, RunStore, result_line

CLAIMS = [Claim(f"c{i}", f"Claim {i} holds.", (i,)) for i in range(4)]


def result(claim: Claim, reasoning: str = "because", error: str | None = None) -> ClaimResult:
    it = Iteration(
        index=1,
        nodes_checked=("s1",),
        carried_roots=(),
        nodes_with_evidence=("s1",),
        evidence=(SentenceRef("s1", 0, "Acme was founded by Alice."),),
        summaries=(Summary(("s1",), "Alice founded Acme."),),
        dropped_ids=(),
        verdict=Verdict.FULLY_SUPPORTED,
        reasoning=reasoning,
        verdict_called_lm=True,
    )
    return ClaimResult(
        claim=claim,
        subclaims=(claim.text,),
        verdict=None if error else Verdict.FULLY_SUPPORTED,
        reasoning=reasoning,
        termination=Termination.ERROR if error else Termination.ROOTS_ONLY,
        iterations=(it,),
        provenance=(("s1", "r1"),),
        error_stages=(),
        error_stage_status=ErrorStageStatus.NOT_APPLICABLE,
        cost=Cost(lm_calls=3, input_tokens=100, output_tokens=20, nodes_read=2),
        error=error,
    )


def open_store(path: Path, claims: list[Claim] = CLAIMS) -> RunStore:
    return RunStore.create_or_open(
        path,
        fingerprint="f" * 64,
        dag_path="dag.json",
        dag_sha256="0" * 64,
        model="fake/x",
        config={"q": 3},
        claims=claims,
    )


def test_lines_that_arrive_together_are_durable_after_one_call_and_a_resume_sees_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store(tmp_path / "run")
    rs = [result(c) for c in CLAIMS[:3]]
    syncs: list[int] = []
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:
        syncs.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", counting_fsync)
    got = store.record_lines([result_line(r) for r in rs])
    assert len(syncs) == 1  # the group commit: one fsync for the three claims
    assert got == rs
    lines = (tmp_path / "run" / RESULTS_FILE).read_text().splitlines()
    assert [json.loads(x)["id"] for x in lines] == ["c0", "c1", "c2"]
    store.unlock()
    resumed = open_store(tmp_path / "run")  # the same run: reopened, as a resume does
    assert [c.id for c in resumed.remaining()] == ["c3"]
    assert resumed.results_in_order() == rs


def test_record_lines_writes_the_bytes_record_writes(tmp_path: Path) -> None:
    rs = [result(c, reasoning=f'"quoted" \\ é {c.id}\nnext') for c in CLAIMS]
    one = open_store(tmp_path / "one")
    for r in rs:
        one.record(r)
    group = open_store(tmp_path / "group")
    group.record_lines([result_line(r) for r in rs[:1]])
    group.record_lines([result_line(r) for r in rs[1:]])
    a = (tmp_path / "one" / RESULTS_FILE).read_bytes()
    assert a == (tmp_path / "group" / RESULTS_FILE).read_bytes()
    assert group.results_in_order() == one.results_in_order()


def test_a_secret_only_the_recording_process_knows_is_redacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = 'tok-"only-the-driver"-7391'  # with a quote: escaped inside the JSON line
    line = result_line(result(CLAIMS[0], error=f"HTTP 500: echo {secret}"))  # "the worker"
    assert json.loads(line)["error"].endswith(secret)
    monkeypatch.setenv("DRIVER_ONLY_TOKEN", secret)  # "the driver" knows it
    store = open_store(tmp_path / "run")
    got, _ = store.record_lines([line, result_line(result(CLAIMS[1]))])
    text = (tmp_path / "run" / RESULTS_FILE).read_text()
    assert "only-the-driver" not in text
    assert got.error == "HTTP 500: echo ***" and got.termination is Termination.ERROR
    assert RunStore.open(tmp_path / "run").errored["c0"].error == "HTTP 500: echo ***"


@pytest.mark.parametrize(
    "bad",
    ['{"id": "c9"}', "not json", '{"id": "c0"}\n{"id": "c1"}', "[]"],
    ids=["missing-keys", "not-json", "two-lines", "not-an-object"],
)
def test_a_bad_line_writes_nothing(tmp_path: Path, bad: str) -> None:
    store = open_store(tmp_path / "run")
    with pytest.raises(ValueError):
        store.record_lines([result_line(result(CLAIMS[0])), bad])
    assert not (tmp_path / "run" / RESULTS_FILE).exists()
    assert store.results_in_order() == []


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(texts=st.lists(st.text(min_size=1, max_size=60), min_size=1, max_size=4))
def test_any_text_round_trips_through_a_group(tmp_path: Path, texts: list[str]) -> None:
    claims = [Claim(f"k{i}", t, ()) for i, t in enumerate(texts)]
    rs = [result(c, reasoning=t[::-1]) for c, t in zip(claims, texts, strict=True)]
    d = tmp_path / f"run-{abs(hash(tuple(texts)))}"
    store = open_store(d, claims)
    got = store.record_lines([result_line(r) for r in rs])
    store.unlock()
    again = RunStore.open(d).results_in_order()
    # What the store holds is what a resume reads; both equal what `record` would keep
    # (`result_line` redacts key-shaped text, as `record` does).
    assert got == again
    for r, g in zip(rs, got, strict=True):
        assert result_line(g) == result_line(r)


# -- the driver's view: each claim once, completion without rescanning the job ------------------


def oracle_states(tmp_path: Path) -> list[JobState]:
    manifest = write_jobs(tmp_path, 1, 0, oracle=True)
    from veritrail.batch import load_manifest

    jobs = prepare_jobs(manifest, load_manifest(manifest), flags={}, config_path=None, html=False)
    return open_states(jobs, concurrency=2)


def test_job_state_records_each_claim_once_and_knows_when_it_is_complete(tmp_path: Path) -> None:
    (state,) = oracle_states(tmp_path)
    claims = state.store.claims
    assert len(claims) >= 3 and not state.complete()
    first = [(c.id, result_line(result(c))) for c in claims[:2]]
    got = state.record_lines([*first, first[0]])  # a claim sent twice in one group
    assert [r.claim.id for r in got] == [c.id for c in claims[:2]]
    assert state.record_lines(first) == []  # a retried task's replay: nothing written again
    assert not state.complete()
    # The rest: one of them through the per-claim path, which keeps the same count.
    assert state.record(not_started(claims[2], "HTTP 401"))
    rest = [(c.id, result_line(result(c))) for c in claims[3:]]
    state.record_lines(rest)
    assert state.complete()
    counts: dict[str, int] = {}
    for line in (state.store.path / RESULTS_FILE).read_text().splitlines():
        cid = json.loads(line)["id"]
        counts[cid] = counts.get(cid, 0) + 1
    assert counts == {c.id: 1 for c in claims}
    state.store.unlock()
    # Next run: the claim that ended in error is not finished, so that job is not complete.
    (again,) = oracle_states(tmp_path)
    assert [c.id for c in again.todo()] == [claims[2].id] and not again.complete()
    again.record_lines([(claims[2].id, result_line(result(claims[2])))])
    assert again.complete()
    again.store.unlock()


def test_a_line_under_another_claim_id_is_refused(tmp_path: Path) -> None:
    (state,) = oracle_states(tmp_path)
    a, b = state.store.claims[:2]
    with pytest.raises(ValueError, match="do not match"):
        state.record_lines([(a.id, result_line(result(b)))])
    state.store.unlock()


# -- the shard task: what finishes within the interval travels as one item ------------------------


def test_gather_takes_what_is_ready_and_stops_at_urgent_events_and_the_end() -> None:
    async def go() -> None:
        done = object()
        q: asyncio.Queue[Any] = asyncio.Queue()
        for x in [("started", "a"), ("result", "a", "{}"), ("fatal", "HTTP 401"), ("started", "b")]:
            q.put_nowait(x)
        # An hour's interval: returning at all proves the fatal error was sent at once.
        assert await _gather(q, done, 3600) == [
            ("started", "a"),
            ("result", "a", "{}"),
            ("fatal", "HTTP 401"),
        ]
        q.put_nowait(done)
        assert await _gather(q, done, 3600) == [("started", "b"), done]
        q.put_nowait(("started", "c"))
        q.put_nowait(("result", "c", "{}"))
        # No wait: what is ready only.
        assert await _gather(q, done, 0) == [("started", "c"), ("result", "c", "{}")]

    asyncio.run(go())


def test_pack_splits_started_finished_and_other_events() -> None:
    events = [("started", "a"), ("result", "a", "L"), ("notes", ["n"], 3), ("started", "b")]
    assert _pack(events) == (["a", "b"], [("a", "L")], [("notes", ["n"], 3)])


def run_shards(worker: ShardWorker, *shards: tuple[ShardSpec, Any]) -> list[list[Any]]:
    """Run shards at once on one worker, as its Ray actor does (no Ray here): their items."""

    async def one(spec: ShardSpec, dag: Any) -> list[Any]:
        return [item async for item in worker.run_shard(spec, dag)]

    async def go() -> list[list[Any]]:
        return list(await asyncio.gather(*(one(s, d) for s, d in shards)))

    return asyncio.run(go())


def test_a_shard_sends_its_claims_as_one_item_within_the_interval(tmp_path: Path) -> None:
    (state,) = oracle_states(tmp_path)
    job = state.job
    spec = ShardSpec(
        job_id=job.id,
        claims=tuple(state.todo()),
        config=state.config,
        model=None,
        oracle_doc=job.oracle_doc,
        sample_temperature=0.0,
        concurrency=2,
        max_parallel_claims=None,
        prompt_dir=None,
        send_interval=3600,  # every claim finishes well within it: the shard's end sends them
        run="r1",
    )
    worker = ShardWorker()  # the Ray actor's body, run here
    ((item,),) = run_shards(worker, (spec, job.dag))
    started, finished, other = item
    ids = [c.id for c in spec.claims]
    assert sorted(started) == sorted(ids) and sorted(cid for cid, _ in finished) == sorted(ids)
    assert other == []
    # The worker's CPU over the run comes with the run's end (it was a shard's last item).
    assert asyncio.run(worker.end_run("r1")) > 0.0
    assert asyncio.run(worker.end_run("r1")) == 0.0  # nothing left of that run
    got = state.record_lines(finished)
    assert state.complete() and {r.claim.id for r in got} == set(ids)
    for (cid, line), r in zip(finished, got, strict=True):
        assert json.loads(line)["id"] == cid == r.claim.id and result_line(r) == line
    assert all(dataclasses.is_dataclass(r) for r in got)
    state.store.unlock()
