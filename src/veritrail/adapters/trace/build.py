"""Trace spans → generation DAG (docs/adapters.md, "Traces").

Span parent links record who called whom, not whose output fed whom, so edges come from the
texts: `u → v` when `u`'s text is part of the input of the generation that produced `v`.

* **Roots** are the texts that enter the trace from outside: the input of the trace (its
  top-level spans) and of every chain or agent (each string leaf its own root), retrieved
  documents, and tool outputs. A chain input that contains the output of a generation that had
  finished by then is derived text, not a root; so is one that is part of a text already
  recorded (a trimmed document); a chain-input leaf shorter than `MatchSettings.min_root_words`
  words is ignored (ids, flags, one-word parameters), and so is one that is a Python object's
  repr (`Name(field=...`, `<Name object at 0x...>`: LlamaIndex's workflow events). The user
  turns of a prompt before the last are roots too (a conversation's history), and the last one
  when some chain inputs were reprs, or when none recorded text in a trace with tool calls (the
  OpenAI Agents SDK).
* Each **LLM generation** is a node holding its output text. **Identical texts are one node**
  (after whitespace normalisation): a chain that passes an output on unchanged adds nothing.
  Spans that generate no text (prompt templates, parsers, plain chains, embeddings, kinds the
  importer does not know) never become nodes.
* **Edges**: for a generation `v`, every node available before `v` started (roots seen so far,
  generations that had ended) is tested against `v`'s input (all its messages, system ones too):
  first exact or whitespace-normalised containment on word boundaries, then sentence-level fuzzy
  matching — a sentence of `u` of at least `min_fuzzy_words` words whose best-aligned window of
  the input scores at least `threshold` (rapidfuzz ``partial_ratio``, 0–100, case-folded) —
  which catches templated or trimmed inputs (word indexes find the nodes that may match, so the
  work grows linearly with the trace, and a prefilter skips sentences too altered to match:
  `index.Index`, `matching.Matcher`). A node found only inside the occurrence of another
  matched node is not linked (its text reached `v` through that node); when it is not an
  ancestor of that node, or when two matches overlap without nesting, the link is reported as
  ambiguous. A generation whose input matches nothing gets its whole prompt as a root.
* **Terminal**: the trace's final output (the output of the top-level span that ended last):
  the generation node it equals, or a new ``output`` node made of it, linked like a generation
  to the generation nodes it contains. Without a final output, the generation that ended last;
  for a final output that is an object's repr, the generation it holds (else the last one).
  Only the terminal and its ancestors are kept; stages are the longest path from a root.
* Spans whose parent ids go round in a circle are refused (`check_parents`); the node texts are
  redacted like reports (`redaction.redact_obj`) before the DAG is made, so no file written from
  it holds a secret.

`build_dag` is the entry point from spans already read (`model.TraceSpan` values, whatever the
format: `io.dag_from_values` reads parsed JSON values into them first) and assembles the DAG
and its explanation from the parts: `select` (the spans of one trace, parents checked),
`builder` (the walk over them: roots, generations, links, terminal), `matching` and `index`
(which texts reached an input), `text`, `settings` (`MatchSettings`) and `result`
(`TraceImport`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...dag import Dag, DagValidationError
from ...redaction import redact_obj
from .builder import Builder
from .matching import PREFILTER_SHARE, STATS, Node
from .model import Kind, TraceError, TraceSpan
from .result import Ambiguity, Link, SpanNote, TraceImport
from .select import check_parents, select_trace
from .settings import DEFAULT_THRESHOLD, MatchSettings
from .text import normalize, preview


def _check_encodable(records: Sequence[Mapping[str, Any]], nodes: Mapping[str, Node]) -> None:
    """`TraceError` when a node's text cannot be written as UTF-8: a lone surrogate, which a
    trace file cannot hold (`veritrail.textio` refuses it) but a JSON text in an attribute
    (refused by `parse_embedded`) or a span built in Python can."""
    for r in records:
        text = r["text"]
        if text.isascii():
            continue
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            n = nodes[r["id"]]
            raise TraceError(
                f"the text of node {n.id} (span {n.names[0]!r:.60}) holds a lone surrogate "
                f"U+{ord(text[exc.start]):04X}: half of a UTF-16 pair, not a character"
            ) from None


def build_dag(
    spans: Sequence[TraceSpan],
    *,
    trace_id: str | None = None,
    settings: MatchSettings | None = None,
    meta: Mapping[str, Any] | None = None,
) -> TraceImport:
    """Build the generation DAG of one trace (see the module docstring for every rule).

    Raises `TraceError` with the reason when the spans give no valid DAG (no generation, several
    traces and no `trace_id`, a final output no generation leads to, a cycle, ...).
    """
    cfg = settings or MatchSettings()
    tid, mine = select_trace(spans, trace_id)
    check_parents(mine)
    b = Builder(list(mine), cfg)
    terminal, _top = b.build()
    keep = b.ancestors(terminal)
    for s in mine:
        gid = b.gen_of_span.get(s.id)
        if s.kind is Kind.LLM and gid is not None and gid not in keep:
            b.notes.append(
                SpanNote(
                    s.id,
                    s.name,
                    str(s.kind),
                    f"generation {gid} does not lead to the final output: dropped",
                )
            )
    unused = tuple(
        f"{n.id}: {preview(n.text)}"
        for n in b.nodes.values()
        if n.id not in keep and n.origin != "generation"
    )
    records = []
    for n in b.nodes.values():
        if n.id in keep:
            records.append({"id": n.id, "text": n.text, "sources": list(n.sources)})
    _check_encodable(records, b.nodes)
    info: dict[str, Any] = {
        "source": "trace",
        "trace_id": tid,
        "matching": {
            "containment": "exact, then whitespace-normalised, on word boundaries",
            "fuzzy": "rapidfuzz partial_ratio per sentence" if cfg.fuzzy else "off",
            "threshold": cfg.threshold,
            "min_fuzzy_words": cfg.min_fuzzy_words,
            "prefilter": (
                f"distinctive-word share >= {PREFILTER_SHARE}"
                if cfg.fuzzy and cfg.prefilter
                else "off"
            ),
        },
        "original_spans": {n.id: list(n.spans) for n in b.nodes.values() if n.id in keep},
        **(dict(meta) if meta else {}),
    }
    # The DAG holds the pipeline's texts, which may hold secrets (a key in a prompt, a URL with
    # a password in a tool output): the same redaction as reports, so no file written from it
    # holds them (docs/adapters.md, "Secrets").
    texts = redact_obj([r["text"] for r in records])
    for r, text in zip(records, texts, strict=True):
        r["text"] = text
    info = redact_obj(info)
    try:
        dag = Dag.from_records(records, info)
    except DagValidationError as exc:
        raise TraceError(
            "the trace gives no valid DAG: " + "; ".join(str(p) for p in exc.problems)
        ) from exc
    names: dict[int, set[str]] = {}
    label = {
        "input": "inputs",
        "document": "retrieved documents",
        "tool": "tool outputs",
        "prompt": "prompts",
        "output": "final output",
    }
    for node in dag:
        n = b.nodes[node.id]
        names.setdefault(node.stage, set()).update(
            n.names if n.origin == "generation" else [label[n.origin]]
        )
    dag.meta["stage_names"] = redact_obj(
        {str(k): ", ".join(sorted(v)) for k, v in sorted(names.items())}
    )
    kept_links = tuple(
        lk for lk in b.links if lk.target in keep and lk.source in dag.node(lk.target).sources
    )
    return TraceImport(
        dag=dag,
        trace_id=tid,
        links=kept_links,
        ambiguous=tuple(b.ambiguous),
        unmatched=tuple(b.notes),
        no_text=dict(sorted(b.no_text.items())),
        unused_roots=unused,
    )


__all__ = [
    "DEFAULT_THRESHOLD",
    "STATS",
    "Ambiguity",
    "Link",
    "MatchSettings",
    "SpanNote",
    "TraceImport",
    "build_dag",
    "check_parents",
    "normalize",
    "select_trace",
]
