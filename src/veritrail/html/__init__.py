"""The self-contained HTML report: one file, inline CSS and JavaScript, opens from disk offline.

The report JSON is embedded as data in a ``<script type="application/json">`` element with
``<``, ``>`` and ``&`` written as JSON escapes (``\\u003c`` ...), so no node text can close the
element or open a tag; the page's script builds everything with ``textContent`` (never
``innerHTML`` of data). A Content-Security-Policy meta tag forbids any network load.

The template, stylesheet and script are package data next to this module (``template.html``,
``report.css``, ``report.js``). Sections for other detectors render when the report has one of
`EXTRA_SECTION_KEYS` (see the "EXTRA SECTIONS HOOK" block in ``report.js``).
"""

from __future__ import annotations

import json
from importlib import metadata, resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..report import ReportSource

EXTRA_SECTION_KEYS: tuple[str, ...] = ("g2l", "sirg")
"""Top-level report keys that get their own section (keep in sync with report.js)."""

_JSON_ESCAPES = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}


_JSON_TRANSLATE = str.maketrans(_JSON_ESCAPES)


def embed_json(value: Any) -> str:
    """JSON text safe to place inside a ``<script type="application/json">`` element.

    Outside string literals JSON never contains these characters, and inside them the escapes
    decode to the same text, so `json.loads(embed_json(x)) == x` for any JSON value.
    """
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    # str.translate runs in C: a per-character generator took 3 s of a 25,000-node trail's run.
    return text.translate(_JSON_TRANSLATE)


def _asset(name: str) -> str:
    return (resources.files(__name__) / name).read_text(encoding="utf-8")


def _version() -> str:
    try:
        return metadata.version("veritrail")
    except metadata.PackageNotFoundError:
        return "dev"


def report_json(report: ReportSource) -> str:
    """The report as the page embeds it (`embed_json`'s escaping): a document as it is (the
    run's own, just built by `report.build_report`, or a file's); a typed report (validated by
    its reader with `report.as_report`) as its document (`report.report_document`: the fields
    the file had, and the migrated ones), written by pydantic's serializer in one pass (a 5 MB
    report: 0.17 s, against 0.65 s through Python objects and `json.dumps`). This side reads no
    field of the report: the page's script does, and only fields the schema has
    (tests/test_html_report.py)."""
    from ..report import ReportDoc

    if isinstance(report, ReportDoc):
        text = report.model_dump_json(exclude_unset=True, by_alias=True)
        return text.translate(_JSON_TRANSLATE)
    return embed_json(report)


def render_html(report: ReportSource, *, back: tuple[str, str] | None = None) -> str:
    """The whole HTML document for a report: a document (as built by `report.build_report`) or
    the typed model (`report_json`).

    `back`: (URL, words) of a link back where the page was opened from (`veritrail view`'s
    trail page: to its run, and to the list of runs), drawn above the report; our own URL,
    never data from the report. The file reports have none."""
    css = _asset("report.css")
    js = _asset("report.js")
    # The assets are ours, but a slip here would break the page for every report: check once.
    if "</style" in css.lower() or "</script" in js.lower():
        raise ValueError("report assets must not contain a closing style/script tag")
    template = _asset("template.html")
    head, sep, tail = template.partition("__VT_DATA__")
    if not sep:
        raise ValueError("template.html has no data placeholder")

    def fill(part: str) -> str:
        return (
            part.replace("/*__VT_CSS__*/", css)
            .replace("/*__VT_JS__*/", js)
            .replace("__VT_VERSION__", _version())
        )

    if back is not None:
        import html as _html

        url, words = back
        nav = (
            '<nav id="vt-back" class="back-nav">'
            f'<a href="{_html.escape(url, quote=True)}" target="_top">\u2190 {_html.escape(words)}</a>'
            ' \u00b7 <a href="/" target="_top">all runs</a></nav>\n'
        )
        head = head.replace('<header id="vt-header">', nav + '<header id="vt-header">', 1)
    # The data goes in last and is never searched for placeholders.
    return fill(head) + report_json(report) + fill(tail)


def write_html(report: ReportSource, path: str | Path) -> Path:
    """Render `report` and write it to `path` (UTF-8, atomically, every string of the report
    passed through `redaction.redact_obj`); returns the path."""
    from ..redaction import redact_obj
    from ..report import ReportDoc, atomic_write_text, report_document

    doc = report_document(report) if isinstance(report, ReportDoc) else report
    return atomic_write_text(path, render_html(redact_obj(doc)))


__all__ = ["EXTRA_SECTION_KEYS", "embed_json", "render_html", "report_json", "write_html"]
