"""The worker side of `--executor ray`: the body of one Ray worker actor (`ShardWorker`) and the
shard it runs (`ShardSpec`). The driver (`ray_executor.RayExecutor`) makes each worker a Ray actor
of this class: Ray ships the class and every shard's spec by module path, so this module is
importable by itself on every node (it never imports `ray`).

* **One model layer per run:** a worker holds ONE model layer per endpoint (`local.ModelPool`:
  the provider and its HTTP connection pool, the response cache, and its part of the concurrency
  budget), shared by every shard of the run it runs, and runs *several shards at once* on its
  event loop, each with the unchanged async engine (`run.execute.verify_until_fatal`). It
  verifies at most `ShardSpec.max_parallel_claims` claims at once over all its shards (the others
  wait unstarted).
* **Each job's DAG** reaches the worker as one Ray object reference per job; the worker
  deserialises it (and builds its sentence index) once while it runs shards of that job.
* **Streaming:** `ShardWorker.run_shard` is a Ray streaming generator: it yields its finished
  claims as they come. Each result travels as its run store line (`run.store.result_line`: the
  report's claim dict, redacted, compact JSON) with the claim id, so the driver neither
  re-encodes nor re-redacts it; what finishes within `send_interval` seconds travels as one
  `Item`. A fatal endpoint error, a failure and the shard's end are sent at once.
* **Fatal endpoint error** (HTTP 401/403, unknown model, no quota): the worker's shared provider
  refuses every later call to that endpoint without sending it, so every shard on that worker
  stops there (its claims are recorded as `not started: …`), and the error goes to the driver.
* **Model cache:** each worker opens the default cache of its own machine (`~/.cache/veritrail`,
  or `VERITRAIL_CACHE_DIR`), unless `--cache FILE` / `--cache-dir DIR` names a shared one.
* **Steps:** a shard builds its job's steps with `run.job.build_steps`, as `veritrail verify`
  does: the job's plugged decomposer, selector or judge (`ShardSpec.plugins`) in place.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from ..dag import Dag
from ..method.config import VerifyConfig
from ..records import Claim, ClaimResult, SelectionIssue
from ..redaction import redact
from ..run.model_spec import ModelSpec
from ..run.store import result_line

TaskHook = Callable[[], None]

SEND_INTERVAL = 0.1
"""Seconds a shard gathers finished claims before it sends them to the driver as one item
(`RayExecutor.send_interval`). Small against a claim's own time (several model calls), large
enough to put several claims into each item and each fsync of the driver."""

Item = tuple[list[str], list[tuple[str, str]], list[tuple[Any, ...]]]
"""What a shard yields: (ids of claims started, [(claim id, results.jsonl line)] of claims
finished, other events: ("fatal", description), ("notes", notes, requests)). Plain lists and
tuples: they pickle faster than dataclasses."""


@dataclass(frozen=True, slots=True)
class ShardSpec:
    """Everything a shard needs besides the DAG (small: it is pickled per shard)."""

    job_id: str
    claims: tuple[Claim, ...]
    config: VerifyConfig
    model: ModelSpec | None
    """None: the job answers from its oracle document."""
    oracle_doc: Any
    sample_temperature: float
    concurrency: int
    """The worker's share of the budget: model calls in flight on one endpoint, over all the
    shards the worker runs."""
    max_parallel_claims: int | None
    """Claims in verification at once on the worker, over all its shards (None: as many as
    `concurrency`: a claim has about one call in flight at a time)."""
    prompt_dir: str | None
    claim_issues: dict[str, list[SelectionIssue]] = field(default_factory=dict)
    """Issues met while extracting the shard's claims (they head each claim's issues)."""
    plugins: tuple[tuple[str, str], ...] = ()
    """The job's plugged steps, (kind, spec), specs as the worker loads them
    (`run.plugins.portable_spec`: a plugin file by its absolute path)."""
    hook: TaskHook | None = None
    """Called in the worker as the shard starts, after it received its inputs (tests use it to
    kill the worker process on a first attempt)."""
    send_interval: float = SEND_INTERVAL
    """See `SEND_INTERVAL`; 0 sends what is ready at once."""
    run: str = ""
    """The batch run the shard belongs to: the worker keeps one model layer per run."""


class _TaskFailed(RuntimeError):
    """A shard's engine stopped outside any claim (e.g. the model could not be built)."""


