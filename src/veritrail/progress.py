"""What a run shows while it works and when it ends.

Three modes, chosen by `make_progress`:

* **rich** (stderr is a terminal): a live panel with a bar of claims done/total and the running
  figures: claims in flight and their current iteration, model calls, cache hits, tokens, dollars,
  errors, elapsed time and an estimate of the time left;
* **plain** (stderr is a file or a pipe, e.g. CI logs): one line every `interval` seconds and one
  at the end;
* **quiet** (`--quiet`): nothing.

Figures come from two feeds: `claim_finished(result)` (the `on_result` callback of
`loop.verify_claims`) and `call(event)` (the `on_call` callback of `lm.model.Model`, one event per
model call, cache hits included). Both are called on the event loop's thread, and so is
`tick()` (driven by `ticker()`), so no locking is needed.

`summary_tables(report)` renders the end-of-run table (verdicts, error stages, cost).
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TextIO

from rich.console import Console, Group, RenderableType
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from .records import ClaimResult, Verdict


class CallLike(Protocol):
    """The fields of `lm.model.CallEvent` progress reads (kept structural to avoid an import)."""

    @property
    def step(self) -> str: ...
    @property
    def claim(self) -> str | None: ...
    @property
    def cached(self) -> bool: ...
    @property
    def input_tokens(self) -> int: ...
    @property
    def output_tokens(self) -> int: ...
    @property
    def dollars(self) -> float: ...
    @property
    def error(self) -> str | None: ...


VERDICT_STEP = "verdict"
"""Step name of verdict calls (`verdict.STEP`): each one ends an iteration of its claim."""


@dataclass
class RunFigures:
    """Running totals of a run (mutable: updated as claims and calls finish)."""

    total: int = 0
    resumed: int = 0
    done: int = 0
    errors: int = 0
    verdicts: Counter[str] = field(default_factory=Counter)
    iterations_done: int = 0
    calls: int = 0
    cached_calls: int = 0
    failed_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    dollars: float = 0.0
    in_flight: dict[str, int] = field(default_factory=dict)
    """Claim id -> verdict calls seen so far, for claims started and not finished."""

    def call(self, event: CallLike) -> None:
        """Count one model call."""
        self.calls += 1
        self.cached_calls += int(event.cached)
        self.failed_calls += int(event.error is not None)
        self.input_tokens += event.input_tokens
        self.output_tokens += event.output_tokens
        self.dollars += event.dollars
        if event.claim is not None:
            n = self.in_flight.get(event.claim, 0)
            self.in_flight[event.claim] = n + int(event.step == VERDICT_STEP)

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


def fmt_int(n: float) -> str:
    """12345 -> 12.3k, for compact lines."""
    if n >= 1e6:
        return f"{n / 1e6:.1f}M"
    if n >= 1e4:
        return f"{n / 1e3:.1f}k"
    return f"{int(n)}"


def fmt_duration(s: float) -> str:
    """Seconds as 1h02m, 3m05s or 12s."""
    s = max(0, round(s))
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s}s"


class ProgressReporter:
    """Base class: collects figures; subclasses decide what to show. Also the quiet mode."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.figures = RunFigures()
        self._clock = clock
        self._t0 = clock()

    # feeds -----------------------------------------------------------------------------------
    def start(self, total: int, resumed: int = 0, done: Sequence[ClaimResult] = ()) -> None:
        """The run has `total` claims, of which `resumed` were already finished in the run store
        (`done`, when given, are those results: their verdicts are counted in the figures)."""
        self.figures.total = total
        self.figures.resumed = resumed
        for r in done:
            self.figures.finished(r)
        self.figures.done = resumed
        self._t0 = self._clock()

    def call(self, event: CallLike) -> None:
        """`Model(on_call=...)` hook."""
        self.figures.call(event)

    def claim_finished(self, result: ClaimResult) -> None:
        """`verify_claims(on_result=...)` hook."""
        self.figures.finished(result)
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

    def eta(self) -> float | None:
        """Seconds left, from the pace of the claims finished in this session."""
        f = self.figures
        new = f.done - f.resumed
        left = f.total - f.done
        if new <= 0 or left <= 0:
            return None
        return self.elapsed / new * left

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
            f"${f.dollars:.4f}",
            f"{fmt_duration(self.elapsed)} elapsed",
        ]
        eta = self.eta()
        if eta is not None:
            parts.append(f"~{fmt_duration(eta)} left")
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

    def start(self, total: int, resumed: int = 0, done: Sequence[ClaimResult] = ()) -> None:
        super().start(total, resumed, done)
        self._emit(
            f"verifying {total - resumed} claims"
            + (f" ({resumed} already finished in the run store)" if resumed else "")
        )
        self._last = self._clock()

    def tick(self) -> None:
        now = self._clock()
        if self._last is None or now - self._last >= self.interval:
            self._emit(self.line())
            self._last = now

    def close(self) -> None:
        self._emit(self.line())

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

    def start(self, total: int, resumed: int = 0, done: Sequence[ClaimResult] = ()) -> None:
        super().start(total, resumed, done)
        self._bar.update(self._task, total=total, completed=resumed)
        self._bar.start()
        self._started = True
        self.tick()

    def _details(self) -> Text:
        f = self.figures
        v = f.verdicts
        t = Text()
        t.append(f"  Fully Supported {v[Verdict.FULLY_SUPPORTED.value]}", style="green")
        t.append(f"  Not Fully Supported {v[Verdict.NOT_FULLY_SUPPORTED.value]}", style="red")
        t.append(f"  Inconclusive {v[Verdict.INCONCLUSIVE.value]}", style="yellow")
        t.append(f"  errors {f.errors}\n", style="bold red" if f.errors else "dim")
        t.append(f"  in flight {len(f.in_flight)}")
        if f.in_flight:
            t.append(f" (iteration ~{f.current_iteration:.1f})")
        t.append(f"  ·  model calls {f.calls}  ·  cache hits {f.cached_calls}")
        if f.failed_calls:
            t.append(f"  ·  failed calls {f.failed_calls}", style="red")
        t.append(
            f"  ·  tokens {fmt_int(f.input_tokens)} in / {fmt_int(f.output_tokens)} out"
            f"  ·  ${f.dollars:.4f}"
        )
        eta = self.eta()
        if eta is not None:
            t.append(f"  ·  ~{fmt_duration(eta)} left")
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


