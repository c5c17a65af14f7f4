"""What a run shows while it works and when it ends.

Three modes, chosen by `make_progress`:

* **rich** (stderr is a terminal): a live panel with a bar of claims done/total and the running
  figures: claims in flight and their current iteration, model calls, cache hits, tokens, dollars,
  errors, elapsed time and an estimate of the time left;
* **plain** (stderr is a file or a pipe, e.g. CI logs): one line every `interval` seconds and one
  at the end;
* **quiet** (`--quiet`): nothing.

Figures come from three feeds: `claim_started(id)` / `claim_finished(result)` (a claim is in
flight from the moment it starts, so a claim whose call is being retried counts), and
`call(event)` (the `on_call` callback of `lm.model.Model`, one event per model call, cache hits
included; claim extraction's calls too, shown while `extracting()`). All are called on the event
loop's thread, and so is `tick()` (driven by `ticker()`), so no locking is needed.

"calls" on the progress line counts answered calls (cache hits included); calls that failed after
every retry are shown apart ("failed"). The end-of-run Cost table counts the same calls (claims
plus claim extraction), so on a fresh run both show the same number.

Before the first answer the display says what is going on instead of bare zeros: the model's own
activity when it reports one (`activity`, e.g. the embedded model's "starting ... loading its
weights"), else "waiting for the model's first reply".

The time left (`eta`) is meant to be read, so it must not swing: none until `ETA_MIN_CLAIMS`
claims finished in this session; counted in model calls (the calls the unfinished claims still
need, by the mean of the finished ones, times the seconds per answered call), not in claims,
since claims in flight together finish together; paced from the first answered call of the
session (starting a model or extracting claims happens once); recomputed only when a claim
finishes, averaged with the previous estimate, and counted down in between (the plain pace
`elapsed / done × left` grows with every second between two finished claims and drops at each,
the saw-tooth that went from 15 min to 2 min); none when the countdown runs out, until the next
claim finishes. Shown rounded (`fmt_left`).

The end-of-run tables and the lines that explain the exit status are `run.summary`'s
(re-exported here).
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from rich.console import Console, RenderableType
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from ..display import CallLike as CallLike
from ..display import CallTotals as CallTotals
from ..display import Countdown
from ..display import fmt_duration as fmt_duration
from ..display import fmt_int as fmt_int
from ..outcome import GateResult as GateResult
from ..outcome import gate_failures as gate_failures
from ..records import ClaimResult, Step, Verdict
from .summary import error_cause as error_cause
from .summary import error_groups as error_groups
from .summary import outcome_lines as outcome_lines
from .summary import print_outcome as print_outcome
from .summary import print_summary as print_summary
from .summary import stage_rows as stage_rows
from .summary import summary_tables as summary_tables

ETA_MIN_CLAIMS = 2
"""Claims finished in this session before a time left is shown."""


def fmt_left(seconds: float) -> str:
    """A time left, rounded so it reads steadily: 10 s steps under 90 s, minutes under an
    hour, then 1h05m."""
    s = max(0.0, seconds)
    if s < 90:
        return f"{max(10, round(s / 10) * 10)}s"
    if s < 3600:
        return f"{round(s / 60)} min"
    return fmt_duration(s)


@dataclass
class RunFigures(CallTotals):
    """Running totals of a run (mutable: updated as claims and calls finish)."""

    total: int = 0
    resumed: int = 0
    done: int = 0
    errors: int = 0
    verdicts: Counter[str] = field(default_factory=Counter)
    iterations_done: int = 0
    in_flight: dict[str, int] = field(default_factory=dict)
    """Claim id -> verdict calls seen so far, for claims started and not finished."""
    retrying: int = 0
    """Claims that ended in error in an earlier run and are verified again in this one."""
    extracting: bool = False
    """True while claims are being extracted from the final output (before verification)."""

    def call(self, event: CallLike) -> None:
        """Count one model call; a verdict call ends an iteration of its claim."""
        super().call(event)
        if event.error is None and event.claim is not None and event.step == Step.VERDICT:
            self.in_flight[event.claim] = self.in_flight.get(event.claim, 0) + 1

    def started(self, claim_id: str) -> None:
        """A claim started (in flight until it finishes, retries and waits included)."""
        self.in_flight.setdefault(claim_id, 0)

    def finished(self, result: ClaimResult) -> None:
        """Count one finished claim."""
        self.done += 1
        self.errors += int(result.verdict is None)
        self.verdicts[result.verdict.value if result.verdict else "error"] += 1
        self.iterations_done += len(result.iterations)
        self.in_flight.pop(result.claim.id, None)

    @property
    def current_iteration(self) -> float:
        """Mean iteration number of the claims in flight (1 = first round)."""
        if not self.in_flight:
            return 0.0
        return 1 + sum(self.in_flight.values()) / len(self.in_flight)


class ProgressReporter:
    """Base class: collects figures; subclasses decide what to show. Also the quiet mode."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.figures = RunFigures()
        self._clock = clock
        self._t0 = clock()
        self.activity: Callable[[], str | None] = lambda: None
        """What the model is doing outside its calls (set by the run: the provider's
        `status`), shown until work is under way."""
        self._work_t0: float | None = None
        """When the first call of this session was answered (the pace is measured from it)."""
        self._eta = Countdown()
        """The time left, set at each finished claim and counted down in between."""
        self._claim_calls: Counter[str] = Counter()
        """Calls answered in this session, per claim (the unit of work the estimate counts)."""
        self._finished_calls = 0
        """Calls of the claims finished in this session."""

    # feeds -----------------------------------------------------------------------------------
    def extracting(self) -> None:
        """Claims are being extracted from the final output (no `--claims`): calls made so far
        are shown until `start`."""
        self.figures.extracting = True

    def start(
        self,
        total: int,
        resumed: int = 0,
        done: Sequence[ClaimResult] = (),
        *,
        retrying: int = 0,
    ) -> None:
        """The run has `total` claims, of which `resumed` were already finished in the run store
        (`done`, when given, are those results: their verdicts are counted in the figures) and
        `retrying` ended in error in an earlier run and are verified again."""
        self.figures.extracting = False
        self.figures.total = total
        self.figures.resumed = resumed
        self.figures.retrying = retrying
        for r in done:
            self.figures.finished(r)
        self.figures.done = resumed
        self._t0 = self._clock()
        # Calls answered while extracting started the model already: the pace starts now.
        self._work_t0 = self._t0 if self.figures.calls else None
        self._eta.clear()

    def claim_started(self, claim_id: str) -> None:
        """A claim starts being verified (it counts as in flight from now on)."""
        self.figures.started(claim_id)

    def call(self, event: CallLike) -> None:
        """`Model(on_call=...)` hook."""
        self.figures.call(event)
        if self.figures.extracting:
            return
        if self._work_t0 is None:
            self._work_t0 = self._clock()
        if event.error is None and event.claim is not None:
            self._claim_calls[event.claim] += 1

    def claim_finished(self, result: ClaimResult) -> None:
        """`verify_claims(on_result=...)` hook."""
        self.figures.finished(result)
        self._finished_calls += self._claim_calls.pop(result.claim.id, 0)
        self._update_eta()
        self.tick()

    # output ----------------------------------------------------------------------------------
    def tick(self) -> None:
        """Refresh the display (called periodically by `ticker` and on every finished claim)."""

    def close(self) -> None:
        """Final refresh and release the terminal."""

    async def ticker(self, period: float = 0.5) -> None:
        """Call `tick` every `period` seconds until cancelled (run it as a task)."""
        while True:
            await asyncio.sleep(period)
            self.tick()

    # shared text -----------------------------------------------------------------------------
    @property
    def elapsed(self) -> float:
        """Seconds since `start`."""
        return self._clock() - self._t0

    def extraction_line(self) -> str:
        """The status line while claims are being extracted."""
        f = self.figures
        activity = self.activity()
        return (
            "extracting claims from the final output"
            + (f" · {activity}" if activity else "")
            + f" · calls {f.calls} (cache {f.cached_calls}"
            + (f", failed {f.failed_calls}" if f.failed_calls else "")
            + f") · {fmt_duration(self.elapsed)} elapsed"
        )

    def waiting_text(self) -> str | None:
        """What is going on while nothing was answered yet (the model's activity first), or
        None once calls come back."""
        activity = self.activity()
        if activity:
            return activity
        f = self.figures
        if f.calls == 0 and f.failed_calls == 0 and f.in_flight:
            return "waiting for the model's first reply"
        return None

    def calls_left(self) -> float | None:
        """Calls the unfinished claims still need, by the mean of the claims finished in this
        session (a claim in flight has made some of its calls; each needs at least one more), or
        None before a claim finished."""
        f = self.figures
        new = f.done - f.resumed
        if new <= 0:
            return None
        mean = self._finished_calls / new
        flying = list(f.in_flight)
        waiting = max(0, f.total - f.done - len(flying))
        return sum(max(1.0, mean - self._claim_calls[c]) for c in flying) + waiting * max(1.0, mean)

    def _update_eta(self) -> None:
        """A finished claim: a fresh estimate (calls left × seconds per answered call),
        averaged with the counted-down previous one.

        Counted in calls, not claims: claims in flight together (shared prompts, one embedded
        slot) finish close together at the end, so the seconds per finished claim overstated
        the time left at the first ones (the quick start said 18 min with 1.5 min to go)."""
        f = self.figures
        new = f.done - f.resumed
        left = f.total - f.done
        now = self._clock()
        answered = self._finished_calls + sum(self._claim_calls.values())
        calls_left = self.calls_left()
        if (
            left <= 0
            or new < ETA_MIN_CLAIMS
            or self._work_t0 is None
            or calls_left is None
            or answered <= 0
        ):
            self._eta.clear()
            return
        self._eta.set(now, (now - self._work_t0) / answered * calls_left)

    def eta(self) -> float | None:
        """Seconds left (see the module's doc), or None when no steady estimate exists."""
        if self.figures.done >= self.figures.total:
            return None
        return self._eta.left(self._clock())

    def line(self) -> str:
        """One plain status line with every figure."""
        f = self.figures
        pct = 100 * f.done / f.total if f.total else 100.0
        v = f.verdicts
        parts = [
            f"{f.done}/{f.total} claims ({pct:.0f}%)",
            f"FS {v[Verdict.FULLY_SUPPORTED.value]} NFS {v[Verdict.NOT_FULLY_SUPPORTED.value]} "
            f"Inc {v[Verdict.INCONCLUSIVE.value]}",
            f"errors {f.errors}",
            f"in flight {len(f.in_flight)}"
            + (f" (iteration ~{f.current_iteration:.1f})" if f.in_flight else ""),
            f"calls {f.calls} (cache {f.cached_calls}"
            + (f", failed {f.failed_calls}" if f.failed_calls else "")
            + ")",
            f"tokens {fmt_int(f.input_tokens)} in / {fmt_int(f.output_tokens)} out",
            f.dollars_text(),
            f"{fmt_duration(self.elapsed)} elapsed",
        ]
        waiting = self.waiting_text()
        if waiting:
            parts.insert(1, waiting)
        eta = self.eta()
        if eta is not None:
            parts.append(f"~{fmt_left(eta)} left")
        return " · ".join(parts)


