"""`veritrail diff --markdown`: the diff as the body of one pull-request comment.

Built from the diff document (`diff.diff_document`, `"format": "veritrail-diff"`), as the HTML
page is. The first line is the hidden marker `<!-- veritrail-report -->`, by which
`cigate.comment` finds the comment a previous run posted and updates it instead of posting a
second one.

Everything that comes from a report (claim text, ids, node ids, paths, model names) is data, never
Markdown: `md_text` puts it on one line, shows control and bidirectional characters as
`[U+001B]`, backslash-escapes every ASCII punctuation character (so no emphasis, link, image,
table pipe or HTML tag can form; CommonMark allows the escape before any of them) and puts a word
joiner after `@` and `#`, so a claim cannot mention a person or a team nor link an issue.
GitHub refuses a comment over 65,536 characters: the tables are cut to `rows` rows each and the
body to `MAX_CHARS`, with a line that says so.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..redaction import redact

MARKER = "<!-- veritrail-report -->"
"""The hidden first line of the comment: how a later run finds it (`cigate.comment`)."""

MAX_CHARS = 60_000
"""The body's cap, under GitHub's 65,536 characters per comment."""

DEFAULT_ROWS = 25
"""Rows per table of the comment."""

TEXT_LIMIT = 300
"""Characters of a claim's text in a cell."""

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u061c\u202a-\u202e\u2066-\u2069]")
_SPACE = re.compile(r"[\t\n\r\f\v\u2028\u2029 ]+")
_PUNCT = re.compile(r"([!-/:-@\[-`{-~])")
_WORD_JOINER = "\u2060"


def md_text(value: object, limit: int = TEXT_LIMIT) -> str:
    """One piece of data as inert Markdown on one line (see the module docstring)."""
    s = "" if value is None else str(value)
    s = _SPACE.sub(" ", s).strip()
    s = _CONTROL.sub(lambda m: f"[U+{ord(m.group(0)):04X}]", s)
    if len(s) > limit:
        s = s[: limit - 1].rstrip() + "…"
    s = _PUNCT.sub(r"\\\1", s)
    # After the escapes: `\@name` still renders as a mention on GitHub; a joiner does not.
    return s.replace("@", "@" + _WORD_JOINER).replace("#", "#" + _WORD_JOINER)


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def _points(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:+.1f} pp".replace("-", "−")


def _verdict(claim: Mapping[str, Any] | None, side: str) -> str:
    if claim is None:
        return f"_not in {side}_"
    v = claim.get("verdict")
    out = md_text(v if v is not None else "error")
    if claim.get("reviewed"):
        out += " (reviewed)"
    return out


def _entered(claim: Mapping[str, Any] | None) -> str:
    """Where an unsupported claim entered: its error stage(s) and the nodes blamed."""
    if claim is None:
        return "–"
    stages = claim.get("error_stages") or []
    if not stages:
        unsupported = claim.get("verdict") == "Not Fully Supported"
        return "not identifiable" if unsupported else "–"
    out = "stage " + ", ".join(str(int(s)) for s in stages)
    nodes = claim.get("entered_at") or []
    if nodes:
        # Not in a code span: a backslash escape is literal there.
        out += " (" + ", ".join(md_text(n, 80) for n in nodes) + ")"
    return out


def _ids(change: Mapping[str, Any]) -> str:
    a, b = change.get("a"), change.get("b")
    if a and b and a.get("id") != b.get("id"):
        return f"{md_text(a.get('id'), 40)} → {md_text(b.get('id'), 40)}"
    c = b or a or {}
    return md_text(c.get("id"), 40)


def _text(change: Mapping[str, Any]) -> str:
    c = change.get("b") or change.get("a") or {}
    return md_text(c.get("text"))


def _citation(claim: Mapping[str, Any] | None) -> str:
    """A claim's citation status (`–`: none, or no such claim)."""
    ct = (claim or {}).get("citation")
    return md_text(ct.get("kind"), 40) if ct else "–"


def _cites(claim: Mapping[str, Any] | None) -> str:
    """What the claim cites and where its evidence is."""
    ct = (claim or {}).get("citation")
    if not ct:
        return "–"
    cited = ", ".join(md_text(n, 80) for n in ct.get("cited_nodes") or []) or "no source"
    held = ", ".join(md_text(n, 80) for n in ct.get("supporting_nodes") or []) or "no source"
    return f"cites {cited}; evidence in {held}"


def _table(
    title: str,
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    limit: int,
) -> list[str]:
    shown = rows if limit <= 0 else rows[:limit]
    out = [f"#### {title} ({len(rows):,})", "", "| " + " | ".join(header) + " |"]
    out.append("| " + " | ".join("---" for _ in header) + " |")
    out.extend("| " + " | ".join(cells) + " |" for cells in shown)
    if len(rows) > len(shown):
        out += ["", f"_… {len(rows) - len(shown):,} more: `veritrail diff --json` has all._"]
    return [*out, ""]


def _gate_line(gate: Mapping[str, Any]) -> str:
    n = int(gate.get("newly_unsupported") or 0)
    limit = gate.get("max_new_unsupported")
    if limit is None:
        return f"**{n:,} newly unsupported claim(s)**; no gate (`--max-new-unsupported`)."
    if gate.get("failed"):
        return (
            f"**Gate failed:** {n:,} newly unsupported claim(s), more than "
            f"`--max-new-unsupported {int(limit):,}`."
        )
    return f"**Gate passed:** {n:,} newly unsupported claim(s), at most {int(limit):,}."


