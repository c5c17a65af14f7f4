"""`--executor ray`: claims verified by Ray tasks, one task per (job, shard of claims).

* Each job's DAG goes into Ray's object store once (`ray.put`, when its first shard is
  submitted); every shard task of the job receives the same object reference.
* A task runs the unchanged async engine (`loop.verify_claims`) over its shard with its part of
  the concurrency budget (`--concurrency` split evenly over `--workers`), and *streams* the
  finished claims back (a Ray generator task), so the driver records them in the job's run store
  as they arrive, not when the shard ends. The driver records every claim of the batch, so its
  work per claim bounds the whole batch's throughput; to keep it small:

  - the worker encodes each result as its run store line (`run.store.result_line`: the report's
    claim dict, redacted, compact JSON) and sends that text with the claim id: the driver
    neither re-encodes nor re-redacts it (it only checks for the secrets it alone knows);
  - what finishes within `send_interval` seconds (default 0.1) travels as one Ray item (claims
    started, claims finished, anything else), and the driver appends all the claims of an item
    with one write and one fsync (`RunStore.record_lines`, a group commit): Ray's cost per item
    and the fsync are paid per group, not per claim. A fatal endpoint error, a failure and the
    task's end are sent at once.
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
import json
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..dag import Dag
from ..errors import InputProblem
from ..method.config import VerifyConfig
from ..method.loop import not_started
from ..records import Claim, ClaimResult, SelectionIssue
from ..redaction import redact
from ..report import claim_from_dict
from ..run.store import result_line
from .jobs import JobState, ModelSpec
from .local import Record
from .progress import BatchEvents

TaskHook = Callable[[], None]

SEND_INTERVAL = 0.1
"""Seconds a shard task gathers finished claims before it sends them to the driver as one item
(`RayExecutor.send_interval`). Small against a claim's own time (several model calls), large
enough to put several claims into each item and each fsync of the driver."""

Item = tuple[list[str], list[tuple[str, str]], list[tuple[Any, ...]]]
"""What a shard task yields: (ids of claims started, [(claim id, results.jsonl line)] of claims
finished, other events: ("fatal", description), ("notes", notes, requests), ("stats", worker
CPU seconds)). Plain lists and tuples: they pickle faster than dataclasses."""


class RayUnavailableError(InputProblem, RuntimeError):
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
    send_interval: float = SEND_INTERVAL
    """See `SEND_INTERVAL`; 0 sends what is ready at once."""


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
        # Encoded here, in the worker, exactly as the run store writes it (see the module doc).
        emit(("result", r.claim.id, result_line(r)))
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


# Events that go to the driver at once instead of waiting for `send_interval`: a fatal endpoint
# error must stop the driver from starting further shards on that endpoint.
_URGENT = frozenset({"fatal", "failed"})


def _gather(items: queue.SimpleQueue[Any], done: object, interval: float) -> list[Any]:
    """The next events to send: waits for one, then takes what is ready or comes within
    `interval` seconds of it, stopping early at the task's end or an urgent event."""
    ready: list[Any] = []
    x = items.get()
    deadline = time.monotonic() + interval
    while True:
        ready.append(x)
        if x is done or x[0] in _URGENT:
            return ready
        try:
            x = items.get_nowait()  # ready already: taken even when the interval is over
            continue
        except queue.Empty:
            pass
        # The deadline is checked once the backlog is taken: what is already waiting always
        # joins this item (taking it is quick), and nothing is waited for past the deadline.
        left = deadline - time.monotonic()
        if left <= 0:
            return ready
        try:
            x = items.get(timeout=left)
        except queue.Empty:
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


def shard_task(spec: ShardSpec, dag: Dag) -> Iterator[Item]:
    """The Ray task (a generator): yields `Item`s, one per `spec.send_interval` at most while
    claims finish: claims started, claims finished (id and run store line), ("fatal",
    description) once the endpoint refused the run, then ("notes", notes, requests) and
    ("stats", worker CPU seconds of this task)."""
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
        ready = _gather(items, done, spec.send_interval)
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
    thread.join()
    yield [], [], [("stats", time.process_time() - cpu0)]


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
        send_interval: seconds a task gathers finished claims into one item for the driver
            (`SEND_INTERVAL`; 0: what is ready at once).
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
                # As one group: one fsync for the shard, as for the claims a task sends.
                stopped = [
                    (c.id, result_line(not_started(c, cause)))
                    for c in sh.claims
                    if c.id not in sh.state.recorded
                ]
                self._deliver_lines(stopped, sh, record, events)
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
                send_interval=self.send_interval,
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
                    self._handle(item, sh, record, events)
        except BaseException:
            for gen in in_flight:
                with contextlib.suppress(Exception):  # best effort on the way out
                    ray.cancel(gen, force=True)
            raise

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
            elif kind == "stats":
                self.stats.worker_cpu_seconds += float(one[1])

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
