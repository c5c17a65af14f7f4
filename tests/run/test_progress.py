"""Progress output (plain lines, rich panel, quiet) and the end-of-run summary table."""

from __future__ import annotations

import asyncio
import contextlib
import io
from dataclasses import dataclass

from rich.console import Console

from veritrail.dag import Dag
from veritrail.records import (
    Claim,
    ClaimResult,
    Cost,
    ErrorStageStatus,
    Termination,
    Verdict,
)
from veritrail.report import build_report
from veritrail.run.progress import (
    PlainProgress,
    ProgressReporter,
    RichProgress,
    fmt_duration,
    make_progress,
    print_summary,
)


@dataclass(frozen=True)
class Call:
    """Has the fields of lm.model.CallEvent that progress reads."""

    step: str
    claim: str | None
    cached: bool = False
    input_tokens: int = 100
    output_tokens: int = 10
    dollars: float = 0.001
    error: str | None = None


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def result(cid: str, verdict: Verdict | None, stages: tuple[int, ...] = ()) -> ClaimResult:
    return ClaimResult(
        claim=Claim(cid, f"claim {cid}"),
        subclaims=(),
        verdict=verdict,
        reasoning="",
        termination=Termination.ERROR if verdict is None else Termination.NO_CANDIDATES,
        iterations=(),
        provenance=(),
        error_stages=stages,
        error_stage_status=ErrorStageStatus.IDENTIFIED
        if stages
        else ErrorStageStatus.NOT_APPLICABLE,
        cost=Cost(
            lm_calls=3,
            input_tokens=300,
            output_tokens=30,
            dollars=0.003,
            nodes_read=2,
            nodes_read_share=0.5,
        ),
        error="boom" if verdict is None else None,
    )


def test_plain_lines_are_periodic_and_carry_every_figure() -> None:
    out = io.StringIO()
    clock = Clock()
    p = PlainProgress(out, interval=10, clock=clock)
    p.start(4, resumed=1)
    p.claim_started("c2")
    p.claim_started("c3")  # in flight from its start, though its only call is failing
    p.call(Call("decomposition", "c2"))
    p.call(Call("evidence_selection", "c2", cached=True))
    p.call(Call("verdict", "c2"))
    p.call(Call("evidence_selection", "c3", False, 0, 0, 0.0, error="HTTP 503"))
    clock.t += 3
    p.tick()  # too soon: nothing
    clock.t += 8
    p.tick()
    lines = out.getvalue().splitlines()
    assert lines[0] == "[veritrail] verifying 3 claims (1 already finished in the run store)"
    assert len(lines) == 2
    assert lines[1] == (
        "[veritrail] 1/4 claims (25%) · FS 0 NFS 0 Inc 0 · errors 0 · in flight 2 (iteration ~1.5)"
        " · calls 3 (cache 1, failed 1) · tokens 300 in / 30 out · $0.0030 · 11s elapsed"
    )
    p.claim_finished(result("c2", Verdict.FULLY_SUPPORTED))  # 0 s since last line: no line
    clock.t += 10
    p.claim_finished(result("c3", None))
    last = out.getvalue().splitlines()[-1]
    assert "3/4 claims (75%) · FS 1 NFS 0 Inc 0 · errors 1 · in flight 0 ·" in last
    assert last.endswith("21s elapsed · ~10s left")  # 2 new claims in 21 s, 1 left
    p.close()
    assert len(out.getvalue().splitlines()) == 4


def test_rich_panel_shows_bar_and_figures() -> None:
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=160, color_system=None)
    p = RichProgress(console, clock=Clock())
    p.start(2)
    p.call(Call("verdict", "c1", cached=True, input_tokens=15000, output_tokens=20))
    p.claim_finished(result("c1", Verdict.NOT_FULLY_SUPPORTED, (2,)))
    p.close()
    text = buf.getvalue()
    assert "claims" in text and "1/2" in text
    assert (
        "Not Fully Supported 1" in text
        and "cache hits 1" in text
        and "tokens 15.0k in / 20 out" in text
    )


async def test_ticker_refreshes_until_cancelled() -> None:
    # No wall-clock race: the test waits for the third tick, cancels, and then checks that
    # cancellation really stopped the ticker (awaiting the task returns only once it ended).
    ticks: list[int] = []
    third = asyncio.Event()

    class Counting(ProgressReporter):
        def tick(self) -> None:
            ticks.append(1)
            if len(ticks) >= 3:
                third.set()

    p = Counting()
    task = asyncio.create_task(p.ticker(0.001))
    await third.wait()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    n = len(ticks)
    for _ in range(5):
        await asyncio.sleep(0)
    assert n >= 3 and len(ticks) == n and task.cancelled()


def test_make_progress_modes() -> None:
    quiet_out = io.StringIO()
    q = make_progress(quiet=True, stream=quiet_out)
    q.start(3)
    q.claim_finished(result("a", Verdict.FULLY_SUPPORTED))
    q.close()
    assert quiet_out.getvalue() == "" and q.figures.done == 1
    assert isinstance(make_progress(stream=io.StringIO()), PlainProgress)  # not a TTY
    assert isinstance(make_progress(stream=io.StringIO(), force_terminal=True), RichProgress)


def test_summary_table_lists_verdicts_stages_and_cost() -> None:
    dag = Dag.from_records(
        [
            {"id": "r", "text": "Root text."},
            {"id": "m", "text": "Middle.", "sources": ["r"]},
            {"id": "t", "text": "End.", "sources": ["m"]},
        ]
    )
    rs = [
        result("a", Verdict.FULLY_SUPPORTED),
        result("b", Verdict.NOT_FULLY_SUPPORTED, (2,)),
        result("c", Verdict.NOT_FULLY_SUPPORTED, (2,)),
        result("d", None),
    ]
    rep = build_report(rs, dag, model="fake/x", config={})
    buf = io.StringIO()
    print_summary(rep, console=Console(file=buf, width=100, color_system=None), wall_seconds=75)
    text = buf.getvalue()
    rows = {
        line.strip("│ ").split("│")[0].strip(): line for line in text.splitlines() if "│" in line
    }
    assert "1" in rows["Fully Supported"] and "25%" in rows["Fully Supported"]
    assert "50%" in rows["Not Fully Supported"]
    assert "25%" in rows["error"]
    assert rows["2"].split("│")[2].strip() == "2"  # stage 2: two claims
    assert rows["model calls"].split("│")[2].strip() == "12"
    assert "$0.0120" in rows["dollars"] and "1m15s" in rows["wall time"]


def test_fmt_duration() -> None:
    assert [fmt_duration(x) for x in (0, 59.6, 61, 3725)] == ["0s", "1m00s", "1m01s", "1h02m"]