# Events that go to the driver at once instead of waiting for `send_interval`: a fatal endpoint
# error must stop the driver from starting further shards on that endpoint.
_URGENT = frozenset({"fatal", "failed"})


async def _gather(items: asyncio.Queue[Any], done: object, interval: float) -> list[Any]:
    """The next events to send: waits for one, then takes what is ready or comes within
    `interval` seconds of it, stopping early at the shard's end or an urgent event."""
    ready: list[Any] = []
    x = await items.get()
    deadline = time.monotonic() + interval
    while True:
        ready.append(x)
        if x is done or x[0] in _URGENT:
            return ready
        try:
            x = items.get_nowait()  # ready already: taken even when the interval is over
            continue
        except asyncio.QueueEmpty:
            pass
        # The deadline is checked once the backlog is taken: what is already waiting always
        # joins this item (taking it is quick), and nothing is waited for past the deadline.
        left = deadline - time.monotonic()
        if left <= 0:
            return ready
        try:
            x = await asyncio.wait_for(items.get(), left)
        except TimeoutError:
            return ready


def _pack(events: list[tuple[Any, ...]]) -> Item:
    started: list[str] = []
    results: list[tuple[str, str]] = []
    other: list[tuple[Any, ...]] = []
    for e in events:
        if e[0] == "result":
            results.append((e[1], e[2]))
        elif e[0] == "started":
            started.append(e[1])
        else:
            other.append(e)
    return started, results, other


@dataclass
class _RunLayer:
    """A worker's model layer for one batch run: providers, caches and budget per endpoint
    (`local.ModelPool`), the bound on claims in flight, and the worker's CPU at its start."""

    pool: Any
    claims: asyncio.Semaphore
    cpu0: float


@dataclass
class _HeldDag:
    """A job's DAG and sentence index in a worker, kept while shards of the job run there."""

    dag: Dag
    sentences: Any
    users: int = 0


class ShardWorker:
    """The body of one Ray worker actor (a plain class: the tests drive it without Ray).

    `run_shard` is an async generator (a Ray streaming-generator method): several shards run at
    once on the actor's event loop, over the model layer of their run (`_RunLayer`).
    `end_run` closes that layer and returns the worker's CPU seconds during the run.
    """

    def __init__(self) -> None:
        # Imported here, before any shard: the first shard (and its CPU figure) does not pay
        # for loading the engine.
        from ..lm import registry  # noqa: F401
        from ..method import loop  # noqa: F401
        from . import local  # noqa: F401

        self._runs: dict[str, _RunLayer] = {}
        self._dags: dict[tuple[str, str], _HeldDag] = {}

    def ready(self) -> int:
        """Answers once the worker is up (its process id)."""
        return os.getpid()

    def _layer(self, spec: ShardSpec) -> _RunLayer:
        got = self._runs.get(spec.run)
        if got is None:
            from .local import ModelPool

            # Claims beyond the worker's share of the budget would only wait for a call slot;
            # left unstarted instead, they stay "not started" if the endpoint refuses the run.
            limit = spec.max_parallel_claims or spec.concurrency
            got = _RunLayer(
                pool=ModelPool(spec.concurrency),
                claims=asyncio.Semaphore(limit),
                cpu0=time.process_time(),
            )
            self._runs[spec.run] = got
        return got

    async def _hold(self, spec: ShardSpec, dag: Dag | list[Any]) -> _HeldDag:
        from ..method.segment import SentenceIndex

        key = (spec.run, spec.job_id)
        held = self._dags.get(key)
        if held is None:
            # `dag` is the Dag itself (tests) or [its object reference]: in a list, Ray hands
            # the reference over unresolved, so a worker running several shards of one job
            # deserialises the DAG once, not once per shard.
            got = dag if isinstance(dag, Dag) else await dag[0]
            held = self._dags.get(key)  # another shard of the job may have got it meanwhile
            if held is None:
                held = self._dags[key] = _HeldDag(got, SentenceIndex(got))
        held.users += 1
        return held

    def _release(self, spec: ShardSpec, held: _HeldDag) -> None:
        held.users -= 1
        key = (spec.run, spec.job_id)
        if held.users <= 0 and self._dags.get(key) is held:
            del self._dags[key]

    async def run_shard(self, spec: ShardSpec, dag: Dag | list[Any]) -> AsyncIterator[Item]:
        """Verify one shard, yielding `Item`s, one per `spec.send_interval` at most while claims
        finish: claims started, claims finished (id and run store line), ("fatal",
        description) once the endpoint refused the run, and ("notes", notes, requests) at the
        end."""
        if spec.hook is not None:
            spec.hook()
        layer = self._layer(spec)
        held = await self._hold(spec, dag)
        items: asyncio.Queue[Any] = asyncio.Queue()
        done = object()

        async def engine() -> None:
            from ..run.gcpolicy import engine_gc

            try:
                with engine_gc():  # per shard; concurrent shards share one entry count
                    await _verify_shard(spec, held, layer, items.put_nowait)
            except asyncio.CancelledError:
                raise
            except BaseException as exc:  # noqa: BLE001 - reported to the driver below
                items.put_nowait(("failed", redact(f"{type(exc).__name__}: {exc}")))
            finally:
                items.put_nowait(done)

        task = asyncio.create_task(engine())
        try:
            finished = False
            while not finished:
                ready = await _gather(items, done, spec.send_interval)
                if done in ready:
                    finished = True
                    ready = ready[: ready.index(done)]
                failed = next((i for i, x in enumerate(ready) if x[0] == "failed"), None)
                if failed is not None:
                    if failed:
                        yield _pack(ready[:failed])
                    raise _TaskFailed(ready[failed][1])
                if ready:
                    yield _pack(ready)
        finally:
            if not task.done():  # the shard was cancelled: its claims stop with it
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
            self._release(spec, held)

    async def end_run(self, run: str) -> float:
        """Close the model layer of `run` (connection pools); the worker's CPU seconds since the
        run's first shard here (0.0 when none ran)."""
        layer = self._runs.pop(run, None)
        for key in [k for k in self._dags if k[0] == run]:
            del self._dags[key]
        if layer is None:
            return 0.0
        await layer.pool.aclose()
        return time.process_time() - layer.cpu0


