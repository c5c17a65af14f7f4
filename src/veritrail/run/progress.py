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

`summary_tables(report)` renders the end-of-run tables (verdicts, error stages, cost);
`print_outcome` prints what decides the exit status (errored claims grouped by cause, the
`--max-unsupported` gate), even with `--quiet`.
"""

from __future__ import annotations

import asyncio
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from rich.console import Console, Group, RenderableType
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from ..display import CallLike as CallLike
from ..display import CallTotals as CallTotals
from ..display import fmt_duration as fmt_duration
from ..display import fmt_int as fmt_int
from ..records import ClaimResult, Step, Verdict


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

    def claim_started(self, claim_id: str) -> None:
        """A claim starts being verified (it counts as in flight from now on)."""
        self.figures.started(claim_id)

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

    def extraction_line(self) -> str:
        """The status line while claims are being extracted."""
        f = self.figures
        return (
            f"extracting claims from the final output · calls {f.calls} (cache {f.cached_calls}"
            + (f", failed {f.failed_calls}" if f.failed_calls else "")
            + f") · {fmt_duration(self.elapsed)} elapsed"
        )

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
        self._started = False

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
        if self._last is None or now - self._last >= self.interval:
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
    per_stage = {int(k): int(v) for k, v in s.get("error_stages", {}).items()}
    max_stage = int(report.get("dag", {}).get("max_stage", 0))
    for label, count in stage_rows(per_stage, max_stage):
        stages.add_row(label, count)
    not_id = sum(
        1 for c in report.get("claims", []) if c.get("error_stage_status") == "not_identifiable"
    )
    stages.add_row("not identifiable", str(not_id))

    c = s["cost"]
    ext = report.get("run", {}).get("extraction_cost") or {}

    def total(key: str) -> Any:
        return c.get(key, 0) + ext.get(key, 0)

    cost = Table(title="Cost", title_justify="left")
    cost.add_column("figure")
    cost.add_column("value", justify="right")
    cost.add_row("model calls", f"{total('lm_calls'):,}")
    if ext:
        cost.add_row("of which claim extraction", f"{ext.get('lm_calls', 0):,}")
    cost.add_row("of which from cache", f"{total('cached_calls'):,}")
    cost.add_row("input tokens", f"{total('input_tokens'):,}")
    cost.add_row("output tokens", f"{total('output_tokens'):,}")
    cost.add_row("dollars", f"${total('dollars'):.4f}")
    dag_nodes = int(report.get("dag", {}).get("nodes", 0))
    mean = float(c.get("nodes_read_mean", 0.0))
    cost.add_row(
        "nodes read per claim",
        f"{mean:.1f}" + (f" ({100 * mean / dag_nodes:.1f}% of {dag_nodes:,})" if dag_nodes else ""),
    )
    if wall_seconds is not None:
        cost.add_row("wall time", fmt_duration(wall_seconds))
    return Group(verdicts, stages, cost)


STAGE_ROWS = 10
"""Error stages listed by name in the end-of-run table; the rest are summed in one row."""


def stage_rows(
    per_stage: Mapping[int, int], max_stage: int, limit: int = STAGE_ROWS
) -> list[tuple[str, str]]:
    """(stage, claims) rows of the Error stages table.

    A DAG with few stages gets one row per stage (zeros included, so the shape is visible);
    a deeper one (a 200,000-stage chain) gets the `limit` stages with the most claims, in stage
    order, plus one "n more stages" row: the table stays a few rows long whatever the depth.
    """
    if max_stage <= limit:
        return [(str(k), str(per_stage.get(k, 0))) for k in range(1, max_stage + 1)]
    top = sorted(
        sorted((k for k, v in per_stage.items() if v > 0), key=lambda k: (-per_stage[k], k))[:limit]
    )
    rows = [(str(k), str(per_stage[k])) for k in top]
    rest = max_stage - len(top)
    rest_claims = sum(v for k, v in per_stage.items() if k not in set(top))
    rows.append((f"{rest:,} more stages", str(rest_claims)))
    return rows


def error_cause(error: str | None) -> str:
    """The cause of a claim's error, for grouping: the first line (a bug's traceback is left
    out), redacted, without the exception class name the loop puts in front."""
    from ..redaction import redact

    first = (error or "unknown error").strip().splitlines()[0] if error else "unknown error"
    first = re.sub(r"^not started: ", "", first)
    first = re.sub(r"^[A-Za-z_][A-Za-z0-9_.]*(?:Error|Exception|Failure): ", "", first)
    return redact(first.strip()) or "unknown error"


def error_groups(claims: Sequence[Mapping[str, Any]]) -> list[tuple[str, list[str]]]:
    """Errored claims of a report grouped by cause: (cause, claim ids), largest group first."""
    groups: dict[str, list[str]] = {}
    for c in claims:
        if c.get("termination") == "error" or c.get("verdict") is None:
            groups.setdefault(error_cause(c.get("error")), []).append(str(c["id"]))
    return sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))


@dataclass(frozen=True, slots=True)
class GateResult:
    """A failed `--max-unsupported` gate."""

    rate: float
    """The allowed share."""
    share: float
    """The share of claims judged Not Fully Supported."""
    claims: tuple[tuple[str, str], ...]
    """(id, text) of those claims."""
    total: int


def gate_failures(report: Mapping[str, Any], max_unsupported: float | None) -> GateResult | None:
    """The `--max-unsupported` gate: a `GateResult` when the share of the report's claims whose
    final verdict is Not Fully Supported is above `max_unsupported`, else None (also with no
    gate or no claims). The share is over every claim of the report, errored ones included."""
    if max_unsupported is None:
        return None
    claims = report.get("claims", [])
    if not claims:
        return None
    nfs = tuple(
        (str(c["id"]), str(c.get("text", "")))
        for c in claims
        if c.get("verdict") == Verdict.NOT_FULLY_SUPPORTED.value
    )
    share = len(nfs) / len(claims)
    if share <= max_unsupported:
        return None
    return GateResult(max_unsupported, share, nfs, len(claims))


def _ids(ids: Sequence[str], limit: int = 8) -> str:
    shown = ", ".join(ids[:limit])
    return shown + (f", … {len(ids) - limit} more" if len(ids) > limit else "")


def outcome_lines(
    report: Mapping[str, Any],
    *,
    max_unsupported: float | None = None,
    run_dir: str | None = None,
    fatal: str | None = None,
    limit: int = 20,
) -> list[str]:
    """What decides the exit status, as lines: the fatal endpoint error, the errored claims
    grouped by cause, the failed gate with the claims it counted (at most `limit` listed)."""
    from ..redaction import redact

    lines: list[str] = []
    claims = report.get("claims", [])
    if fatal:
        lines.append(
            f"error: the endpoint refused the run: {redact(fatal).rstrip('.')}. "
            "No further claim was started; "
            "finished claims are kept."
        )
    groups = error_groups(claims)
    if groups:
        n = sum(len(ids) for _, ids in groups)
        again = f"veritrail resume {run_dir}" if run_dir else "veritrail resume RUN_DIR"
        lines.append(
            f"error: {n} of {len(claims)} claims could not be verified; they are verified again "
            f"by the same command or `{again}`:"
        )
        for cause, ids in groups:
            lines.append(f"  {len(ids)} claim{'s' if len(ids) != 1 else ''}: {cause} ({_ids(ids)})")
    gate = gate_failures(report, max_unsupported)
    if gate is not None:
        lines.append(
            f"gate failed: {len(gate.claims)} of {gate.total} claims ({100 * gate.share:.1f}%) "
            f"are Not Fully Supported, above --max-unsupported {gate.rate:g} "
            f"({100 * gate.rate:.1f}%):"
        )
        for cid, text in gate.claims[:limit]:
            short = text if len(text) <= 100 else text[:99] + "…"
            lines.append(f"  {cid}: {redact(short)}")
        if len(gate.claims) > limit:
            lines.append(f"  … and {len(gate.claims) - limit} more (see the report)")
    return lines


def print_outcome(
    report: Mapping[str, Any],
    *,
    max_unsupported: float | None = None,
    run_dir: str | None = None,
    fatal: str | None = None,
    stream: TextIO | None = None,
) -> None:
    """Print `outcome_lines` to stderr (also with `--quiet`: they explain the exit status)."""
    out = stream if stream is not None else sys.stderr
    for line in outcome_lines(
        report, max_unsupported=max_unsupported, run_dir=run_dir, fatal=fatal
    ):
        out.write(line + "\n")
    out.flush()


def print_summary(
    report: Mapping[str, Any], *, console: Console | None = None, wall_seconds: float | None = None
) -> None:
    """Print `summary_tables` (to stdout by default)."""
    (console or Console()).print(summary_tables(report, wall_seconds=wall_seconds))