def _runs_table(doc: Mapping[str, Any]) -> list[str]:
    out = [
        "| run | report | model | claims | unsupported | share |",
        "| --- | --- | --- | ---: | ---: | ---: |",
    ]
    for key, name in (("a", "A (base)"), ("b", "B (this change)")):
        side = doc.get(key) or {}
        out.append(
            f"| {name} | {md_text(side.get('path'), 120)} | {md_text(side.get('model'), 80)} | "
            f"{int(side.get('claims') or 0):,} | {int(side.get('unsupported') or 0):,} | "
            f"{_pct(side.get('unsupported_share'))} |"
        )
    return [*out, ""]


def _share_lines(doc: Mapping[str, Any]) -> list[str]:
    s = doc.get("share") or {}
    line = f"**Unsupported share B − A: {_points(s.get('difference'))}**"
    if s.get("ci_low") is not None:
        line += (
            f" ({100 * float(s.get('confidence') or 0.95):.0f}% CI {_points(s.get('ci_low'))} to "
            f"{_points(s.get('ci_high'))}; bootstrap, {int(s.get('resamples') or 0):,} "
            f"resamples, seed {s.get('seed')})"
        )
    m, c = doc.get("matching") or {}, doc.get("counts") or {}
    line += "."
    counts = (
        f"Claims matched {int(m.get('matched') or 0):,}, only in B {int(m.get('added') or 0):,}, "
        f"only in A {int(m.get('removed') or 0):,}. "
        f"Resolved {int(c.get('resolved') or 0):,}, flipped {int(c.get('flipped') or 0):,}, "
        f"evidence changed {int(c.get('evidence_changed') or 0):,}, "
        f"trail moved {int(c.get('trail_moved') or 0):,}, "
        f"citation changed {int(c.get('citation_changed') or 0):,}, "
        f"newly miscited {int(c.get('newly_miscited') or 0):,}."
    )
    out = [line, "", counts, ""]
    if not m.get("same_terminal", True):
        out += ["_The runs verify different final outputs: claims are matched by text alone._", ""]
    return out


def render_diff_markdown(
    doc: Mapping[str, Any] | Any, *, rows: int = DEFAULT_ROWS, title: str = "veritrail diff"
) -> str:
    """The pull-request comment of a diff document: marker, gate, both runs, the share's
    difference with its interval, the newly unsupported claims with the stage and nodes where
    each entered, the other verdict flips, the moved trails and the citation changes (newly
    miscited claims in bold; `rows` per table, 0: all)."""
    if not isinstance(doc, Mapping) and hasattr(doc, "model_dump"):
        doc = doc.model_dump(mode="json")  # a typed diff document: its JSON form is the format
    changes: list[Mapping[str, Any]] = list(doc.get("changes") or [])
    lines = [MARKER, f"### {md_text(title, 120)}", "", _gate_line(doc.get("gate") or {}), ""]
    lines += _runs_table(doc)
    lines += _share_lines(doc)
    newly = [c for c in changes if c.get("newly_unsupported")]
    if newly:
        lines += _table(
            "Newly unsupported",
            ("claim", "text", "A", "B", "entered at"),
            [
                (
                    _ids(c),
                    _text(c),
                    _verdict(c.get("a"), "A"),
                    _verdict(c.get("b"), "B"),
                    _entered(c.get("b")),
                )
                for c in newly
            ],
            rows,
        )
    flips = [c for c in changes if c.get("flipped") and not c.get("newly_unsupported")]
    if flips:
        lines += _table(
            "Other verdict flips",
            ("claim", "text", "A", "B"),
            [
                (_ids(c), _text(c), _verdict(c.get("a"), "A"), _verdict(c.get("b"), "B"))
                for c in flips
            ],
            rows,
        )
    moved = [c for c in changes if c.get("trail_moved")]
    if moved:
        lines += _table(
            "Trail moved (same verdict, entered elsewhere)",
            ("claim", "text", "verdict", "A entered at", "B entered at"),
            [
                (
                    _ids(c),
                    _text(c),
                    _verdict(c.get("b"), "B"),
                    _entered(c.get("a")),
                    _entered(c.get("b")),
                )
                for c in moved
            ],
            rows,
        )
    cited = [c for c in changes if c.get("citation_changed") or c.get("newly_miscited")]
    if cited:
        lines += _table(
            "Citation changed",
            ("claim", "text", "A", "B", "B cites"),
            [
                (
                    _ids(c),
                    _text(c),
                    _citation(c.get("a")),
                    ("**" + _citation(c.get("b")) + "**")
                    if c.get("newly_miscited")
                    else _citation(c.get("b")),
                    _cites(c.get("b")),
                )
                for c in cited
            ],
            rows,
        )
    if not (newly or flips or moved or cited):
        lines += ["No claim became unsupported and no verdict changed.", ""]
    lines.append("<sub>Posted by veritrail; later runs update this comment.</sub>")
    body = redact("\n".join(lines) + "\n")
    if len(body) > MAX_CHARS:
        note = "\n\n_… cut to fit one comment: `veritrail diff --json` has all._\n"
        cut = body[: MAX_CHARS - len(note)]
        body = cut[: cut.rfind("\n")] + note
    return body


__all__ = ["DEFAULT_ROWS", "MARKER", "MAX_CHARS", "md_text", "render_diff_markdown"]
