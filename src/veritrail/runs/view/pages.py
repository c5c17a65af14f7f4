"""The pages of `veritrail view`: Jinja2 templates (autoescaped) and the inline SVG charts.

Every string from a run (ids, DAG and model names, claims, reasons, node ids) reaches a page
through Jinja2's autoescape, or through the `t` filter, which is `diffhtml.text` (bidirectional
controls made visible, escaped, isolated in a `<bdi>`), the escaping of `veritrail diff --html`.
The charts are built here as SVG text with the same escaping; the templates and stylesheets are
package data in ``runs/web/``.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from functools import cache
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup

from ...records import Verdict
from ..diffhtml import show_text, stage_chart, text
from ..index import ClaimRow, RunRow

PALETTE = ("#1a5fb4", "#c62828", "#2e7d32", "#a15c00", "#6a1b9a", "#00838f", "#5f6368", "#ad1457")
"""Line colours of the trend chart, one per DAG (the first eight DAGs; others are grey)."""

UNSUPPORTED = Verdict.NOT_FULLY_SUPPORTED.value


@cache
def environment() -> Environment:
    """The templates' environment: autoescape on for every template."""
    env = Environment(
        loader=PackageLoader("veritrail.runs", "web/templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["t"] = lambda v: Markup(text(v))
    env.filters["s"] = show_text  # where no element may go (an <option>): escaped by autoescape
    env.filters["pct"] = lambda x: "–" if x is None else f"{100 * x:.1f}%"
    env.filters["when"] = lambda d: d.strftime("%Y-%m-%d %H:%M") if d else "–"
    env.filters["vclass"] = vclass
    env.filters["model_label"] = model_label
    return env


def model_label(model: str | None) -> str | None:
    """The words shown beside a model's name wherever its verdicts appear (the list, the compare
    page, a run's page): "demonstration, not a judge" for demo/, the embedded model's for
    local/, the oracle's; none for a judge."""
    from ...report import MODEL_LABELS, model_kind

    return MODEL_LABELS[model_kind(model)]


def render(name: str, **context: Any) -> str:
    """A page from its template."""
    return environment().get_template(name).render(**context)


def vclass(verdict: str | None) -> str:
    """The trail report's class of a verdict (`fs`, `nfs`, `inc`, `err`)."""
    return {
        Verdict.FULLY_SUPPORTED.value: "fs",
        UNSUPPORTED: "nfs",
        Verdict.INCONCLUSIVE.value: "inc",
    }.get(verdict or "", "err")


def stage_counts(claims: Iterable[ClaimRow]) -> dict[str, int]:
    """Unsupported claims (after review) per error stage, "not identifiable" apart."""
    out: dict[str, int] = {}
    for c in claims:
        if c.effective_verdict != UNSUPPORTED:
            continue
        names = [str(s) for s in c.error_stages] or ["not identifiable"]
        for name in names:
            out[name] = out.get(name, 0) + 1
    numbered = sorted((k for k in out if k.isdigit()), key=int)
    return {k: out[k] for k in [*numbered, *(k for k in out if not k.isdigit())]}


def run_stage_chart(claims: Sequence[ClaimRow]) -> Markup:
    """The stage chart of a run: where its unsupported content entered."""
    return Markup(
        stage_chart(
            stage_counts(claims),
            label="unsupported claims per stage where they entered",
            empty="No unsupported claim.",
        )
    )


def trend_chart(runs: Sequence[RunRow], *, width: int = 640, height: int = 200) -> Markup:
    """The unsupported share per DAG over time: one line per DAG (inline SVG, no script).
    Runs without a share (no claims) are left out; x is the run's creation time."""
    points: dict[str, list[tuple[datetime, float, str]]] = {}
    for r in runs:
        if r.unsupported_share is not None:
            points.setdefault(r.dag, []).append((r.created, r.unsupported_share, r.id))
    if not points:
        return Markup('<p class="note">No run with claims to chart.</p>')
    times = [t.timestamp() for pts in points.values() for t, _, _ in pts]
    t0, t1 = min(times), max(times)
    span = (t1 - t0) or 1.0
    left, right, top, bottom = 44, 12, 10, 26
    w, h = width - left - right, height - top - bottom

    def xy(t: datetime, share: float) -> tuple[float, float]:
        x = left + (w * (t.timestamp() - t0) / span if t1 > t0 else w / 2)
        return round(x, 1), round(top + h * (1 - share), 1)

    parts = [
        f'<svg class="trend" role="img" aria-label="unsupported share per DAG over time" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}">'
    ]
    for frac in (0.0, 0.25, 0.5, 0.75, 1.0):
        y = round(top + h * (1 - frac), 1)
        parts.append(
            f'<line class="grid" x1="{left}" y1="{y}" x2="{left + w}" y2="{y}"></line>'
            f'<text class="axis" x="{left - 6}" y="{y + 4}" text-anchor="end">'
            f"{100 * frac:.0f}%</text>"
        )
    fmt = "%Y-%m-%d %H:%M" if t1 - t0 < 2 * 86400 else "%Y-%m-%d"
    for edge, anchor, edge_x in ((t0, "start", left), (t1, "end", left + w)):
        when = datetime.fromtimestamp(edge, UTC).strftime(fmt)
        parts.append(
            f'<text class="axis" x="{edge_x}" y="{height - 6}" text-anchor="{anchor}">{when}</text>'
        )
    legend = []
    for i, (dag, pts) in enumerate(sorted(points.items())):
        colour = PALETTE[i] if i < len(PALETTE) else "#9aa5b1"
        pts.sort()
        coords = [xy(t, s) for t, s, _ in pts]
        if len(coords) > 1:
            path = " ".join(f"{x},{y}" for x, y in coords)
            parts.append(f'<polyline fill="none" stroke="{colour}" points="{path}"></polyline>')
        for (cx, cy), (when_run, share, rid) in zip(coords, pts, strict=True):
            tip = (
                f"{show_text(dag)} · {show_text(rid)} · {when_run:%Y-%m-%d %H:%M} · "
                f"{100 * share:.1f}%"
            )
            parts.append(
                f'<circle cx="{cx}" cy="{cy}" r="3.5" fill="{colour}">'
                f"<title>{html.escape(tip)}</title></circle>"
            )
        legend.append(
            f'<li><svg width="10" height="10" aria-hidden="true"><rect width="10" height="10" '
            f'rx="2" fill="{colour}"></rect></svg> {text(dag)} '
            f'<span class="note">({len(pts)} run{"s" if len(pts) != 1 else ""})</span></li>'
        )
    parts.append("</svg>")
    return Markup("".join(parts) + f'<ul class="legend">{"".join(legend)}</ul>')


def reviews_by_claim(reviews: Iterable[Any]) -> Mapping[str, list[Any]]:
    """A run's reviews grouped by claim id, newest first (the history of each claim)."""
    out: dict[str, list[Any]] = {}
    for r in reviews:
        out.setdefault(r.claim_id, []).insert(0, r)
    return out


__all__ = [
    "environment",
    "render",
    "reviews_by_claim",
    "run_stage_chart",
    "stage_counts",
    "trend_chart",
    "vclass",
]
