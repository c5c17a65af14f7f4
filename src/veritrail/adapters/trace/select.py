"""Choosing the spans of one trace (`select_trace`) and refusing parent ids that loop
(`check_parents`), before any node is made."""

from __future__ import annotations

from collections.abc import Sequence

from .model import Kind, TraceError, TraceSpan


def select_trace(spans: Sequence[TraceSpan], trace_id: str | None) -> tuple[str, list[TraceSpan]]:
    """The spans of one trace: `trace_id`, or the only trace that has an LLM span."""
    by_trace: dict[str, list[TraceSpan]] = {}
    for s in spans:
        by_trace.setdefault(s.trace_id, []).append(s)
    if trace_id is not None:
        tid = trace_id if trace_id in by_trace else trace_id.lower().removeprefix("0x")
        if tid not in by_trace:
            raise TraceError(
                f"no trace {trace_id!r} in the file (traces: {', '.join(sorted(by_trace)[:10])})"
            )
        return tid, by_trace[tid]
    with_llm = [t for t, ss in by_trace.items() if any(s.kind is Kind.LLM for s in ss)]
    if not with_llm:
        raise TraceError(
            f"the file holds {len(spans)} spans and no LLM generation: nothing to build a DAG from"
        )
    if len(with_llm) > 1:
        raise TraceError(
            f"the file holds {len(with_llm)} traces with generations ("
            + ", ".join(sorted(with_llm)[:10])
            + "): choose one with --trace-id"
        )
    return with_llm[0], by_trace[with_llm[0]]


def check_parents(spans: Sequence[TraceSpan]) -> None:
    """`TraceError` when the parent ids of `spans` (one trace) go round in a circle: a span that
    is its own parent, or a cycle. A trace has a tree of spans; a loop means the ids are
    corrupt, and leaves no top-level span to take the final output from. Linear: each span is
    walked once."""
    parent = {s.id: s.parent_id for s in spans}
    name = {s.id: s.name for s in spans}
    done: set[str] = set()
    for s in spans:
        path: list[str] = []
        on_path: set[str] = set()
        cur: str | None = s.id
        while cur is not None and cur in parent and cur not in done:
            if cur in on_path:
                loop = path[path.index(cur) :]
                if len(loop) == 1:
                    raise TraceError(f"span {name[cur]!r:.60} ({cur}) is its own parent")
                shown = " -> ".join(loop[:10]) + (" -> ..." if len(loop) > 10 else "")
                raise TraceError(
                    f"the spans' parent ids form a cycle of {len(loop)} spans "
                    f"(each the parent of the one before): {shown} -> {cur}"
                )
            path.append(cur)
            on_path.add(cur)
            cur = parent[cur]
        done.update(path)


__all__ = ["check_parents", "select_trace"]
