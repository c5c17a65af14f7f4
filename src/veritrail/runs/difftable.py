"""`veritrail diff` in the terminal: rich tables of what changed between two runs.

Every text from a report (claims, ids, node ids, paths) goes into a cell as a `rich.text.Text`,
never as a markup string, so a claim holding `[bold]` or `[/]` is printed as it is.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from ..records import Verdict
from .diff import ClaimView, Diff, Pair, gate_failed

_STYLES = {
    Verdict.FULLY_SUPPORTED.value: "green",
    Verdict.NOT_FULLY_SUPPORTED.value: "red",
    Verdict.INCONCLUSIVE.value: "yellow",
}


def pct(x: float | None) -> str:
    """A share as a percentage (`-` for none)."""
    return "-" if x is None else f"{100 * x:.1f}%"


def points(x: float | None) -> str:
    """A difference of shares in percentage points, signed."""
    return "-" if x is None else f"{100 * x:+.1f} pp"


def verdict_text(c: ClaimView | None) -> Text:
    """A claim's verdict, coloured; `(reviewed)` when a review set it; `-` for no claim."""
    if c is None:
        return Text("-", style="dim")
    label = c.verdict if c.verdict is not None else "error"
    out = Text(label, style=_STYLES.get(label, "bold red"))
    if c.reviewed:
        out.append(" (reviewed)", style="dim")
    return out


def entered_text(c: ClaimView) -> Text:
    """Where an unsupported claim entered: its error stage(s) and the nodes blamed."""
    if not c.error_stages:
        return Text("not identifiable" if c.unsupported else "-", style="dim")
    stages = ", ".join(str(s) for s in c.error_stages)
    out = Text(f"stage {stages}")
    if c.entered_at:
        out.append(" (")
        out.append(", ".join(c.entered_at))
        out.append(")")
    return out


def _ids(p: Pair) -> Text:
    if p.a and p.b and p.a.id != p.b.id:
        return Text(f"{p.a.id} → {p.b.id}")
    c = p.b or p.a
    return Text(c.id if c else "")


def _claim_text(p: Pair) -> Text:
    c = p.b or p.a
    return Text(c.text if c else "")


def _limited(rows: Sequence[Pair], limit: int) -> tuple[Sequence[Pair], int]:
    return (rows[:limit], max(0, len(rows) - limit)) if limit >= 0 else (rows, 0)


def summary_table(diff: Diff) -> Table:
    """Both runs' claims and unsupported shares, and the difference with its interval."""
    s = diff.share
    t = Table(title="Runs", title_justify="left")
    t.add_column("run")
    t.add_column("source")
    t.add_column("model")
    t.add_column("claims", justify="right")
    t.add_column("unsupported", justify="right")
    t.add_column("share", justify="right")
    for side, share in ((diff.a, s.share_a), (diff.b, s.share_b)):
        t.add_row(
            side.label,
            Text(side.path),
            Text(side.model),
            f"{len(side.claims):,}",
            f"{side.unsupported:,}",
            pct(share),
        )
    return t


def share_line(diff: Diff) -> Text:
    """The difference of the unsupported shares with its interval, and how claims matched."""
    s = diff.share
    ci = (
        f" ({100 * s.confidence:.0f}% CI {points(s.low)} to {points(s.high)}; "
        f"bootstrap, {s.resamples:,} resamples, seed {s.seed})"
        if s.low is not None
        else ""
    )
    return Text(
        f"Unsupported share B − A: {points(s.difference)}{ci}.\n"
        f"Claims matched {diff.count('matched'):,}, only in B {diff.count('added'):,}, "
        f"only in A {diff.count('removed'):,}"
        + (f", {diff.duplicate_keys:,} texts with duplicates" if diff.duplicate_keys else "")
        + "."
    )


def newly_unsupported_table(diff: Diff, *, limit: int = 20) -> Table:
    """The claims that became unsupported and the stage where each entered."""
    rows, more = _limited(diff.newly_unsupported, limit)
    t = Table(title="Newly unsupported", title_justify="left")
    t.add_column("claim")
    t.add_column("text", ratio=3)
    t.add_column("A")
    t.add_column("B")
    t.add_column("entered at", ratio=1)
    for p in rows:
        assert p.b is not None
        t.add_row(_ids(p), _claim_text(p), verdict_text(p.a), verdict_text(p.b), entered_text(p.b))
    if more:
        t.caption = f"... {more:,} more (--json has all)"
    return t


def flipped_table(diff: Diff, *, limit: int = 20) -> Table:
    """Verdict flips other than newly unsupported claims (resolved ones among them)."""
    others = [p for p in diff.flipped if not p.newly_unsupported]
    rows, more = _limited(others, limit)
    t = Table(title="Other verdict flips", title_justify="left")
    t.add_column("claim")
    t.add_column("text", ratio=3)
    t.add_column("A")
    t.add_column("B")
    for p in rows:
        t.add_row(_ids(p), _claim_text(p), verdict_text(p.a), verdict_text(p.b))
    if more:
        t.caption = f"... {more:,} more (--json has all)"
    return t


def evidence_table(diff: Diff, *, limit: int = 20) -> Table:
    """Matched claims whose evidence sentences changed."""
    rows, more = _limited(diff.evidence_changed, limit)
    t = Table(title="Evidence changed", title_justify="left")
    t.add_column("claim")
    t.add_column("text", ratio=2)
    t.add_column("added (node#sentence)", ratio=1)
    t.add_column("removed", ratio=1)
    for p in rows:
        t.add_row(
            _ids(p),
            _claim_text(p),
            Text(" ".join(p.evidence_added), style="green"),
            Text(" ".join(p.evidence_removed), style="red"),
        )
    if more:
        t.caption = f"... {more:,} more (--json has all)"
    return t


