"""`--executor ray`: claims verified by Ray tasks, one task per (job, shard of claims).

* Each job's DAG goes into Ray's object store once (`ray.put`, when its first shard is
  submitted); every shard task of the job receives the same object reference.
* A task runs the unchanged async engine (`loop.verify_claims`) over its shard with its part of
  the concurrency budget (`--concurrency` split evenly over `--workers`), and *streams* each
  finished claim back (a Ray generator task), so the driver records it in the job's run store as
  it arrives, not when the shard ends. (What is ready at once goes back in one item, so a busy
  task does not pay Ray's per-item cost for every claim.)
* A fatal endpoint error (HTTP 401/403, unknown model, no quota) stops the task that met it (no
  claim of its shard starts any more: `verify_claims` records them as `not started: …`), is
  sent to the driver at once, and the driver submits no further shard of any job using that
  endpoint (their claims are recorded as not started). Tasks already running on that endpoint
  stop at their own first refused call.
* At most `--workers` tasks run at once (the driver keeps that many in flight), so the model
  calls of the whole batch never exceed `--concurrency`.
* A worker process that dies has its task retried by Ray (`--max-task-retries`). The driver
  records each claim once (a retried task may deliver claims already recorded: they are
  dropped), and a task that ends without delivering some of its claims has those claims submitted
  again once. Claims of a task that fails for good stay unrecorded: the job is reported as
  incomplete (exit status 3) and running the same command again verifies just those.
* Model cache: each worker opens the default cache of its own machine (`~/.cache/veritrail`, or
  `VERITRAIL_CACHE_DIR`), unless `--cache FILE` / `--cache-dir DIR` names a shared one.

`ray` is an optional dependency (`pip install 'veritrail[ray]'`); it is imported only here.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..dag import Dag
from ..method.config import VerifyConfig
from ..method.loop import not_started
from ..records import Claim, ClaimResult, SelectionIssue
from ..redaction import redact
from ..report import claim_from_dict, claim_to_dict
from .jobs import JobState, ModelSpec
from .local import Record
from .progress import BatchEvents

TaskHook = Callable[[], None]


class RayUnavailableError(RuntimeError):
    """`ray` is not installed, or the cluster cannot be reached."""


@dataclass(frozen=True, slots=True)
class ShardSpec:
    """Everything a shard task needs besides the DAG (small: it is pickled per task)."""

    job_id: str
    claims: tuple[Claim, ...]
    config: VerifyConfig
    model: ModelSpec | None
    """None: the job answers from its oracle document."""
    oracle_doc: Any
    sample_temperature: float
    concurrency: int
    max_parallel_claims: int | None
    prompt_dir: str | None
    claim_issues: dict[str, list[SelectionIssue]] = field(default_factory=dict)
    """Issues met while extracting the shard's claims (they head each claim's issues)."""
    hook: TaskHook | None = None
    """Called in the worker as the task starts, after it received its inputs (tests use it to
    kill the worker process on a first attempt)."""


class _TaskFailed(RuntimeError):
    """The engine of a shard task stopped outside any claim (e.g. the model could not be built)."""


async def _verify_shard(spec: ShardSpec, dag: Dag, emit: Callable[[Any], None]) -> None:
    from ..lm.registry import describe_fatal
    from ..method.loop import lm_steps, verify_claims
    from ..method.prompting import set_prompt_dir
    from ..method.segment import SentenceIndex
    from .jobs import oracle_steps

    if spec.prompt_dir:
        set_prompt_dir(spec.prompt_dir)
    model = None
    if spec.model is not None:
        model = spec.model.model(
            spec.model.provider(), cache=spec.model.open_cache(), concurrency=spec.concurrency
        )
        steps = lm_steps(model, sample_temperature=spec.sample_temperature)
    else:
        steps = oracle_steps(spec.oracle_doc)
    told = False

    def on_result(r: ClaimResult) -> None:
        nonlocal told
        emit(("result", claim_to_dict(r)))
        if model is not None and model.fatal is not None and not told and spec.model is not None:
            told = True
            emit(("fatal", describe_fatal(model.fatal, spec.model.base_url)))

    try:
        await verify_claims(
            dag,
            list(spec.claims),
            steps,
            spec.config,
            sentences=SentenceIndex(dag),
            on_start=lambda c: emit(("started", c.id)),
            on_result=on_result,
            max_parallel_claims=spec.max_parallel_claims,
            model=model,
            claim_issues=spec.claim_issues,
        )
    finally:
        if model is not None:
            emit(("notes", list(model.notes), model.stats.requests))
            await model.aclose()


def shard_task(spec: ShardSpec, dag: Dag) -> Iterator[list[tuple[Any, ...]]]:
    """The Ray task (a generator): yields lists of items, as many as are ready: ("started",
    claim id), ("result", claim dict) per finished claim, ("fatal", description) once the
    endpoint refused the run, then ("notes", notes, requests) and ("stats", worker CPU seconds
    of this task)."""
    if spec.hook is not None:
        spec.hook()
    cpu0 = time.process_time()
    items: queue.SimpleQueue[Any] = queue.SimpleQueue()
    done = object()

    def run() -> None:
        try:
            asyncio.run(_verify_shard(spec, dag, items.put))
        except BaseException as exc:  # noqa: BLE001 - reported to the driver below
            items.put(("failed", redact(f"{type(exc).__name__}: {exc}")))
        finally:
            items.put(done)

    # The engine runs on its own thread and event loop; this generator hands its results to Ray
    # as they come (a generator task cannot yield from inside asyncio.run).
    thread = threading.Thread(target=run, name=f"veritrail-shard-{spec.job_id}", daemon=True)
    thread.start()
    finished = False
    while not finished:
        ready = [items.get()]
        while not items.empty():
            ready.append(items.get())
        if done in ready:
            finished = True
            ready = ready[: ready.index(done)]
        failed = next((i for i, x in enumerate(ready) if x[0] == "failed"), None)
        if failed is not None:
            if failed:
                yield ready[:failed]
            raise _TaskFailed(ready[failed][1])
        if ready:
            yield ready
    thread.join()
    yield [("stats", time.process_time() - cpu0)]


@dataclass
class _Shard:
    state: JobState
    claims: tuple[Claim, ...]
    resubmitted: bool = False


@dataclass
class _JobRefs:
    dag_ref: Any = None
    open_shards: int = 0
    issues: dict[str, list[SelectionIssue]] = field(default_factory=dict)


@dataclass
class RayStats:
    """What the driver learnt from the tasks (for benchmarks and the summary)."""

    tasks: int = 0
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
    """Runs shard tasks on a Ray cluster (see the module docstring).

    Args:
        address: `auto`, `ray://host:10001` or a GCS address; None starts a local Ray (or uses
            the one this process already started).
        workers: tasks in flight at once (default: the cluster's CPUs).
        concurrency: model calls in flight over the whole batch, split evenly over the workers.
        shard_size: claims per task.
        max_task_retries: Ray retries of a task whose worker died.
        num_cpus: CPUs of a local Ray started here (default: the machine's).
        hook: see `ShardSpec.hook`.
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
    ) -> None:
        if shard_size < 1:
            raise ValueError("shard size must be >= 1")
        self.address = address
        self.workers = workers
        self.concurrency = concurrency
        self.shard_size = shard_size
        self.max_parallel_claims = max_parallel_claims
        self.max_task_retries = max_task_retries
        self.num_cpus = num_cpus
        self.hook = hook
        self.stats = RayStats()

    def connect(self) -> bool:
        """Connect to (or start) Ray; True when this call started or joined it (and shuts it)."""
        ray = _ray()
        if ray.is_initialized():
            return False
        kwargs: dict[str, Any] = {"include_dashboard": False, "logging_level": "WARNING"}
        if self.address:
            kwargs["address"] = self.address
        elif self.num_cpus is not None:
            kwargs["num_cpus"] = self.num_cpus
        try:
            ray.init(**kwargs)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise RayUnavailableError(f"cannot start or reach Ray: {redact(str(exc))}") from None
        return True

    def run(self, states: Sequence[JobState], record: Record, events: BatchEvents) -> None:
        """Verify what each job has left on Ray; `record` is called as each claim arrives."""
        ray = _ray()
        owned = self.connect()
        try:
            self._run(ray, states, record, events)
        finally:
            if owned:
                ray.shutdown()

    def _run(
        self, ray: Any, states: Sequence[JobState], record: Record, events: BatchEvents
    ) -> None:
        workers = self.workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        self.stats.workers = workers
        per_task = max(1, self.concurrency // workers)
        task = ray.remote(shard_task).options(
            max_retries=self.max_task_retries, retry_exceptions=False, num_cpus=1
        )
        pending: deque[_Shard] = deque()
        refs: dict[str, _JobRefs] = {}
        for st in states:
            todo = st.todo()
            for i in range(0, len(todo), self.shard_size):
                pending.append(_Shard(st, tuple(todo[i : i + self.shard_size])))
            refs[st.job.id] = _JobRefs(issues=st.claim_issues())
        in_flight: dict[Any, _Shard] = {}

        def submit(sh: _Shard) -> None:
            job = sh.state.job
            spec_model = None if job.oracle_doc is not None else job.model
            cause = events.fatal_for(spec_model)
            if cause is not None:
                # The endpoint refused another task: this shard never starts.
                sh.state.fatal = sh.state.fatal or cause
                for c in sh.claims:
                    if c.id not in sh.state.recorded:
                        self._deliver(not_started(c, cause), sh, record, events)
                return
            r = refs[job.id]
            if r.dag_ref is None:
                r.dag_ref = ray.put(job.dag)  # once per job, shared by all its shard tasks
            spec = ShardSpec(
                job_id=job.id,
                claims=sh.claims,
                config=sh.state.config,
                model=spec_model,
                oracle_doc=job.oracle_doc,
                sample_temperature=job.settings.sample_temperature,
                concurrency=per_task,
                max_parallel_claims=self.max_parallel_claims,
                prompt_dir=job.settings.prompt_dir,
                claim_issues={c.id: r.issues[c.id] for c in sh.claims if c.id in r.issues},
                hook=self.hook,
            )
            r.open_shards += 1
            self.stats.tasks += 1
            in_flight[task.remote(spec, r.dag_ref)] = sh

        def closed(gen: Any, sh: _Shard) -> None:
            del in_flight[gen]
            r = refs[sh.state.job.id]
            r.open_shards -= 1
            if r.open_shards == 0:
                r.dag_ref = None  # lets Ray free the object once no task holds it

        try:
            while pending or in_flight:
                while pending and len(in_flight) < workers:
                    submit(pending.popleft())
                if not in_flight:
                    continue  # every pending shard was refused (fatal endpoint error)
                # A timeout so the display is refreshed while no claim finishes.
                ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=0.5)
                events.tick()
                for gen in ready:
                    sh = in_flight[gen]
                    try:
                        ref = next(gen)
                    except StopIteration:
                        closed(gen, sh)
                        self._requeue_missing(sh, pending)
                        continue
                    try:
                        item = ray.get(ref)
                    except ray.exceptions.RayError as exc:
                        closed(gen, sh)
                        msg = _task_error(exc)
                        self.stats.failures.append(msg)
                        sh.state.failures.append(msg)
                        continue
                    for one in item:
                        self._handle(one, sh, record, events)
        except BaseException:
            for gen in in_flight:
                with contextlib.suppress(Exception):  # best effort on the way out
                    ray.cancel(gen, force=True)
            raise

    def _deliver(
        self, result: ClaimResult, sh: _Shard, record: Record, events: BatchEvents
    ) -> None:
        if result.claim.id in sh.state.recorded:
            self.stats.duplicates_dropped += 1
            return
        record(sh.state, result)
        events.claim_finished(sh.state.job.id, result, count_cost=True)

    def _handle(
        self, item: tuple[Any, ...], sh: _Shard, record: Record, events: BatchEvents
    ) -> None:
        kind = item[0]
        if kind == "result":
            self._deliver(claim_from_dict(item[1]), sh, record, events)
        elif kind == "started":
            if item[1] not in sh.state.recorded:
                events.claim_started(sh.state.job.id, item[1])
        elif kind == "fatal":
            model = sh.state.job.model
            sh.state.fatal = sh.state.fatal or events.endpoint_failed(model, str(item[1]))
        elif kind == "notes":
            sh.state.notes.extend(item[1])
            self.stats.requests += int(item[2])
        elif kind == "stats":
            self.stats.worker_cpu_seconds += float(item[1])

    def _requeue_missing(self, sh: _Shard, pending: deque[_Shard]) -> None:
        # A retried generator task may skip results it had already streamed before its worker
        # died (Ray replays by position, our claims finish in any order): resubmit those once.
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


def _task_error(exc: BaseException) -> str:
    cause = getattr(exc, "cause", None)
    text = f"{type(cause).__name__}: {cause}" if cause is not None else str(exc)
    first = text.strip().splitlines()[-1] if text.strip() else type(exc).__name__
    return redact(f"a Ray task failed: {first}"[:500])
