"""The collector policy of a run (`run/gcpolicy.engine_gc`): raised thresholds and a frozen
heap while claims are verified, restored afterwards, counted across nested and concurrent runs,
and in force on every path that verifies (the CLI/API job, the local batch executor, a Ray
worker's shard)."""

from __future__ import annotations

import asyncio
import gc
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import veritrail as vt
import veritrail.method.loop as loop_mod
from veritrail.run import gcpolicy
from veritrail.run.gcpolicy import THRESHOLDS, engine_gc

QS = Path(__file__).resolve().parents[2] / "examples" / "quickstart"


@pytest.fixture(autouse=True)
def _clean_gc() -> Iterator[None]:
    before = gc.get_threshold()
    assert gc.get_freeze_count() == 0
    yield
    gc.set_threshold(*before)
    gc.unfreeze()
    assert not gcpolicy.active()


def test_thresholds_are_raised_inside_and_restored_after() -> None:
    gc.set_threshold(700, 10, 10)
    with engine_gc():
        assert gc.get_threshold() == THRESHOLDS
        assert gc.get_freeze_count() > 0  # what was alive is frozen
        assert gcpolicy.active()
    assert gc.get_threshold() == (700, 10, 10)
    assert gc.get_freeze_count() == 0


def test_nested_and_concurrent_uses_restore_only_at_the_last_exit() -> None:
    gc.set_threshold(700, 10, 10)

    async def shard(started: asyncio.Event, go: asyncio.Event) -> None:
        with engine_gc():
            started.set()
            await go.wait()

    async def main() -> None:
        s1, s2, go1, go2 = (asyncio.Event() for _ in range(4))
        t1 = asyncio.create_task(shard(s1, go1))
        await s1.wait()
        frozen = gc.get_freeze_count()
        t2 = asyncio.create_task(shard(s2, go2))
        await s2.wait()
        # The second entry freezes nothing more (refcounting may free a frozen object or two).
        assert 0 < gc.get_freeze_count() <= frozen
        go1.set()
        await t1
        assert gc.get_threshold() == THRESHOLDS  # the second shard still runs
        assert 0 < gc.get_freeze_count() <= frozen
        go2.set()
        await t2

    asyncio.run(main())
    assert gc.get_threshold() == (700, 10, 10)
    assert gc.get_freeze_count() == 0


def test_an_applications_own_policy_is_kept() -> None:
    gc.set_threshold(50_000, 5, 100)  # higher young threshold: kept; lower middle one: raised
    with engine_gc():
        assert gc.get_threshold() == (50_000, THRESHOLDS[1], 100)
    assert gc.get_threshold() == (50_000, 5, 100)

    gc.set_threshold(0)  # automatic collection off: stays off
    with engine_gc():
        assert gc.get_threshold()[0] == 0
    gc.set_threshold(700, 10, 10)

    mine = [object() for _ in range(3)]
    gc.freeze()  # the application froze its own heap: we neither freeze nor unfreeze
    n = gc.get_freeze_count()
    assert n > 10_000  # the whole heap: an unfreeze would show
    # Young objects a freeze by us would add: 20,000 more frozen objects if we froze. Not an
    # exact count: a thread left by an earlier test in this process may free a frozen object or
    # two meanwhile (refcounting), which lowers the count a little; an unfreeze empties it.
    young = [[] for _ in range(20_000)]
    with engine_gc():
        assert n - 1_000 <= gc.get_freeze_count() <= n
    assert n - 1_000 <= gc.get_freeze_count() <= n
    del mine, young


def test_an_exception_inside_still_restores() -> None:
    gc.set_threshold(700, 10, 10)
    with pytest.raises(RuntimeError), engine_gc():
        raise RuntimeError("boom")
    assert gc.get_threshold() == (700, 10, 10) and gc.get_freeze_count() == 0


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int, int]]:
    """The thresholds in force each time the engine's `verify_claims` runs."""
    got: list[tuple[int, int, int]] = []
    real = loop_mod.verify_claims

    async def spy(*args: Any, **kwargs: Any) -> Any:
        got.append(gc.get_threshold())
        return await real(*args, **kwargs)

    monkeypatch.setattr(loop_mod, "verify_claims", spy)
    return got


def test_a_verify_run_verifies_under_the_policy(
    tmp_path: Path, seen: list[tuple[int, int, int]]
) -> None:
    gc.set_threshold(700, 10, 10)
    qs = tmp_path / "qs"
    shutil.copytree(QS, qs)
    report = vt.verify(qs / "dag.json", qs / "claims.json", oracle=qs / "oracle.json")
    assert report.ok
    assert seen == [THRESHOLDS]
    assert gc.get_threshold() == (700, 10, 10) and gc.get_freeze_count() == 0


def test_batch_executors_verify_under_the_policy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seen: list[tuple[int, int, int]]
) -> None:
    from veritrail.batch import LocalExecutor, load_manifest, open_states, prepare_jobs, run_batch
    from veritrail.batch.ray_worker import ShardSpec, ShardWorker

    gc.set_threshold(700, 10, 10)
    monkeypatch.chdir(tmp_path)
    qs = tmp_path / "qs"
    shutil.copytree(QS, qs)
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(
        '{"id": "a", "dag": "qs/dag.json", "claims": "qs/claims.json",'
        ' "oracle": "qs/oracle.json", "out": "a.json"}\n'
    )
    jobs = prepare_jobs(manifest, load_manifest(manifest), flags={}, config_path=None, html=False)
    run_batch(
        jobs,
        LocalExecutor(concurrency=2),
        manifest=str(manifest),
        summary_dir=tmp_path / "sum",
        concurrency=2,
    )
    assert seen == [THRESHOLDS]  # via batch/local.py, which holds its own reference
    assert gc.get_threshold() == (700, 10, 10)

    # A Ray worker's shard (the actor body, driven without Ray as the executor's tests do), in
    # a fresh runs directory (the first one holds the finished run).
    flags = {"runs_dir": str(tmp_path / "runs2")}
    jobs = prepare_jobs(
        manifest, load_manifest(manifest), flags=flags, config_path=None, html=False
    )
    (st,) = open_states(jobs, concurrency=2)
    spec = ShardSpec(
        job_id=st.job.id,
        claims=tuple(st.todo()),
        config=st.config,
        model=None,
        oracle_doc=st.job.oracle_doc,
        sample_temperature=0.0,
        concurrency=2,
        max_parallel_claims=None,
        prompt_dir=None,
        run="r",
    )

    async def shard() -> list[Any]:
        return [item async for item in ShardWorker().run_shard(spec, st.job.dag)]

    items = asyncio.run(shard())
    assert sum(len(finished) for _, finished, _ in items) == 4
    assert seen[-1] == THRESHOLDS
    assert gc.get_threshold() == (700, 10, 10) and gc.get_freeze_count() == 0
    st.store.unlock()
