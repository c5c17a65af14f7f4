"""The Ray executor's worker actor body (`ray_worker.ShardWorker`), run here without Ray:
several shards at once over ONE model layer per endpoint, within the worker's call budget, and
a fatal endpoint error met by one shard stops the others on that worker."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from batchkit import responder, write_jobs

from veritrail.batch import load_manifest, open_states, prepare_jobs
from veritrail.batch.jobs import JobState
from veritrail.batch.ray_worker import ShardSpec, ShardWorker
from veritrail.testing.fake_openai_server import FakeOpenAIServer, Fault


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-worker-test")
    monkeypatch.setenv("VERITRAIL_PRICES", "")


def states(tmp: Path, base_url: str, n_jobs: int, n_claims: int) -> list[JobState]:
    manifest = write_jobs(tmp, n_jobs, n_claims)
    flags = {"model": "openai/fake", "base_url": base_url, "cache": "off"}
    jobs = prepare_jobs(
        manifest, load_manifest(manifest), flags=flags, config_path=None, html=False
    )
    return open_states(jobs, concurrency=2)


def spec(st: JobState, concurrency: int) -> ShardSpec:
    return ShardSpec(
        job_id=st.job.id,
        claims=tuple(st.todo()),
        config=st.config,
        model=st.job.model,
        oracle_doc=None,
        sample_temperature=0.0,
        concurrency=concurrency,
        max_parallel_claims=None,
        prompt_dir=None,
        run="r",
    )


def run_at_once(worker: ShardWorker, sts: list[JobState], concurrency: int) -> list[list[Any]]:
    """One shard per job, all at once on `worker` (as its actor runs them); their items."""

    async def one(st: JobState) -> list[Any]:
        return [item async for item in worker.run_shard(spec(st, concurrency), st.job.dag)]

    async def go() -> list[list[Any]]:
        got = list(await asyncio.gather(*(one(st) for st in sts)))
        # Still open here: one provider (one connection pool) for both jobs' shards.
        assert len(worker._runs["r"].pool._shared) == 1
        await worker.end_run("r")
        return got

    return asyncio.run(go())


def test_shards_at_once_share_the_workers_model_layer_and_budget(tmp_path: Path) -> None:
    with FakeOpenAIServer(responder=responder) as srv:
        sts = states(tmp_path, srv.base_url, 2, 5)
        items = run_at_once(ShardWorker(), sts, concurrency=3)
        assert 0 < srv.max_in_flight <= 3  # the worker's share, over both shards
    for st, its in zip(sts, items, strict=True):
        finished = [entry for _, f, _ in its for entry in f]
        assert sorted(cid for cid, _ in finished) == sorted(c.id for c in st.todo())
        got = st.record_lines(finished)
        assert st.complete() and all(r.error is None for r in got)
        st.store.unlock()


def test_a_refusal_in_one_shard_stops_every_shard_on_the_worker(tmp_path: Path) -> None:
    with FakeOpenAIServer(responder=lambda req: Fault.unauthorized()) as srv:
        sts = states(tmp_path, srv.base_url, 2, 5)  # 5 + 6 claims
        items = run_at_once(ShardWorker(), sts, concurrency=2)
        requests = srv.count
    # One claim per call slot started and was refused; the worker's provider sent nothing
    # after that, and the other claims of both shards never started.
    assert requests <= 2
    results = [line for its in items for _, f, _ in its for _, line in f]
    assert len(results) == 11
    assert sum('"not started: ' in line for line in results) >= 11 - 2
    for its in items:  # each shard tells the driver at once
        assert any(o[0] == "fatal" and "401" in o[1] for _, _, other in its for o in other)
    for st in sts:
        st.store.unlock()
