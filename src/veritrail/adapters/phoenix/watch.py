"""`veritrail watch`: verify a Phoenix project's traces as they arrive and write the verdicts back.

One event loop:

1. **Poll** (`interval`): list the project's traces started since the checkpoint's watermark
   minus `lookback` (`GET /v1/projects/{p}/traces?include_spans=true`: span ids, names and
   kinds, no texts).
2. **Settle**: a trace is taken once it has been quiet for `settle` seconds: its number of spans
   and its end time unchanged across polls for that long, by this process's own clock (so skewed
   clocks between the application and the watcher do not matter). A span exported later than
   that misses the verification; choose `settle` above the application's export delay (the
   OpenTelemetry batch processor's default schedule is 5 s).
3. **Sample and filter**: the trace is verified when `sampling.sampled(trace_id, rate)` holds and
   every `--filter` matches some span of it; the others are left alone.
4. **Verify**: its spans are read and built into a DAG (the trace import's rules;
   `spans.trace_import`), and the DAG is handed to the `verifier` (`TraceVerifier`), at most
   `concurrency` traces at a time. `veritrail watch` passes one that runs the job as `veritrail
   verify` does (`veritrail.api.trace_verifier`: the same settings, model cache and run
   directory under `runs_dir`); the verifier is a parameter because the run layer sits above the
   adapters (docs/architecture.md, "Layers"). A trace that gives no DAG (no generating span, ...)
   or that the verifier refuses (`TraceSkipped`) is skipped with the reason.
5. **Write back** the annotations (`annotate.write_marks`; idempotent) and record the trace in the
   checkpoint (`checkpoint.Checkpoint`), atomically, only then.

Killed at any point, a restart takes up every trace not recorded: a verification cut short
resumes from its run directory (finished claims are kept there, in-flight model calls come from
the cache) and its annotations are written again as updates, so each sampled trace ends with one
set of annotations. A run that left claims unverified (exit 3 of `verify`) is recorded as
``incomplete`` and taken again by the next start, as `veritrail verify` would retry them.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from ...dag import Dag
from ...errors import VeritrailError
from ...outcome import ExitCode
from ...redaction import redact
from ...report import as_report
from ..trace import TraceError
from .annotate import write_marks
from .checkpoint import Checkpoint
from .client import PhoenixClient, PhoenixError, PhoenixUnreachable
from .marks import marks_for_run
from .sampling import sampled
from .spans import parse_time, sdk_span, trace_import

FILTER_KEYS = ("name", "span_kind", "status_code")
"""What `--filter KEY=VALUE` can test, on any span of the trace."""
MAX_POLL_FAILURES = 5
"""Polls in a row that may fail (Phoenix unreachable) before the watch gives up (exit 3)."""


@dataclass(frozen=True, slots=True)
class VerifiedRun:
    """What a `TraceVerifier` gives back: the run's report (the JSON report as a dict), its run
    directory, its exit status (as `veritrail verify`'s) and, when the model failed for good,
    the cause (the watch then stops)."""

    report: Mapping[str, Any]
    run_dir: str
    exit_code: int
    fatal: str | None = None


class TraceSkipped(Exception):
    """Raised by a verifier for a trace it will not verify (bad input before any model call);
    the trace is recorded as skipped with this message."""


TraceVerifier = Callable[[Dag, str], Awaitable[VerifiedRun]]
"""``await verifier(dag, name)``: verify one trace's DAG; `name` (``phoenix-<trace id>``) names
its run directory."""


@dataclass(frozen=True, slots=True)
class WatchOptions:
    """How to watch (the flags of `veritrail watch`)."""

    url: str
    project: str
    sample: float = 1.0
    filters: tuple[tuple[str, str], ...] = ()
    settle: float = 30.0
    interval: float = 5.0
    concurrency: int = 2
    checkpoint: str | Path | None = None
    """Default: `<runs_dir>/watch-<project>.json`."""
    since: str | None = None
    """ISO time: traces that started before it are never taken (default: all)."""
    lookback: float = 600.0
    """Seconds before the watermark listed again at every poll: room for traces whose spans
    reach Phoenix out of order."""
    once: bool = False
    """Stop when every trace seen is finished (for batch jobs and tests)."""


@dataclass
class WatchSummary:
    """What a watch did, and its exit status (as `veritrail verify`'s)."""

    annotated: int = 0
    skipped: int = 0
    incomplete: int = 0
    gate_failed: int = 0
    excluded: int = 0
    already_done: int = 0
    interrupted: bool = False
    fatal: str | None = None
    checkpoint: str = ""
    run_dirs: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """130 interrupted; 3 a trace left claims unverified or the watch failed; 1 a gate
        failed; else 0."""
        if self.interrupted:
            return int(ExitCode.INTERRUPTED)
        if self.fatal or self.incomplete:
            return int(ExitCode.ERRORS)
        if self.gate_failed:
            return int(ExitCode.GATE)
        return int(ExitCode.OK)


def parse_filters(specs: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """``KEY=VALUE`` strings → pairs; `ValueError` naming a bad one."""
    out = []
    for spec in specs:
        key, sep, value = spec.partition("=")
        key = {"kind": "span_kind", "status": "status_code"}.get(key.strip(), key.strip())
        if not sep or key not in FILTER_KEYS or not value:
            raise ValueError(
                f"bad --filter {spec!r}: use KEY=VALUE with KEY one of {', '.join(FILTER_KEYS)}"
            )
        out.append((key, value))
    return tuple(out)


def matches(trace: Mapping[str, Any], filters: Sequence[tuple[str, str]]) -> bool:
    """Whether every filter matches some span of `trace` (its `include_spans` form)."""
    spans = trace.get("spans") or []
    return all(any(str(s.get(k)) == v for s in spans) for k, v in filters)


def _time(text: str) -> datetime:
    return datetime.fromisoformat(str(text).replace("Z", "+00:00"))


def default_checkpoint(runs_dir: str | Path, project: str) -> Path:
    """`<runs_dir>/watch-<project>.json` (unsafe characters of the name as `_`)."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in project)[:60]
    return Path(runs_dir) / f"watch-{safe or 'project'}.json"


@dataclass
class _Seen:
    fingerprint: tuple[int, str]
    since: float
    start: str
    trace: Mapping[str, Any]


class _Watch:
    """The state of one `watch` call (see the module docstring)."""

    def __init__(
        self,
        options: WatchOptions,
        verifier: TraceVerifier,
        client: PhoenixClient,
        checkpoint: Checkpoint,
        say: Callable[[str], None],
    ) -> None:
        self.o = options
        self.verifier = verifier
        self.client = client
        self.ckpt = checkpoint
        self.say = say
        self.summary = WatchSummary(checkpoint=str(checkpoint.path))
        self.seen: dict[str, _Seen] = {}
        self.excluded: set[str] = set()
        self.finished_here: set[str] = set()
        self.ready: list[str] = []
        self.inflight: dict[asyncio.Task[dict[str, Any]], str] = {}
        self.since = _time(parse_time(options.since)) if options.since else None
        self._starts: dict[str, str] = {}

    # -- polling --------------------------------------------------------------------------------

    def _lower_bound(self) -> str | None:
        marks = [self.ckpt.watermark] if self.ckpt.watermark else []
        if not marks:
            return self.since.isoformat() if self.since else None
        low = _time(marks[0]) - timedelta(seconds=self.o.lookback)
        if self.since and self.since > low:
            low = self.since
        return low.isoformat()

    def _taken(self, tid: str) -> bool:
        status = (self.ckpt.traces.get(tid) or {}).get("status")
        return (
            status in ("annotated", "skipped")
            or tid in self.finished_here
            or tid in self.excluded
            or tid in self.inflight.values()
            or tid in self.ready
        )

    def poll(self, traces: Sequence[Mapping[str, Any]]) -> None:
        """Take in one listing: note changes, move settled traces on."""
        now = time.monotonic()
        for t in traces:
            tid = str(t.get("trace_id") or "")
            if not tid or self._taken(tid):
                continue
            start = str(t.get("start_time") or "")
            if self.since and start and _time(start) < self.since:
                continue
            fp = (len(t.get("spans") or []), str(t.get("end_time") or ""))
            prev = self.seen.get(tid)
            if prev is None or prev.fingerprint != fp:
                self.seen[tid] = _Seen(fp, now, start, t)
                continue
            if now - prev.since < self.o.settle:
                continue
            del self.seen[tid]
            if not sampled(tid, self.o.sample) or not matches(t, self.o.filters):
                self.excluded.add(tid)
                self.summary.excluded += 1
                continue
            self.ready.append(tid)
            self._starts[tid] = start
        self._move_watermark(traces)

    def _move_watermark(self, traces: Sequence[Mapping[str, Any]]) -> None:
        open_starts = [s.start for s in self.seen.values() if s.start]
        open_starts += [self._starts[t] for t in self.ready if self._starts.get(t)]
        open_starts += [self._starts[t] for t in self.inflight.values() if self._starts.get(t)]
        if open_starts:
            mark = min(open_starts, key=_time)
        else:
            listed = [str(t.get("start_time")) for t in traces if t.get("start_time")]
            mark = max(listed, key=_time) if listed else (self.ckpt.watermark or "")
        if not mark or mark == self.ckpt.watermark:
            return
        forget = None
        if mark:
            forget = (_time(mark) - timedelta(seconds=self.o.lookback)).isoformat()
        self.ckpt.move_watermark(mark, forget_before=forget)
        self.ckpt.save()

    def idle(self) -> bool:
        """Nothing seen that is not finished."""
        return not self.seen and not self.ready and not self.inflight

    # -- one trace --------------------------------------------------------------------------------

    async def verify(self, tid: str) -> dict[str, Any]:
        """Verify one trace and write its annotations; the checkpoint entry to record."""
        start = self._starts.get(tid)
        raw = await asyncio.to_thread(
            lambda: list(self.client.spans(self.o.project, trace_ids=[tid]))
        )
        try:
            imp = trace_import(
                [sdk_span(s) for s in raw],
                trace_id=tid,
                project=self.o.project,
                url=self.client.url,
            )
        except TraceError as exc:
            return {"status": "skipped", "reason": redact(str(exc)), "start_time": start}
        try:
            done = await self.verifier(imp.dag, f"phoenix-{tid[:16]}")
        except TraceSkipped as exc:
            return {"status": "skipped", "reason": redact(str(exc)), "start_time": start}
        if done.fatal:
            raise _Fatal(done.fatal)
        report = as_report(done.report)  # validated once: the marks and the entry read it
        marks = marks_for_run(report, imp.dag)
        refused = None
        try:
            await asyncio.to_thread(lambda: write_marks(self.client, marks, project=self.o.project))
        except PhoenixUnreachable:
            raise
        except PhoenixError as exc:  # e.g. the trace was deleted meanwhile: retried next start
            refused = redact(str(exc))
        verdicts = report.summary.verdicts
        return {
            "status": "incomplete" if done.exit_code == ExitCode.ERRORS or refused else "annotated",
            **({"reason": refused} if refused else {}),
            "run_dir": str(done.run_dir),
            "exit_code": int(done.exit_code),
            "claims": len(report.claims),
            "verdicts": {k: v for k, v in verdicts.items() if v},
            "annotations": len(marks),
            "start_time": start,
        }

    def finish(self, tid: str, entry: dict[str, Any]) -> None:
        """Record a finished trace (checkpoint first, then the summary and the message)."""
        status = entry.pop("status")
        self.ckpt.record(tid, status, **entry)
        self.finished_here.add(tid)
        short = f"{tid[:8]}…{tid[-4:]}" if len(tid) > 14 else tid
        if status == "skipped":
            self.summary.skipped += 1
            self.say(f"trace {short}: skipped: {entry.get('reason')}")
            return
        self.summary.run_dirs.append(str(entry.get("run_dir")))
        if status == "incomplete":
            self.summary.incomplete += 1
        elif entry.get("exit_code") == int(ExitCode.GATE):
            self.summary.gate_failed += 1
        else:
            self.summary.annotated += 1
        shown = ", ".join(f"{v} {k}" for k, v in (entry.get("verdicts") or {}).items())
        self.say(
            f"trace {short}: {entry.get('claims')} claims ({shown or 'none'}); "
            f"{entry.get('annotations')} annotations written; run {entry.get('run_dir')}"
            + (
                f"; not finished: {entry.get('reason') or 'some claims could not be verified'}"
                if status == "incomplete"
                else ""
            )
        )

    # -- the loop ---------------------------------------------------------------------------------

    def _list(self, bound: str | None) -> list[dict[str, Any]]:
        return list(self.client.traces(self.o.project, start_time=bound, include_spans=True))

    async def run(self, stop: asyncio.Event) -> None:
        failures = 0
        next_poll = 0.0
        while not stop.is_set():
            if time.monotonic() >= next_poll:
                try:
                    listing = await asyncio.to_thread(self._list, self._lower_bound())
                    failures = 0
                except PhoenixUnreachable as exc:
                    failures += 1
                    if failures >= MAX_POLL_FAILURES:
                        raise
                    self.say(f"warning: {exc} (poll {failures} of {MAX_POLL_FAILURES})")
                    listing = []
                self.poll(listing)
                next_poll = time.monotonic() + self.o.interval
            while self.ready and len(self.inflight) < self.o.concurrency:
                tid = self.ready.pop(0)
                self.inflight[asyncio.create_task(self.verify(tid))] = tid
            if self.o.once and self.idle():
                return
            wait = max(0.0, next_poll - time.monotonic())
            waiters: set[asyncio.Future[Any]] = set(self.inflight)
            stopper = asyncio.ensure_future(stop.wait())
            waiters.add(stopper)
            done, _ = await asyncio.wait(waiters, timeout=wait, return_when=asyncio.FIRST_COMPLETED)
            stopper.cancel()
            for task in list(self.inflight):
                if task in done:
                    tid = self.inflight.pop(task)
                    self.finish(tid, task.result())

    async def cancel_inflight(self) -> None:
        """Cancel the verifications in flight (their finished claims stay in their run
        directories) and wait for them to unwind."""
        for task in self.inflight:
            task.cancel()
        for task in list(self.inflight):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self.inflight.clear()


class _Fatal(Exception):
    """The model endpoint failed for good: stop the watch."""


async def awatch(
    options: WatchOptions,
    verifier: TraceVerifier,
    *,
    runs_dir: str | Path = "runs",
    say: Callable[[str], None] = lambda _: None,
    handle_signals: bool = True,
) -> WatchSummary:
    """The watch as a coroutine (see `watch`)."""
    if not 0.0 <= options.sample <= 1.0:
        raise VeritrailError("--sample is a rate between 0 and 1")
    client = PhoenixClient(options.url)
    try:
        path = options.checkpoint or default_checkpoint(runs_dir, options.project)
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        identity = {
            "project": options.project,
            "sample": options.sample,
            "filters": [f"{k}={v}" for k, v in options.filters],
            "since": options.since,
        }
        # The checkpoint first: a bad file is bad input (exit 2), whatever the server does.
        ckpt = Checkpoint.open(path, identity)
        client.project(options.project)  # unknown project, refused key, unreachable: now
        # The annotation configs once, before any trace (not by concurrent verifications).
        write_marks(client, [], project=options.project)
        w = _Watch(options, verifier, client, ckpt, say)
        w.summary.already_done = sum(
            1 for v in ckpt.traces.values() if v.get("status") in ("annotated", "skipped")
        )
        say(
            f"watching project {options.project!r} at {client.url}: sample {options.sample:g}, "
            f"settle {options.settle:g} s, {options.concurrency} at a time; checkpoint {path} "
            f"({w.summary.already_done} traces already finished)"
        )
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        installed: list[signal.Signals] = []
        if handle_signals:
            for sig in (signal.SIGINT, signal.SIGTERM):
                with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                    loop.add_signal_handler(sig, stop.set)
                    installed.append(sig)
        try:
            await w.run(stop)
        except _Fatal as exc:
            w.summary.fatal = redact(str(exc))
            say(f"error: the model failed for good, stopping: {w.summary.fatal}")
        except asyncio.CancelledError:
            stop.set()
        finally:
            if stop.is_set():
                w.summary.interrupted = True
            await w.cancel_inflight()
            for sig in installed:
                loop.remove_signal_handler(sig)
        if w.summary.interrupted:
            say(
                f"stopped: {len(ckpt.traces)} traces finished are in {path}; run the same command "
                "again to go on"
            )
        return w.summary
    finally:
        client.close()


def watch(
    options: WatchOptions,
    verifier: TraceVerifier,
    *,
    runs_dir: str | Path = "runs",
    say: Callable[[str], None] = lambda _: None,
) -> WatchSummary:
    """Watch a Phoenix project (the module docstring says how); returns when stopped (Ctrl-C,
    SIGTERM) or, with `options.once`, when every trace seen is finished.

    Raises `UnknownProject` / `PhoenixAuthError` (exit 2), `PhoenixUnreachable` (exit 3),
    `CheckpointError` (exit 2). `verifier` verifies one trace's DAG (`TraceVerifier`;
    `veritrail.api.trace_verifier` is the one of `veritrail watch`); the default checkpoint
    is in `runs_dir`.
    """
    return asyncio.run(awatch(options, verifier, runs_dir=runs_dir, say=say))


__all__ = [
    "FILTER_KEYS",
    "TraceSkipped",
    "TraceVerifier",
    "VerifiedRun",
    "WatchOptions",
    "WatchSummary",
    "awatch",
    "default_checkpoint",
    "matches",
    "parse_filters",
    "watch",
]