# -- end-of-run summary -------------------------------------------------------------------------


def summary_tables(report: Mapping[str, Any], *, wall_seconds: float | None = None) -> Group:
    """Verdicts, error stages and cost of a report, as rich tables."""
    s = report["summary"]
    n = s["claims"] or 1
    verdicts = Table(title="Verdicts", title_justify="left")
    verdicts.add_column("verdict")
    verdicts.add_column("claims", justify="right")
    verdicts.add_column("share", justify="right")
    styles = {
        Verdict.FULLY_SUPPORTED.value: "green",
        Verdict.NOT_FULLY_SUPPORTED.value: "red",
        Verdict.INCONCLUSIVE.value: "yellow",
        "error": "bold red",
    }
    for label, count in s["verdicts"].items():
        verdicts.add_row(
            Text(label, style=styles.get(label, "")), str(count), f"{100 * count / n:.0f}%"
        )

    stages = Table(title="Error stages", title_justify="left")
    stages.add_column("stage", justify="right")
    stages.add_column("claims", justify="right")
    per_stage = s.get("error_stages", {})
    max_stage = int(report.get("dag", {}).get("max_stage", 0))
    for k in range(1, max_stage + 1):
        stages.add_row(str(k), str(per_stage.get(str(k), 0)))
    not_id = sum(
        1 for c in report.get("claims", []) if c.get("error_stage_status") == "not_identifiable"
    )
    stages.add_row("not identifiable", str(not_id))

    c = s["cost"]
    cost = Table(title="Cost", title_justify="left")
    cost.add_column("figure")
    cost.add_column("value", justify="right")
    cost.add_row("model calls", f"{c['lm_calls']}")
    cost.add_row("of which from cache", f"{c.get('cached_calls', 0)}")
    cost.add_row("input tokens", f"{c['input_tokens']:,}")
    cost.add_row("output tokens", f"{c['output_tokens']:,}")
    cost.add_row("dollars", f"${c['dollars']:.4f}")
    dag_nodes = int(report.get("dag", {}).get("nodes", 0))
    mean = float(c.get("nodes_read_mean", 0.0))
    cost.add_row(
        "nodes read per claim",
        f"{mean:.1f}" + (f" ({100 * mean / dag_nodes:.1f}% of {dag_nodes:,})" if dag_nodes else ""),
    )
    if wall_seconds is not None:
        cost.add_row("wall time", fmt_duration(wall_seconds))
    return Group(verdicts, stages, cost)


def print_summary(
    report: Mapping[str, Any], *, console: Console | None = None, wall_seconds: float | None = None
) -> None:
    """Print `summary_tables` (to stdout by default)."""
    (console or Console()).print(summary_tables(report, wall_seconds=wall_seconds))