def trail_moved_table(diff: Diff, *, limit: int = 20) -> Table:
    """Matched claims with the same verdict whose error stage or blamed node changed."""
    rows, more = _limited(diff.trail_moved, limit)
    t = Table(title="Error stage or blamed node changed (same verdict)", title_justify="left")
    t.add_column("claim")
    t.add_column("text", ratio=3)
    t.add_column("verdict")
    t.add_column("A entered at", ratio=1)
    t.add_column("B entered at", ratio=1)
    for p in rows:
        assert p.a is not None and p.b is not None
        t.add_row(_ids(p), _claim_text(p), verdict_text(p.b), entered_text(p.a), entered_text(p.b))
    if more:
        t.caption = f"... {more:,} more (--json has all)"
    return t


def citation_text(c: ClaimView | None) -> Text:
    """A claim's citation status, red when miscited; `-` for no claim or no status."""
    if c is None or c.citation is None:
        return Text("-", style="dim")
    return Text(c.citation, style="red" if c.miscited else "")


def cites_text(c: ClaimView) -> Text:
    """What a claim cites and where its evidence is: "cites X; evidence in Y"."""
    cited = ", ".join(c.cited_nodes) or "no source"
    held = ", ".join(c.supporting_nodes) or "no source"
    return Text(f"cites {cited}; evidence in {held}")


def citation_pairs(diff: Diff) -> list[Pair]:
    """Claims whose citation status changed or that became miscited, B's order."""
    return [p for p in diff.pairs if p.citation_changed or p.newly_miscited]


def citation_table(diff: Diff, *, limit: int = 20) -> Table:
    """Claims whose citation status changed (`--citations` in both runs) or that became
    miscited, with what B's claim cites and where its evidence is."""
    rows, more = _limited(citation_pairs(diff), limit)
    t = Table(title="Citation changed", title_justify="left")
    t.add_column("claim")
    t.add_column("text", ratio=3)
    t.add_column("A")
    t.add_column("B")
    t.add_column("B cites", ratio=2)
    for p in rows:
        assert p.b is not None
        t.add_row(_ids(p), _claim_text(p), citation_text(p.a), citation_text(p.b), cites_text(p.b))
    t.caption = f"{len(diff.newly_miscited):,} newly miscited" + (
        f"; ... {more:,} more (--json has all)" if more else ""
    )
    return t


def unmatched_table(diff: Diff, *, limit: int = 20) -> Table:
    """Claims of one run only (that are not newly unsupported: those have their own table)."""
    rows_all = [p for p in diff.pairs if p.status != "matched" and not p.newly_unsupported]
    rows, more = _limited(rows_all, limit)
    t = Table(title="Claims in one run only", title_justify="left")
    t.add_column("run")
    t.add_column("claim")
    t.add_column("text", ratio=3)
    t.add_column("verdict")
    for p in rows:
        c = p.b or p.a
        assert c is not None
        t.add_row("B" if p.b else "A", Text(c.id), Text(c.text), verdict_text(c))
    if more:
        t.caption = f"... {more:,} more (--json has all)"
    return t


def gate_line(diff: Diff, max_new_unsupported: int | None) -> Text:
    """The `--max-new-unsupported` verdict, or a plain count without a gate."""
    n = len(diff.newly_unsupported)
    if max_new_unsupported is None:
        return Text(f"{n:,} newly unsupported claim(s); no gate (--max-new-unsupported).")
    if gate_failed(diff, max_new_unsupported):
        return Text(
            f"gate failed: {n:,} newly unsupported claim(s), more than "
            f"--max-new-unsupported {max_new_unsupported:,}",
            style="bold red",
        )
    return Text(
        f"gate passed: {n:,} newly unsupported claim(s), at most {max_new_unsupported:,}",
        style="green",
    )


def diff_tables(
    diff: Diff, *, max_new_unsupported: int | None = None, limit: int = 20
) -> RenderableType:
    """Everything `veritrail diff` prints: empty tables are left out."""
    parts: list[RenderableType] = [summary_table(diff), share_line(diff)]
    if diff.a.terminal != diff.b.terminal:
        parts.append(
            Text(
                f"note: the runs verify different final outputs ({diff.a.terminal!r} and "
                f"{diff.b.terminal!r}); claims are matched by text alone.",
                style="yellow",
            )
        )
    if diff.newly_unsupported:
        parts.append(newly_unsupported_table(diff, limit=limit))
    if any(not p.newly_unsupported for p in diff.flipped):
        parts.append(flipped_table(diff, limit=limit))
    if diff.trail_moved:
        parts.append(trail_moved_table(diff, limit=limit))
    if citation_pairs(diff):
        parts.append(citation_table(diff, limit=limit))
    if diff.evidence_changed:
        parts.append(evidence_table(diff, limit=limit))
    if any(p.status != "matched" and not p.newly_unsupported for p in diff.pairs):
        parts.append(unmatched_table(diff, limit=limit))
    parts.append(gate_line(diff, max_new_unsupported))
    return Group(*parts)


__all__ = [
    "citation_table",
    "citation_text",
    "diff_tables",
    "entered_text",
    "gate_line",
    "pct",
    "points",
    "share_line",
    "summary_table",
    "trail_moved_table",
    "verdict_text",
]
