"""What `veritrail batch` shows while it works, and what its executors tell the driver.

`BatchEvents` is the one object both executors report to (besides recording finished claims):
claims started, model calls, and fatal endpoint errors. A fatal endpoint error (HTTP 401/403,
unknown model, no quota: `lm.base.EndpointError`) is kept per endpoint (`ModelSpec.provider_key`)
so that no job using that endpoint starts another claim.

The display reuses `veritrail.run.progress` (the reporters of `veritrail verify`): the same line or
live panel for the whole batch (claims done/total, verdicts, errors, in flight, calls, tokens,
dollars, elapsed, time left), plus "jobs done/total" and one line per job in progress (at most
`JOB_LINES`). With the local executor calls and tokens count as each call ends; with Ray they
count as each claim's result arrives (a worker's calls are not streamed one by one).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TextIO

from rich.console import Console
from rich.text import Text

from ..records import ClaimResult
from ..run.progress import (
    CallLike,
    PlainProgress,
    ProgressReporter,
    RichProgress,
    fmt_duration,
    fmt_int,
)

if TYPE_CHECKING:
    from ..run.model_spec import ModelSpec
    from .jobs import JobState

JOB_LINES = 6
"""Jobs in progress shown one per line; the others are counted."""


@dataclass
class JobFigures:
    """One job's running figures."""

    total: int = 0
    done: int = 0
    errors: int = 0
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    in_flight: set[str] = field(default_factory=set)
    finished: bool = False
    started: float | None = None

    def line(self, job_id: str, now: float) -> str:
        """`job: done/total claims · errors · in flight · calls · tokens · elapsed`."""
        parts = [f"{job_id}: {self.done}/{self.total} claims"]
        if self.errors:
            parts.append(f"errors {self.errors}")
        parts += [
            f"in flight {len(self.in_flight)}",
            f"calls {self.calls}",
            f"tokens {fmt_int(self.input_tokens)} in / {fmt_int(self.output_tokens)} out",
        ]
        if self.started is not None:
            parts.append(f"{fmt_duration(now - self.started)}")
        return " · ".join(parts)


@dataclass(frozen=True, slots=True)
class _Scoped:
    """A call event whose claim id is made unique over the batch (two jobs may both have a c1)."""

    step: str
    claim: str | None
    cached: bool
    input_tokens: int
    output_tokens: int
    dollars: float
    error: str | None


def _key(job_id: str, claim_id: str) -> str:
    return f"{job_id}\x1f{claim_id}"