async def _verify_shard(
    spec: ShardSpec, held: _HeldDag, layer: _RunLayer, emit: Callable[[Any], None]
) -> None:
    from ..method.prompting import prompt_dir

    # The shard's job's prompt overrides, for this shard's task only (shards of jobs with
    # different prompt directories share a worker's event loop).
    with prompt_dir(spec.prompt_dir):
        await _verify_shard_claims(spec, held, layer, emit)


async def _verify_shard_claims(
    spec: ShardSpec, held: _HeldDag, layer: _RunLayer, emit: Callable[[Any], None]
) -> None:
    from ..lm.registry import describe_fatal
    from ..method.oracle import Oracle
    from ..run.execute import verify_until_fatal
    from ..run.job import build_steps

    model = None
    pool = layer.pool
    if spec.model is not None:
        # A `Model` wrapper per shard (it accounts cost per claim id, and two jobs may both
        # have a claim `c1`) over the worker's shared provider, cache and budget.
        model = pool.model(spec.model)
    # `veritrail verify`'s steps (the job's plugged ones in place), loaded in this worker over
    # this shard's model; they loaded on the driver before any call, so a failure here is the
    # shard's (its claims stay unrecorded: exit 3, run again).
    steps = build_steps(
        model,
        dict(spec.plugins),
        sample_temperature=spec.sample_temperature,
        oracle=Oracle.from_dict(spec.oracle_doc).steps() if spec.model is None else None,
    )
    told = False

    def fatal() -> Any:
        if spec.model is None:
            return None
        return pool.fatal_of(spec.model, model)

    def stop() -> str | None:
        # A fatal error met by any shard of this worker on the endpoint stops this one too
        # (as `RunContext.fatal_cause` words it).
        exc = fatal()
        return None if exc is None else f"{type(exc).__name__}: {exc.cause}"

    def on_result(r: ClaimResult) -> None:
        nonlocal told
        # Encoded here, in the worker, exactly as the run store writes it (see the module doc).
        emit(("result", r.claim.id, result_line(r)))
        if not told and spec.model is not None:
            exc = fatal()
            if exc is not None:
                told = True
                emit(("fatal", describe_fatal(exc, spec.model.base_url)))

    try:
        await verify_until_fatal(
            held.dag,
            list(spec.claims),
            steps,
            spec.config,
            cause=stop,
            on_start=lambda c: emit(("started", c.id)),
            on_result=on_result,
            max_parallel_claims=layer.claims,
            claim_issues=spec.claim_issues,
            sentences=held.sentences,
        )
    finally:
        if model is not None:
            emit(("notes", list(model.notes), model.stats.requests))