class PlainProgress(ProgressReporter):
    """Periodic lines for logs."""

    def __init__(
        self,
        stream: TextIO,
        *,
        interval: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(clock=clock)
        self.stream = stream
        self.interval = interval
        self._last: float | None = None
        self._started = False
        self._said: str | None = None
        """The waiting text of the last tick (a new one is printed at once)."""

    def extracting(self) -> None:
        super().extracting()
        self._emit("extracting claims from the final output (no --claims given)")
        self._last = self._clock()

    def start(
        self,
        total: int,
        resumed: int = 0,
        done: Sequence[ClaimResult] = (),
        *,
        retrying: int = 0,
    ) -> None:
        if self.figures.extracting:
            self._emit(self.extraction_line())
        super().start(total, resumed, done, retrying=retrying)
        notes = []
        if resumed:
            notes.append(f"{resumed} already finished in the run store")
        if retrying:
            notes.append(f"{retrying} of them ended in error last time and are retried")
        self._emit(
            f"verifying {total - resumed} claims" + (f" ({'; '.join(notes)})" if notes else "")
        )
        self._last = self._clock()
        self._started = True

    def tick(self) -> None:
        if not self._started and not self.figures.extracting:
            return
        now = self._clock()
        waiting = self.waiting_text()
        news = waiting is not None and waiting != self._said
        self._said = waiting
        # What the run is waiting for is said at once, not at the next periodic line: a log
        # shows why nothing moves (the model starting, its first reply awaited).
        if news or self._last is None or now - self._last >= self.interval:
            self._emit(self.extraction_line() if self.figures.extracting else self.line())
            self._last = now

    def close(self) -> None:
        if self._started:
            self._emit(self.line())
            self._started = False

    def _emit(self, text: str) -> None:
        self.stream.write(f"[veritrail] {text}\n")
        self.stream.flush()


class _Panel(Progress):
    """rich's progress bar with our figures below it."""

    def __init__(self, details: Callable[[], Text], *columns: Any, **kwargs: Any) -> None:
        self._details = details  # before super().__init__, which may render once
        super().__init__(*columns, **kwargs)

    def get_renderables(self) -> Iterable[RenderableType]:
        yield self.make_tasks_table(self.tasks)
        yield self._details()


class RichProgress(ProgressReporter):
    """A live panel on a terminal."""

    def __init__(self, console: Console, *, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(clock=clock)
        self.console = console
        self._bar = _Panel(
            self._details,
            TextColumn("[bold]claims"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            auto_refresh=False,  # refreshed from the event loop (tick), never from a thread
            transient=False,
        )
        self._task = self._bar.add_task("claims", total=None)
        self._started = False

    def extracting(self) -> None:
        super().extracting()
        if not self._started:
            self._bar.start()
            self._started = True
        self.tick()

    def start(
        self,
        total: int,
        resumed: int = 0,
        done: Sequence[ClaimResult] = (),
        *,
        retrying: int = 0,
    ) -> None:
        super().start(total, resumed, done, retrying=retrying)
        self._bar.update(self._task, total=total, completed=resumed)
        if not self._started:
            self._bar.start()
            self._started = True
        self.tick()

    def _details(self) -> Text:
        f = self.figures
        v = f.verdicts
        t = Text()
        if f.extracting:
            t.append("  " + self.extraction_line())
            return t
        t.append(f"  Fully Supported {v[Verdict.FULLY_SUPPORTED.value]}", style="green")
        t.append(f"  Not Fully Supported {v[Verdict.NOT_FULLY_SUPPORTED.value]}", style="red")
        t.append(f"  Inconclusive {v[Verdict.INCONCLUSIVE.value]}", style="yellow")
        t.append(f"  errors {f.errors}\n", style="bold red" if f.errors else "dim")
        t.append(f"  in flight {len(f.in_flight)}")
        if f.retrying:
            t.append(f" (retrying {f.retrying} errored)")
        if f.in_flight:
            t.append(f" (iteration ~{f.current_iteration:.1f})")
        t.append(f"  ·  model calls {f.calls}  ·  cache hits {f.cached_calls}")
        if f.failed_calls:
            t.append(f"  ·  failed calls {f.failed_calls}", style="red")
        t.append(
            f"  ·  tokens {fmt_int(f.input_tokens)} in / {fmt_int(f.output_tokens)} out"
            f"  ·  {f.dollars_text()}"
        )
        eta = self.eta()
        if eta is not None:
            t.append(f"  ·  ~{fmt_left(eta)} left")
        waiting = self.waiting_text()
        if waiting:
            t.append(f"\n  {waiting}", style="cyan")
        return t

    def tick(self) -> None:
        if not self._started:
            return
        self._bar.update(self._task, completed=self.figures.done)
        self._bar.refresh()

    def close(self) -> None:
        if self._started:
            self.tick()
            self._bar.stop()
            self._started = False


def make_progress(
    *,
    quiet: bool = False,
    stream: TextIO | None = None,
    interval: float = 10.0,
    force_terminal: bool | None = None,
) -> ProgressReporter:
    """The reporter for this process: quiet, rich on a terminal, else plain lines."""
    out = stream if stream is not None else sys.stderr
    if quiet:
        return ProgressReporter()
    tty = force_terminal if force_terminal is not None else out.isatty()
    if tty:
        return RichProgress(Console(file=out, force_terminal=True))
    return PlainProgress(out, interval=interval)
