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
* **The worker side** (`ShardWorker`, `ShardSpec`: what runs in each actor) is `ray_worker`'s;
  reaching Ray (joining a cluster, or starting a local Ray that ends with the driver, even after
  `kill -9`) is `ray_cluster`'s, the only module that imports `ray`
  (`pip install 'veritrail[ray]'`).
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..method.loop import not_started
from ..records import Claim, ClaimResult, SelectionIssue
from ..redaction import redact
from ..report import claim_from_dict
from ..run.plugins import portable_spec
from ..run.store import result_line
from .jobs import JobState
from .local import Record
from .progress import BatchEvents
from .ray_cluster import Watchdog, connect_ray, import_ray
from .ray_worker import SEND_INTERVAL, Item, ShardSpec, ShardWorker, TaskHook

FEED_FACTOR = 2
"""The driver feeds a worker while its unfinished claims are fewer than this many times its
share of the concurrency budget (a claim has about one call in flight at a time)..."""

FEED_SHARDS = 2
"""... or while it has fewer than this many shards: the next one is there when one drains."""


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
        self._watchdog: Watchdog | None = None

    def connect(self) -> bool:
        """Connect to (or start) Ray; True when this call started or joined it (and shuts it).

        A cluster to join is reached up front (`RayUnreachableError`, within `PROBE_SECONDS`).
        A local Ray started here gets a watchdog (`ray_cluster.Watchdog`) that ends its processes
        if this process dies without shutting it down (`kill -9`); see `ray_cluster.connect_ray`."""
        joined, watchdog = connect_ray(self.address, self.num_cpus)
        if watchdog is not None:
            self._watchdog = watchdog
        return joined

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
            import_ray().shutdown()
        if self._watchdog is not None:
            self._watchdog.stop()
            self._watchdog = None

    def run(self, states: Sequence[JobState], record: Record, events: BatchEvents) -> None:
        """Verify what each job has left on Ray; `record` is called as each claim arrives."""
        ray = import_ray()
        self.start()
        try:
            self._run(ray, states, record, events)
        finally:
            self.stop()

    def close(self) -> None:
        """End the worker actors kept by this executor (if any)."""
        if not self._actors:
            return
        ray = import_ray()
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