class JobsView:
    """Per-job figures and the lines that show them (shared by the plain and rich displays)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.jobs: dict[str, JobFigures] = {}
        self._clock = clock

    def lines(self) -> list[str]:
        """ "jobs d/n done" and one line per job in progress (those with a claim in flight first)."""
        if not self.jobs:
            return []
        done = sum(j.finished for j in self.jobs.values())
        running = [(k, j) for k, j in self.jobs.items() if not j.finished and j.started is not None]
        running.sort(key=lambda kj: (not kj[1].in_flight, kj[0]))
        now = self._clock()
        out = [f"jobs {done}/{len(self.jobs)} done, {len(running)} in progress"]
        out += ["  " + j.line(k, now) for k, j in running[:JOB_LINES]]
        if len(running) > JOB_LINES:
            out.append(f"  … and {len(running) - JOB_LINES} more in progress")
        return out


class _PlainBatch(PlainProgress):
    def __init__(self, stream: TextIO, view: JobsView, *, interval: float) -> None:
        super().__init__(stream, interval=interval)
        self.view = view

    def line(self) -> str:
        return "\n".join([super().line(), *self.view.lines()])

    def _emit(self, text: str) -> None:
        for part in text.splitlines() or [""]:
            super()._emit(part)


class _RichBatch(RichProgress):
    def __init__(self, console: Console, view: JobsView) -> None:
        self.view = view  # before super().__init__, which may render once
        super().__init__(console)

    def _details(self) -> Text:
        t = super()._details()
        if not self.figures.extracting:
            for line in self.view.lines():
                t.append("\n  " + line, style="dim" if line.startswith("  ") else "")
        return t


class BatchEvents:
    """The driver's view of a running batch: progress figures (overall and per job) and the
    fatal endpoint errors met so far. Every method is called on the driver, on one thread."""

    def __init__(
        self,
        reporter: ProgressReporter | None = None,
        view: JobsView | None = None,
    ) -> None:
        self.reporter = reporter if reporter is not None else ProgressReporter()
        self.view = view if view is not None else JobsView(time.monotonic)
        self.fatal: dict[tuple[str, str | None, int | None], str] = {}
        """Fatal endpoint errors by `ModelSpec.provider_key`: description (redacted)."""

    # -- fatal endpoint errors ---------------------------------------------------------------
    def fatal_for(self, spec: ModelSpec | None) -> str | None:
        """The fatal error of `spec`'s endpoint, if one was met (None for an oracle job)."""
        return None if spec is None else self.fatal.get(spec.provider_key)

    def endpoint_failed(self, spec: ModelSpec, description: str) -> str:
        """Record a fatal endpoint error (the first one per endpoint is kept); returns it."""
        return self.fatal.setdefault(spec.provider_key, description)

    def causes(self) -> list[str]:
        """Every fatal endpoint error met, once each."""
        return list(dict.fromkeys(self.fatal.values()))

    # -- progress feeds ----------------------------------------------------------------------
    def extracting(self) -> None:
        """Claims are being extracted for jobs without a claims file."""
        self.reporter.extracting()

    def start(self, states: Sequence[JobState]) -> None:
        """Verification starts: totals over every job (claims already finished count as done)."""
        done: list[ClaimResult] = []
        total = retrying = 0
        for st in states:
            stored = st.store.results_in_order()
            results = [r for r in stored if r.verdict is not None]  # errors are verified again
            total += len(st.store.claims)
            retrying += len(stored) - len(results)
            done += results
            self.view.jobs[st.job.id] = JobFigures(
                total=len(st.store.claims), done=len(results), finished=st.finished
            )
        self.reporter.figures.unpriced = unpriced_specs(
            st.job.model for st in states if st.job.oracle_path is None
        )
        self.reporter.start(total, len(done), done, retrying=retrying)

    def claim_started(self, job_id: str, claim_id: str) -> None:
        """A claim of `job_id` starts (in flight until its result arrives)."""
        self.reporter.claim_started(_key(job_id, claim_id))
        j = self.view.jobs.get(job_id)
        if j is not None:
            j.in_flight.add(claim_id)
            if j.started is None:
                j.started = time.monotonic()

    def call(self, job_id: str | None, event: CallLike) -> None:
        """One model call ended (local executor: `Model.on_call`)."""
        claim = None if event.claim is None or job_id is None else _key(job_id, event.claim)
        self.reporter.call(
            _Scoped(
                event.step,
                claim,
                event.cached,
                event.input_tokens,
                event.output_tokens,
                event.dollars,
                event.error,
            )
        )
        j = self.view.jobs.get(job_id) if job_id is not None else None
        if j is not None and event.error is None:
            j.calls += 1
            j.input_tokens += event.input_tokens
            j.output_tokens += event.output_tokens

    def claim_finished(self, job_id: str, result: ClaimResult, *, count_cost: bool) -> None:
        """A claim's result was recorded; `count_cost`: add its calls and tokens (Ray, where the
        calls were not seen one by one)."""
        cid = result.claim.id
        if count_cost:
            c = result.cost
            f = self.reporter.figures
            f.calls += c.lm_calls
            f.cached_calls += c.cached_calls
            f.input_tokens += c.input_tokens
            f.output_tokens += c.output_tokens
            f.dollars += c.dollars
        j = self.view.jobs.get(job_id)
        if j is not None:
            if j.started is None:
                j.started = time.monotonic()
            j.in_flight.discard(cid)
            j.done += 1
            j.errors += int(result.verdict is None)
            if count_cost:
                j.calls += result.cost.lm_calls
                j.input_tokens += result.cost.input_tokens
                j.output_tokens += result.cost.output_tokens
        self.reporter.figures.in_flight.pop(_key(job_id, cid), None)
        self.reporter.claim_finished(result)

    def job_finished(self, job_id: str) -> None:
        """A job's report is written."""
        j = self.view.jobs.get(job_id)
        if j is not None:
            j.finished = True
            j.in_flight.clear()

    def note(self, text: str) -> None:
        """A line for the user (a job's report was written), shown above the live display."""
        r = self.reporter
        if isinstance(r, RichProgress):
            r.console.print(text, markup=False, highlight=False)
        elif isinstance(r, PlainProgress):
            r.stream.write(text + "\n")
            r.stream.flush()

    def tick(self) -> None:
        """Refresh the display (the executors call it periodically)."""
        self.reporter.tick()

    def close(self) -> None:
        """Final refresh; release the terminal."""
        self.reporter.close()


def unpriced_specs(specs: Iterable[ModelSpec]) -> tuple[str, ...]:
    """The models among `specs` with no known price (the price table each would be built with:
    its `--prices` file, else `VERITRAIL_PRICES`), once each: the progress line says their cost
    is unknown rather than show the 0 dollars they count. The executors build the models
    themselves (a Ray worker's are not seen here), so the spec is what the driver can read."""
    from ..lm.pricing import PriceTable
    from ..lm.registry import model_price

    tables: dict[str | None, PriceTable] = {}
    out: dict[str, None] = {}
    for spec in specs:
        try:
            if spec.prices not in tables:
                tables[spec.prices] = (
                    PriceTable.from_file(spec.prices) if spec.prices else PriceTable.from_env()
                )
            price = model_price(spec.name, tables[spec.prices])
        except (ValueError, OSError):  # reported by the model's own build, not here
            continue
        if price is None:
            out[spec.name] = None
    return tuple(out)


def make_batch_progress(
    *, quiet: bool = False, stream: TextIO | None = None, interval: float = 10.0
) -> BatchEvents:
    """Events with the display for this process: none (`--quiet`), a live panel on a terminal,
    else plain lines every `interval` seconds (logs)."""
    out = stream if stream is not None else sys.stderr
    view = JobsView(time.monotonic)
    if quiet:
        return BatchEvents(ProgressReporter(), view)
    if out.isatty():
        return BatchEvents(_RichBatch(Console(file=out, force_terminal=True), view), view)
    return BatchEvents(_PlainBatch(out, view, interval=interval), view)


__all__ = [
    "BatchEvents",
    "JobFigures",
    "JobsView",
    "make_batch_progress",
    "unpriced_specs",
]
