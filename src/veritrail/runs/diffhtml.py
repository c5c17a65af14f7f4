"""`veritrail diff --html`: the diff as one self-contained page in the style of the trail report.

The page is built here, on the server side, from the diff document (`diff.diff_document`), with
the trail report's stylesheet (`veritrail/html/report.css`) and `web/diff.css` inline and no
script at all. The escaping rule is the trail report's, applied in Python: every string from the
data goes through `text()`, which makes bidirectional controls visible as code points (as
report.js's `showText` does), escapes `<`, `>`, `&` and quotes (`html.escape`), and isolates
the piece in a `<bdi>`. Nothing from the data is ever written as markup or used as a URL. A
Content-Security-Policy meta tag forbids every network load and every script.

`diff_sections(doc)` is the page's body without the document around it: `veritrail view`'s
compare page shows the same sections.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Any

from ..records import Verdict

_BIDI_CONTROLS = re.compile("[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"

_VCLASS = {
    Verdict.FULLY_SUPPORTED.value: "fs",
    Verdict.NOT_FULLY_SUPPORTED.value: "nfs",
    Verdict.INCONCLUSIVE.value: "inc",
}


def show_text(value: object) -> str:
    """`value` as text with its bidirectional controls shown as `[U+202E]` (never applied)."""
    s = "" if value is None else str(value)
    return _BIDI_CONTROLS.sub(lambda m: f"[U+{ord(m.group(0)):04X}]", s)


def text(value: object) -> str:
    """One piece of data as HTML: bidi controls visible, escaped, isolated in a `<bdi>`."""
    return f"<bdi>{html.escape(show_text(value), quote=True)}</bdi>"


def attr(value: object) -> str:
    """Data as the value of a (non-URL) attribute, quotes included."""
    return '"' + html.escape(show_text(value), quote=True) + '"'


def css() -> str:
    """The trail report's stylesheet followed by the diff's additions."""
    base = (resources.files("veritrail.html") / "report.css").read_text(encoding="utf-8")
    extra = (resources.files(__package__) / "web" / "diff.css").read_text(encoding="utf-8")
    out = base + "\n" + extra
    if "</style" in out.lower():  # ours, but a slip would let the sheet close its element
        raise ValueError("stylesheets must not contain a closing style tag")
    return out


def pct(x: float | None) -> str:
    """A share as a percentage."""
    return "–" if x is None else f"{100 * x:.1f}%"


def points(x: float | None) -> str:
    """A difference of shares in percentage points, signed."""
    return "–" if x is None else f"{100 * x:+.1f} pp"


def verdict_badge(claim: Mapping[str, Any] | None) -> str:
    """A verdict badge as the trail report draws them (`reviewed` noted)."""
    if claim is None:
        return '<span class="empty">not in this run</span>'
    v = claim.get("verdict")
    label = "Error" if v is None else v
    out = f'<span class="badge {_VCLASS.get(v or "", "err")}">{text(label)}</span>'
    if claim.get("reviewed"):
        model = claim.get("model_verdict") or "Error"
        out += f' <span class="note">reviewed; model: {text(model)}</span>'
    return out


def _entered(claim: Mapping[str, Any]) -> str:
    stages = claim.get("error_stages") or []
    if not stages:
        return '<span class="note">not identifiable</span>'
    out = "stage " + html.escape(", ".join(str(int(s)) for s in stages))
    nodes = claim.get("entered_at") or []
    if nodes:
        out += " " + " ".join(f'<span class="nid">{text(n)}</span>' for n in nodes)
    return out


def _ids(change: Mapping[str, Any]) -> str:
    a, b = change.get("a"), change.get("b")
    ia, ib = (a or {}).get("id"), (b or {}).get("id")
    if ia is not None and ib is not None and ia != ib:
        return f'{text(ia)}<span class="arrow">→</span>{text(ib)}'
    return text(ib if ib is not None else ia)


def _claim_text(change: Mapping[str, Any]) -> str:
    c = change.get("b") or change.get("a") or {}
    return f'<span class="claim-text">{text(c.get("text", ""))}</span>'


def _table(title: str, head: Sequence[str], rows: Sequence[str], *, section_id: str) -> str:
    th = "".join(f"<th>{h}</th>" for h in head)
    body = "".join(rows) or f'<tr><td colspan="{len(head)}" class="empty">none</td></tr>'
    return (
        f'<section class="diff" id="{section_id}"><h2>{title} ({len(rows):,})</h2>'
        f'<table class="grid"><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table></section>'
    )


def stage_chart(
    stages: Mapping[str, int],
    *,
    label: str = "newly unsupported claims per stage",
    empty: str = "No claim became unsupported.",
) -> str:
    """Bars of claims per stage where they entered (inline SVG; keys are stage numbers or a
    word such as "not identifiable"; at most 30 bars, as the trail report draws)."""
    if not stages:
        return f'<p class="note">{html.escape(empty)}</p>'
    items = list(stages.items())[:30]
    top = max(v for _, v in items) or 1
    row, width = 20, 220
    parts = [
        f'<svg class="bars" role="img" aria-label={attr(label)} '
        f'width="{120 + width + 40}" height="{row * len(items) + 6}">'
    ]
    for i, (name, n) in enumerate(items):
        y = i * row + 3
        w = max(2, round(width * n / top))
        label = f"stage {name}" if name[:1].isdigit() else name
        parts.append(
            f'<text x="0" y="{y + 13}">{html.escape(show_text(label))}</text>'
            f'<rect class="bar" x="120" y="{y}" width="{w}" height="{row - 6}"></rect>'
            f'<text x="{124 + w}" y="{y + 13}">{n:,}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _summary(doc: Mapping[str, Any]) -> str:
    c, s, g, m = doc["counts"], doc["share"], doc["gate"], doc["matching"]
    tiles = "".join(
        f'<div class="tile {cls}"><span class="n">{n:,}</span><span class="l">{label}</span></div>'
        for cls, n, label in (
            ("nfs", c["newly_unsupported"], "newly unsupported"),
            ("fs", c["resolved"], "resolved"),
            ("inc", c["flipped"], "verdicts flipped"),
            ("plain", c["evidence_changed"], "evidence changed"),
            ("plain", c.get("trail_moved", 0), "stage or node moved"),
            ("nfs", c.get("newly_miscited", 0), "newly miscited"),
        )
    )
    runs = "".join(
        f"<tr><td>{side}</td><td>{text(d['path'] or d['label'])}</td><td>{text(d['model'])}</td>"
        f'<td class="num">{d["claims"]:,}</td><td class="num">{d["unsupported"]:,}</td>'
        f'<td class="num">{pct(d["unsupported_share"])}</td></tr>'
        for side, d in (("A", doc["a"]), ("B", doc["b"]))
    )
    ci = (
        f" ({100 * s['confidence']:.0f}% CI {points(s['ci_low'])} to {points(s['ci_high'])}; "
        f"bootstrap, {s['resamples']:,} resamples, seed {s['seed']})"
        if s["ci_low"] is not None
        else ""
    )
    if g["max_new_unsupported"] is None:
        gate = f'<p class="note">{g["newly_unsupported"]:,} newly unsupported; no gate.</p>'
    elif g["failed"]:
        gate = (
            f'<p class="gate-failed">Gate failed: {g["newly_unsupported"]:,} newly unsupported, '
            f"more than {g['max_new_unsupported']:,}.</p>"
        )
    else:
        gate = (
            f'<p class="gate-passed">Gate passed: {g["newly_unsupported"]:,} newly unsupported, '
            f"at most {g['max_new_unsupported']:,}.</p>"
        )
    note = (
        ""
        if m["same_terminal"]
        else '<p class="note">The runs verify different final outputs; claims are matched by '
        "text alone.</p>"
    )
    return (
        '<section id="vt-summary" aria-label="Summary"><div class="summary-grid">'
        f'<div class="tiles">{tiles}</div>'
        '<div class="box"><h3>Unsupported share</h3><table class="grid"><thead><tr><th>run</th>'
        "<th>source</th><th>model</th><th class=num>claims</th><th class=num>unsupported</th>"
        f"<th class=num>share</th></tr></thead><tbody>{runs}</tbody></table>"
        f"<p>B − A: <strong>{points(s['difference'])}</strong>{ci}.</p>"
        f'<p class="note">Matched {m["matched"]:,}; only in B {m["added"]:,}; only in A '
        f"{m['removed']:,}; texts with duplicates {m['duplicate_keys']:,}.</p>{note}{gate}</div>"
        '<div class="box"><h3>Where newly unsupported claims entered</h3>'
        f"{stage_chart(doc['stages'])}</div></div></section>"
    )


def _citation(claim: Mapping[str, Any] | None) -> str:
    """A claim's citation status (version 3's `citation.kind`), `–` when it has none."""
    ct = (claim or {}).get("citation")
    return text(ct["kind"]) if ct else "–"


def _cites(claim: Mapping[str, Any] | None) -> str:
    """What the claim cites and where its evidence is, as node chips."""
    ct = (claim or {}).get("citation")
    if not ct:
        return "–"

    def chips(nodes: Sequence[str]) -> str:
        return " ".join(f'<span class="nid">{text(n)}</span>' for n in nodes) or "no source"

    return f"cites {chips(ct['cited_nodes'])}; evidence in {chips(ct['supporting_nodes'])}"


def diff_sections(doc: Mapping[str, Any]) -> str:
    """The diff's sections as HTML (the summary, then one table per kind of change)."""
    changes: list[Mapping[str, Any]] = list(doc["changes"])
    newly = [
        f'<tr class="nfs"><td>{_ids(ch)}</td><td>{_claim_text(ch)}</td>'
        f"<td>{verdict_badge(ch['a'])}</td><td>{verdict_badge(ch['b'])}</td>"
        f"<td>{_entered(ch['b'])}</td></tr>"
        for ch in changes
        if ch["newly_unsupported"]
    ]
    flips = [
        f'<tr class="{"fs" if ch["resolved"] else ""}"><td>{_ids(ch)}</td>'
        f"<td>{_claim_text(ch)}</td><td>{verdict_badge(ch['a'])}</td>"
        f"<td>{verdict_badge(ch['b'])}</td></tr>"
        for ch in changes
        if ch["flipped"] and not ch["newly_unsupported"]
    ]
    moved = [
        f"<tr><td>{_ids(ch)}</td><td>{_claim_text(ch)}</td><td>{verdict_badge(ch['b'])}</td>"
        f"<td>{_entered(ch['a'])}</td><td>{_entered(ch['b'])}</td></tr>"
        for ch in changes
        if ch.get("trail_moved")
    ]
    cited = [
        f'<tr class="{"nfs" if ch.get("newly_miscited") else ""}"><td>{_ids(ch)}</td>'
        f"<td>{_claim_text(ch)}</td><td>{_citation(ch['a'])}</td><td>{_citation(ch['b'])}</td>"
        f"<td>{_cites(ch['b'])}</td></tr>"
        for ch in changes
        if ch.get("citation_changed") or ch.get("newly_miscited")
    ]
    evidence = [
        f"<tr><td>{_ids(ch)}</td><td>{_claim_text(ch)}</td><td>"
        + " ".join(f'<span class="nid ev-add">+{text(e)}</span>' for e in ch["evidence_added"])
        + "</td><td>"
        + " ".join(f'<span class="nid ev-del">−{text(e)}</span>' for e in ch["evidence_removed"])
        + "</td></tr>"
        for ch in changes
        if ch["evidence_added"] or ch["evidence_removed"]
    ]
    one_side = [
        f"<tr><td>{'B' if ch['b'] else 'A'}</td><td>{_ids(ch)}</td><td>{_claim_text(ch)}</td>"
        f"<td>{verdict_badge(ch['b'] or ch['a'])}</td></tr>"
        for ch in changes
        if ch["status"] != "matched" and not ch["newly_unsupported"]
    ]
    return (
        _summary(doc)
        + _table(
            "Newly unsupported",
            ["claim", "text", "A", "B", "entered at"],
            newly,
            section_id="vt-newly",
        )
        + _table("Other verdict flips", ["claim", "text", "A", "B"], flips, section_id="vt-flips")
        + _table(
            "Error stage or blamed node changed (same verdict)",
            ["claim", "text", "verdict", "A entered at", "B entered at"],
            moved,
            section_id="vt-moved",
        )
        + _table(
            "Citation changed",
            ["claim", "text", "A citation", "B citation", "B cites"],
            cited,
            section_id="vt-citations",
        )
        + _table(
            "Evidence changed",
            ["claim", "text", "added (node#sentence)", "removed"],
            evidence,
            section_id="vt-evidence",
        )
        + _table(
            "Claims in one run only",
            ["run", "claim", "text", "verdict"],
            one_side,
            section_id="vt-unmatched",
        )
    )


def render_diff_html(doc: Mapping[str, Any]) -> str:
    """The whole self-contained page for a diff document."""
    a, b = doc["a"], doc["b"]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        f"<title>VeriTrail diff</title><style>\n{css()}\n</style></head><body>"
        '<header id="vt-header"><h1>VeriTrail diff</h1><div class="meta">'
        f"<span>A: {text(a['path'] or a['label'])}</span>"
        f"<span>B: {text(b['path'] or b['label'])}</span></div></header>"
        f"<main>{diff_sections(doc)}</main></body></html>\n"
    )


__all__ = [
    "CSP",
    "attr",
    "css",
    "diff_sections",
    "pct",
    "points",
    "render_diff_html",
    "show_text",
    "stage_chart",
    "text",
    "verdict_badge",
]
