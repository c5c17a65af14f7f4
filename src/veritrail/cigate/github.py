"""GitHub Actions workflow commands: one `::error` line per unsupported claim (`::warning` per
claim that ended in error, `::notice` per Inconclusive one; per miscited claim of a run with
`--citations`, `::error` when the `--max-miscited` gate failed, else `::warning`), so the run's page and the pull
request show them as annotations.

Escaping follows GitHub's workflow-command rules (the runner's `escapeData`/`escapeProperty`):
in the message `%`, CR and LF become `%25`, `%0D`, `%0A`; in a property value also `:` and `,`
become `%3A` and `%2C`. Nothing the pipeline wrote can end the line or start another command.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..display import shorten
from .findings import RULES, Finding, GateInput, Kind

_COMMAND = {
    Kind.UNSUPPORTED: "error",
    Kind.ERROR: "warning",
    Kind.INCONCLUSIVE: "notice",
    Kind.MISCITED: "warning",
}


def escape_data(text: str) -> str:
    """A workflow command's message, escaped."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A workflow command's property value, escaped."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(gi: GateInput, f: Finding) -> str:
    """One workflow command line for a reported finding."""
    if f.kind is Kind.UNSUPPORTED:
        title = f"Not Fully Supported: claim {f.claim_id} ({f.where})"
    elif f.kind is Kind.MISCITED:
        title = f"Miscited: claim {f.claim_id} ({f.cites})"
    else:
        title = f"{RULES[f.kind][1]}: claim {f.claim_id}"
    if gi.model_label:
        title += f" [{gi.model_label}]"
    props = []
    if gi.dag_uri:
        props.append(f"file={escape_property(gi.dag_uri)}")
        node = f.nodes[0] if f.nodes else None
        props.append(f"line={gi.node_line(node)}")
    props.append(f"title={escape_property(shorten(title, 200))}")
    detail = f.error if f.kind is Kind.ERROR else f.reasoning
    if f.kind is Kind.MISCITED:
        detail = f.cites
    message = f"{f.text}\n{detail or ''}".rstrip()
    if len(message) > 2000:
        message = message[:1999] + "…"
    command = "error" if f.kind is Kind.MISCITED and f.gate_failed else _COMMAND[f.kind]
    return f"::{command} {','.join(props)}::{escape_data(message)}"


def github_annotations(inputs: Sequence[GateInput]) -> list[str]:
    """Every annotation line of `inputs`, unsupported claims first, then errors, then
    Inconclusive ones, then miscited ones."""
    order = (Kind.UNSUPPORTED, Kind.ERROR, Kind.INCONCLUSIVE, Kind.MISCITED)
    return [annotation(gi, f) for k in order for gi in inputs for f in gi.findings if f.kind is k]
