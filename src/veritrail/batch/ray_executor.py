"""`--executor ray`: claims verified by long-lived Ray worker actors, fed shards of claims.

* **Workers:** one Ray async actor per worker (`--workers`, default: the cluster's CPUs; each
  takes one CPU), alive for the whole batch. A worker holds ONE model layer per endpoint
  (`local.ModelPool`: the provider and its HTTP connection pool, the response cache, and its
  part of the concurrency budget, `--concurrency` split evenly over the workers), shared by
  every shard it runs, and runs *several shards at once* on its event loop, each with the
  unchanged async engine (`loop.verify_claims`). A worker verifies at most
  `--max-parallel-claims` claims at once over all its shards (default: its share of the budget,
  as a claim has about one call in flight at a time; the others wait unstarted).
* **Feeding:** the driver hands a worker another shard (one job's next `--shard-size` claims)
  while the worker's unfinished claims are fewer than twice its share of the budget, or while
  it has fewer than two shards (`FEED_FACTOR`, `FEED_SHARDS`), and below its fair share of the
  claims left (those left over the workers): the next shard starts while the last claims of
  the previous ones drain, so the worker's budget stays busy, many small jobs fill it
  together, and a worker that comes up first does not take the others' work. The model layer's semaphore keeps the calls of one worker within its
  share at all times, so the calls of the whole batch never exceed `--concurrency`.
  A worker is fed only once it is up (its `ready` call answered): workers that a cluster cannot
  place (more workers than CPUs) get no shard.
* **Each job's DAG** goes into Ray's object store once (`ray.put`, when its first shard is
  submitted); every shard of the job receives the same object reference, and a worker
  deserialises it (and builds its sentence index) once while it runs shards of that job.
* **Streaming:** a shard is a Ray streaming-generator call on its worker: it sends its finished
  claims back as they come, so the driver records them in the job's run store at once, not when
  the shard ends. The driver records every claim of the batch, so its work per claim bounds the
  whole batch's throughput; to keep it small:

  - the worker encodes each result as its run store line (`run.store.result_line`: the report's
    claim dict, redacted, compact JSON) and sends that text with the claim id: the driver
    neither re-encodes nor re-redacts it (it only checks for the secrets it alone knows);
  - what finishes within `send_interval` seconds (default 0.1) travels as one Ray item (claims
    started, claims finished, anything else), and the driver appends all the claims of an item
    with one write and one fsync (`RunStore.record_lines`, a group commit): Ray's cost per item
    and the fsync are paid per group, not per claim. A fatal endpoint error, a failure and the
    shard's end are sent at once.
* **Fatal endpoint error** (HTTP 401/403, unknown model, no quota): the worker's shared provider
  refuses every later call to that endpoint without sending it (every shard on that worker
  stops there: no claim of theirs starts any more, they are recorded as `not started: …`); the
  error is sent to the driver at once, and the driver submits no further shard of any job using
  that endpoint (their claims are recorded as not started). Other workers stop at their own
  first refused call.
* **Worker death:** a worker process that dies is restarted by Ray (`max_restarts`) and its
  unfinished shards are run again (`max_task_retries`, `--max-task-retries`). The driver
  records each claim once (a retried shard may deliver claims already recorded: they are
  dropped), and a shard that ends without delivering some of its claims has those claims
  submitted again once. Claims of a shard that fails for good stay unrecorded: the job is
  reported as incomplete (exit status 3) and running the same command again verifies just those.
* **Model cache:** each worker opens the default cache of its own machine (`~/.cache/veritrail`,
  or `VERITRAIL_CACHE_DIR`), unless `--cache FILE` / `--cache-dir DIR` names a shared one.

* **Starting:** a cluster to join (`--ray-address`, `RAY_ADDRESS`, `auto`) is reached first,
  before any model call (`RayUnreachableError`, exit 3, instead of Ray's retries for many
  minutes). A local Ray started here ends with the driver, even after `kill -9`: a watchdog
  process ends what Ray's own fate-sharing leaves running (the raylet's agents).
* **Steps:** a shard builds its job's steps with `run.job.build_steps`, as `veritrail verify`
  does: the job's plugged decomposer, selector or judge (`ShardSpec.plugins`) in place.

`ray` is an optional dependency (`pip install 'veritrail[ray]'`); it is imported only here.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..dag import Dag
from ..errors import InputProblem, RunFailure
from ..method.config import VerifyConfig
from ..method.loop import not_started
from ..records import Claim, ClaimResult, SelectionIssue
from ..redaction import redact
from ..report import claim_from_dict
from ..run.model_spec import ModelSpec
from ..run.plugins import portable_spec
from ..run.store import result_line
from .jobs import JobState
from .local import Record
from .progress import BatchEvents

TaskHook = Callable[[], None]

SEND_INTERVAL = 0.1
"""Seconds a shard gathers finished claims before it sends them to the driver as one item
(`RayExecutor.send_interval`). Small against a claim's own time (several model calls), large
enough to put several claims into each item and each fsync of the driver."""

FEED_FACTOR = 2
"""The driver feeds a worker while its unfinished claims are fewer than this many times its
share of the concurrency budget (a claim has about one call in flight at a time)..."""

FEED_SHARDS = 2
"""... or while it has fewer than this many shards: the next one is there when one drains."""

Item = tuple[list[str], list[tuple[str, str]], list[tuple[Any, ...]]]
"""What a shard yields: (ids of claims started, [(claim id, results.jsonl line)] of claims
finished, other events: ("fatal", description), ("notes", notes, requests)). Plain lists and
tuples: they pickle faster than dataclasses."""


class RayUnavailableError(InputProblem, RuntimeError):
    """`ray` is not installed, or a local Ray cannot be started (exit 2)."""


class RayUnreachableError(RunFailure, RuntimeError):
    """The Ray cluster named (`--ray-address`, `RAY_ADDRESS`, or `auto`'s latest cluster)
    cannot be reached: found up front, before any model call, instead of waiting for Ray's own
    retries, which go on for many minutes (exit 3: the run could not go on)."""


PROBE_SECONDS = 10.0
"""How long the driver tries to open a connection to the cluster's address before it gives up."""


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


@dataclass
class _Shard:
    state: JobState
    claims: tuple[Claim, ...]
    resubmitted: bool = False
    left: int = 0
    """Claims of this shard not yet delivered (what the worker still has to do)."""


@dataclass
class _Worker:
    """The driver's view of one worker actor."""

    handle: Any
    ready_ref: Any = None
    """The pending `ready` call; None once the worker answered (it is fed from then on)."""
    alive: bool = True
    shards: dict[Any, _Shard] = field(default_factory=dict)

    def unfinished(self) -> int:
        return sum(sh.left for sh in self.shards.values())


@dataclass
class _JobRefs:
    dag_ref: Any = None
    open_shards: int = 0
    issues: dict[str, list[SelectionIssue]] = field(default_factory=dict)


@dataclass
class RayStats:
    """What the driver learnt from the workers (for benchmarks and the summary)."""

    tasks: int = 0
    """Shards submitted to workers (each one Ray actor task)."""
    shards_refused: int = 0
    """Shards never submitted: their endpoint had refused the run (fatal endpoint error)."""
    retried_claims: int = 0
    duplicates_dropped: int = 0
    worker_cpu_seconds: float = 0.0
    requests: int = 0
    workers: int = 0
    failures: list[str] = field(default_factory=list)


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise RayUnavailableError(
            "--executor ray needs Ray: pip install 'veritrail[ray]' (or pip install ray)"
        ) from None
    return ray


class RayExecutor:
    """Runs shards of claims on long-lived Ray worker actors (see the module docstring).

    Args:
        address: `auto`, `ray://host:10001` or a GCS address; None starts a local Ray (or uses
            the one this process already started).
        workers: worker actors (default: the cluster's CPUs); each takes one CPU.
        concurrency: model calls in flight over the whole batch, split evenly over the workers.
        shard_size: claims per shard (the unit of feeding and of retry).
        max_parallel_claims: claims in verification at once per worker (None: its share of
            `concurrency`).
        max_task_retries: Ray restarts of a worker that died, and retries of its shards.
        num_cpus: CPUs of a local Ray started here (default: the machine's).
        hook: see `ShardSpec.hook`.
        send_interval: seconds a shard gathers finished claims into one item for the driver
            (`SEND_INTERVAL`; 0: what is ready at once).
        keep_workers: keep the worker actors after `run` for the next `run` of this executor
            (benchmarks: warm workers); `close()` ends them. Otherwise each `run` ends its own.
    """

    name = "ray"

    def __init__(
        self,
        *,
        address: str | None = None,
        workers: int | None = None,
        concurrency: int = 8,
        shard_size: int = 100,
        max_parallel_claims: int | None = None,
        max_task_retries: int = 3,
        num_cpus: int | None = None,
        hook: TaskHook | None = None,
        send_interval: float = SEND_INTERVAL,
        keep_workers: bool = False,
    ) -> None:
        if shard_size < 1:
            raise ValueError("shard size must be >= 1")
        if send_interval < 0:
            raise ValueError("send interval must be >= 0")
        self.address = address
        self.workers = workers
        self.concurrency = concurrency
        self.shard_size = shard_size
        self.max_parallel_claims = max_parallel_claims
        self.max_task_retries = max_task_retries
        self.num_cpus = num_cpus
        self.hook = hook
        self.send_interval = send_interval
        self.keep_workers = keep_workers
        self.stats = RayStats()
        self._actors: list[Any] = []
        self._started = False
        self._owned = False
        """This executor started or joined Ray (and shuts it down in `stop`)."""
        self._watchdog: _Watchdog | None = None

    def connect(self) -> bool:
        """Connect to (or start) Ray; True when this call started or joined it (and shuts it).

        A cluster to join is reached up front (`RayUnreachableError`, within `PROBE_SECONDS`).
        A local Ray started here gets a watchdog (`_Watchdog`) that ends its processes if this
        process dies without shutting it down (`kill -9`)."""
        ray = _ray()
        if ray.is_initialized():
            return False
        kwargs: dict[str, Any] = {"include_dashboard": False, "logging_level": "WARNING"}
        if self.address:
            kwargs["address"] = self.address
        elif self.num_cpus is not None:
            kwargs["num_cpus"] = self.num_cpus
        target = _cluster_address(self.address)
        if target is not None:
            _probe(target)
        before = _child_pids()
        try:
            ray.init(**kwargs)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            if target is not None:
                raise RayUnreachableError(
                    f"cannot reach the Ray cluster at {target.shown}: {redact(str(exc))}"
                ) from None
            raise RayUnavailableError(f"cannot start Ray: {redact(str(exc))}") from None
        if target is None:
            started = sorted(_child_pids() - before)
            if started:  # none: `ray.init` joined a cluster it found itself
                self._watchdog = _Watchdog.start(ray, started)
        return True

    def start(self) -> None:
        """Reach (or start) Ray before any model call (`driver.run_batch` calls it once the jobs
        are checked); `run` calls it too. Idempotent; `stop` undoes it."""
        if not self._started:
            self._owned = self.connect()
            self._started = True

    def stop(self) -> None:
        """Undo `start`: end the workers (unless kept, on a Ray this executor did not start) and
        shut down a Ray it started or joined, with its watchdog. Idempotent."""
        if not self._started:
            return
        self._started = False
        if self._owned or not self.keep_workers:
            self.close()
        if self._owned:
            self._owned = False
            _ray().shutdown()
        if self._watchdog is not None:
            self._watchdog.stop()
            self._watchdog = None

    def run(self, states: Sequence[JobState], record: Record, events: BatchEvents) -> None:
        """Verify what each job has left on Ray; `record` is called as each claim arrives."""
        ray = _ray()
        self.start()
        try:
            self._run(ray, states, record, events)
        finally:
            self.stop()

    def close(self) -> None:
        """End the worker actors kept by this executor (if any)."""
        if not self._actors:
            return
        ray = _ray()
        for a in self._actors:
            with contextlib.suppress(Exception):  # best effort: it may be dead already
                ray.kill(a, no_restart=True)
        self._actors = []

    def _actors_for(self, ray: Any, n: int) -> list[Any]:
        actor = ray.remote(ShardWorker).options(
            num_cpus=1,
            max_restarts=self.max_task_retries,
            max_task_retries=self.max_task_retries,
        )
        while len(self._actors) < n:
            self._actors.append(actor.remote())
        return self._actors[:n]

    def _run(
        self, ray: Any, states: Sequence[JobState], record: Record, events: BatchEvents
    ) -> None:
        n = self.workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        self.stats = RayStats(workers=n)
        per_worker = max(1, self.concurrency // n)
        target = FEED_FACTOR * per_worker
        run_id = uuid.uuid4().hex
        workers = [_Worker(h, ready_ref=h.ready.remote()) for h in self._actors_for(ray, n)]
        pending: deque[_Shard] = deque()
        refs: dict[str, _JobRefs] = {}
        for st in states:
            todo = st.todo()
            for i in range(0, len(todo), self.shard_size):
                pending.append(_Shard(st, tuple(todo[i : i + self.shard_size])))
            refs[st.job.id] = _JobRefs(issues=st.claim_issues())
        owner: dict[Any, _Worker] = {}
        """Each shard in flight (its generator) → its worker."""

        def refused(sh: _Shard) -> bool:
            job = sh.state.job
            spec_model = job.model if job.uses_model else None
            cause = events.fatal_for(spec_model)
            if cause is None:
                return False
            # The endpoint refused another shard: this one never starts.
            self.stats.shards_refused += 1
            sh.state.fatal = sh.state.fatal or cause
            # As one group: one fsync for the shard, as for the claims a worker sends.
            stopped = [
                (c.id, result_line(not_started(c, cause)))
                for c in sh.claims
                if c.id not in sh.state.recorded
            ]
            self._deliver_lines(stopped, sh, record, events)
            return True

        def submit(w: _Worker, sh: _Shard) -> None:
            job = sh.state.job
            r = refs[job.id]
            if r.dag_ref is None:
                r.dag_ref = ray.put(job.dag)  # once per job, shared by all its shards
            spec = ShardSpec(
                job_id=job.id,
                claims=sh.claims,
                config=sh.state.config,
                model=job.model if job.uses_model else None,
                oracle_doc=job.oracle_doc,
                sample_temperature=job.settings.sample_temperature,
                concurrency=per_worker,
                max_parallel_claims=self.max_parallel_claims,
                prompt_dir=job.settings.prompt_dir,
                claim_issues={c.id: r.issues[c.id] for c in sh.claims if c.id in r.issues},
                plugins=tuple((k, portable_spec(v)) for k, v in job.plugins.items()),
                hook=self.hook,
                send_interval=self.send_interval,
                run=run_id,
            )
            r.open_shards += 1
            self.stats.tasks += 1
            sh.left = len(sh.claims)
            # In a list: the worker receives the reference itself (see `ShardWorker._hold`).
            gen = w.handle.run_shard.remote(spec, [r.dag_ref])
            w.shards[gen] = sh
            owner[gen] = w

        def feed() -> None:
            while pending:
                alive = [w for w in workers if w.alive]
                # A fair share of what is left: a worker that comes up first must not take
                # the shards another one (placed, or still starting) would run at once.
                left = sum(len(sh.claims) for sh in pending) + sum(w.unfinished() for w in alive)
                fair = -(-left // max(1, len(alive)))
                wanting = [
                    w
                    for w in alive
                    if w.ready_ref is None
                    and w.unfinished() < fair
                    and (w.unfinished() < target or len(w.shards) < FEED_SHARDS)
                ]
                if not wanting:
                    return
                sh = pending.popleft()
                if not refused(sh):
                    submit(min(wanting, key=_Worker.unfinished), sh)

        def closed(gen: Any) -> _Shard:
            w = owner.pop(gen)
            sh = w.shards.pop(gen)
            r = refs[sh.state.job.id]
            r.open_shards -= 1
            if r.open_shards == 0:
                r.dag_ref = None  # lets Ray free the object once no worker holds it
            return sh

        def lost(reason: str) -> None:
            # No worker left to run what is pending: those claims stay unrecorded (exit 3).
            while pending:
                sh = pending.popleft()
                if refused(sh):
                    continue
                msg = f"{len(sh.claims)} claim(s) of job {sh.state.job.id} not run: {reason}"
                self.stats.failures.append(msg)
                sh.state.failures.append(msg)

        try:
            while pending or owner:
                feed()
                waiting = [w.ready_ref for w in workers if w.alive and w.ready_ref is not None]
                if not owner and not waiting:
                    if pending and not any(w.alive for w in workers):
                        lost("every Ray worker died")
                    continue  # every pending shard was refused (fatal endpoint error)
                # A timeout so the display is refreshed while no claim finishes.
                ready, _ = ray.wait([*owner, *waiting], num_returns=1, timeout=0.5)
                events.tick()
                for x in ready:
                    if x not in owner:  # a worker's `ready` answer: it is fed from now on
                        w = next(w for w in workers if w.ready_ref is not None and w.ready_ref == x)
                        try:
                            ray.get(x)
                        except ray.exceptions.RayError as exc:
                            w.alive = False
                            self.stats.failures.append(_task_error(exc, "a Ray worker"))
                        w.ready_ref = None
                        continue
                    sh = owner[x].shards[x]
                    try:
                        ref = next(x)
                    except StopIteration:
                        closed(x)
                        self._requeue_missing(sh, pending)
                        continue
                    try:
                        item = ray.get(ref)
                    except ray.exceptions.RayError as exc:
                        wk = owner[x]
                        closed(x)
                        if isinstance(exc, ray.exceptions.ActorDiedError):
                            wk.alive = False  # for good (restarts used up): feed it no more
                        msg = _task_error(exc, "a Ray task")
                        self.stats.failures.append(msg)
                        sh.state.failures.append(msg)
                        continue
                    sh.left = max(0, sh.left - len(item[1]))
                    self._handle(item, sh, record, events)
        except BaseException:
            self.close()  # ends every shard in flight with its worker
            raise
        finally:
            self._end_run(ray, workers, run_id)

    def _end_run(self, ray: Any, workers: Sequence[_Worker], run_id: str) -> None:
        if not self._actors:
            return  # killed on the way out
        # Only workers that are up: one the cluster never placed would not answer.
        calls = [
            w.handle.end_run.remote(run_id) for w in workers if w.alive and w.ready_ref is None
        ]
        with contextlib.suppress(Exception):  # best effort: only a figure and closing pools
            for cpu in ray.get(calls, timeout=30):
                self.stats.worker_cpu_seconds += float(cpu)

    def _handle(self, item: Item, sh: _Shard, record: Record, events: BatchEvents) -> None:
        started, finished, other = item
        st = sh.state
        for cid in started:
            if cid not in st.recorded:
                events.claim_started(st.job.id, cid)
        if finished:
            self._deliver_lines(finished, sh, record, events)
        for one in other:
            kind = one[0]
            if kind == "fatal":
                st.fatal = st.fatal or events.endpoint_failed(st.job.model, str(one[1]))
            elif kind == "notes":
                st.notes.extend(one[1])
                self.stats.requests += int(one[2])

    def _deliver_lines(
        self,
        finished: Sequence[tuple[str, str]],
        sh: _Shard,
        record: Record,
        events: BatchEvents,
    ) -> None:
        st = sh.state
        fresh = [(cid, line) for cid, line in finished if cid not in st.recorded]
        self.stats.duplicates_dropped += len(finished) - len(fresh)
        if not fresh:
            return
        lines = getattr(record, "lines", None)
        if lines is not None:
            # One write and one fsync for the whole group (`JobState.record_lines`).
            results: Sequence[ClaimResult] = lines(st, fresh)
        else:  # a plain `Record` callable: one claim at a time
            results = [claim_from_dict(json.loads(line)) for _, line in fresh]
            for r in results:
                record(st, r)
        for r in results:
            events.claim_finished(st.job.id, r, count_cost=True)

    def _requeue_missing(self, sh: _Shard, pending: deque[_Shard]) -> None:
        # A retried generator may skip results it had already streamed before its worker died
        # (Ray replays by position, our claims finish in any order): resubmit those once.
        missing = tuple(c for c in sh.claims if c.id not in sh.state.recorded)
        if not missing:
            return
        if sh.resubmitted:
            msg = f"{len(missing)} claim(s) of job {sh.state.job.id} got no result from Ray"
            self.stats.failures.append(msg)
            sh.state.failures.append(msg)
            return
        self.stats.retried_claims += len(missing)
        pending.append(_Shard(sh.state, missing, resubmitted=True))


def _task_error(exc: BaseException, what: str) -> str:
    cause = getattr(exc, "cause", None)
    text = f"{type(cause).__name__}: {cause}" if cause is not None else str(exc)
    first = text.strip().splitlines()[-1] if text.strip() else type(exc).__name__
    return redact(f"{what} failed: {first}"[:500])


# -- reaching a cluster, and a local Ray that dies with its driver ---------------------------------


@dataclass(frozen=True, slots=True)
class _Target:
    """The address of the cluster `ray.init` would join."""

    host: str
    port: int
    shown: str
    """The address as the user gave it (and as Ray resolves it, when that differs)."""


def _parse_address(hostport: str, shown: str) -> _Target:
    host, sep, port = hostport.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise RayUnavailableError(f"Ray address {shown!r} is not host:port (or ray://host:port)")
    return _Target(host.strip("[]"), int(port), shown)


def _cluster_address(address: str | None) -> _Target | None:
    """Where `ray.init(address=address)` would connect; None when it would start a local Ray.

    `RAY_ADDRESS` and `auto` (the latest `ray start` cluster) are resolved as Ray resolves them
    (`ray._private.services.canonicalize_bootstrap_address`; when this Ray has no such function,
    only an address given as such is probed)."""
    given = address or os.environ.get("RAY_ADDRESS") or None
    if given is not None and given.startswith("ray://"):
        return _parse_address(given[len("ray://") :], given)
    try:
        services: Any = __import__("ray._private.services", fromlist=["services"])
        canonicalize = services.canonicalize_bootstrap_address
    except (ImportError, AttributeError):
        canonicalize = None
    if canonicalize is None:
        if given is None or given == "auto":
            return None
        return _parse_address(given, given)
    try:
        found = canonicalize(address)
    except ConnectionError as exc:  # `auto`, and no cluster is running
        raise RayUnreachableError(f"cannot reach a Ray cluster ({given}): {exc}") from None
    except ValueError as exc:
        raise RayUnavailableError(f"Ray address {given!r}: {exc}") from None
    if not found:
        return None
    found = str(found)
    shown = found if given in (None, "auto", found) else f"{given} ({found})"
    if given is None:
        shown += " (the latest cluster started with `ray start`)"
    return _parse_address(found, shown)


def _probe(target: _Target) -> None:
    """Open (and close) a connection to the cluster's address; `RayUnreachableError` naming the
    cause when that fails. A refused port or an unknown host is seen at once, a host that does
    not answer after `PROBE_SECONDS`: `ray.init` would keep retrying for many minutes."""
    import socket

    try:
        with socket.create_connection((target.host, target.port), timeout=PROBE_SECONDS):
            pass
    except OSError as exc:
        why = (
            f"no answer within {PROBE_SECONDS:.0f} s"
            if isinstance(exc, TimeoutError)
            else (exc.strerror or str(exc) or type(exc).__name__)
        )
        raise RayUnreachableError(
            f"cannot reach the Ray cluster at {target.shown}: {why}. Is it running (`ray status` "
            "on its head node)? Check --ray-address (or RAY_ADDRESS)"
        ) from None


def _child_pids() -> set[int]:
    """The process ids of this process's children (psutil is in the `ray` extra)."""
    import psutil

    try:
        return {int(p.pid) for p in psutil.Process().children()}
    except psutil.Error:  # only a guard's input: without it there is no guard
        return set()


# Runs as `python -c` beside the driver (argv: the read end of a pipe from the driver, the pids
# Ray started). Ray kills the processes the driver started when the
# driver dies (`PR_SET_PDEATHSIG`), but not what those started in turn: the raylet's agents
# (`ray::DashboardAgent`, `ray::RuntimeEnvAgent`) wait about a minute for the dead GCS before
# they exit. The watchdog keeps a list of Ray's processes and their descendants (each second);
# when the driver is gone (the pipe ends: the driver closed it after `ray.shutdown`, or died, even
# by `kill -9`; or the watchdog's parent changed), it ends what is left of them: SIGTERM, then
# SIGKILL after 5 s. psutil's process objects are checked against pid reuse.
_WATCHDOG_SOURCE = """
import os, signal, sys, threading
signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: outlive it
import psutil  # declared by the `ray` extra
fd = int(sys.argv[1])
roots = [int(x) for x in sys.argv[2:]]
parent = os.getppid()
seen = {}
def look():
    for pid in roots:
        try:
            top = psutil.Process(pid)
            for p in [top, *top.children(recursive=True)]:
                seen.setdefault(p.pid, p)
        except psutil.Error:
            pass
gone = threading.Event()
def wait():
    try:
        while os.read(fd, 1):
            pass
    finally:
        gone.set()
threading.Thread(target=wait, daemon=True).start()
look()
while not gone.wait(1.0) and os.getppid() == parent:
    look()
left = []
for p in seen.values():
    try:
        if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
            p.terminate()
            left.append(p)
    except psutil.Error:
        pass
_, alive = psutil.wait_procs(left, timeout=5)
for p in alive:
    try:
        p.kill()
    except psutil.Error:
        pass
"""


class _Watchdog:
    """The watchdog process of a local Ray this driver started (see `_WATCHDOG_SOURCE`)."""

    def __init__(self, proc: subprocess.Popen[bytes], fd: int) -> None:
        self._proc = proc
        self._fd: int | None = fd

    @classmethod
    def start(cls, ray: Any, pids: Sequence[int]) -> _Watchdog | None:
        """Watch the processes `pids` (what `ray.init` started) and their descendants; None
        where there is no watchdog (not POSIX, or it cannot be started: Ray's own cleanup
        then applies)."""
        if os.name != "posix":
            return None
        r, w = os.pipe()  # not inherited by what this process starts later (close-on-exec)
        try:
            proc = subprocess.Popen(
                [sys.executable, "-c", _WATCHDOG_SOURCE, str(r), *map(str, pids)],
                pass_fds=(r,),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        except OSError:
            os.close(w)
            return None
        finally:
            os.close(r)
        return cls(proc, w)

    def stop(self) -> None:
        """After `ray.shutdown()`: let the watchdog end what is left, and wait for it."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
        try:
            self._proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
