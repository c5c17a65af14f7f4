"""Record the generation DAG of any pipeline from inside the pipeline's own code.

A pipeline declares its source texts and, for each generative step, which recorded texts went
into the step and what it produced::

    from veritrail.pipelines.recorder import Recorder

    with Recorder() as rec:
        a = rec.source(chapter_1, id="ch1")
        b = rec.source(chapter_2, id="ch2")
        s1 = rec.step("summarize", inputs=[a], output=summarize(a.text))
        s2 = rec.step("summarize", inputs=[b], output=summarize(b.text))
        final = rec.step("merge", inputs=[s1, s2], output=merge(s1.text, s2.text))
    rec.save("dag.json")

Stages are computed as each node is recorded: a source is stage 1, a step is one more than the
highest stage among its inputs (the longest path from a root, docs/dag-format.md). A step may be given an
explicit `stage` instead, which must not be lower than that of any input. `Recorder.traced`
wraps a function that calls a model so that every call is recorded without further code.

Nothing is repaired: empty text, an unknown input or a duplicate id raises `RecorderError` at
the call that caused it; `dag()`/`save()` validate the whole graph with `Dag.from_records`
(exactly one terminal node, unless `prune=True` keeps only what leads to a chosen terminal).
"""

from __future__ import annotations

import functools
import inspect
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from ..dag import Dag, save_dag
from ..errors import InputProblem

_SAFE_NAME = re.compile(r"[^A-Za-z0-9_.:-]+")


class RecorderError(InputProblem, ValueError):
    """A source or step could not be recorded (empty text, unknown input, duplicate id, …)."""


@dataclass(frozen=True, slots=True)
class NodeRef:
    """A recorded node: pass it as an input of later steps; `text` is what was recorded."""

    id: str
    text: str
    stage: int
    kind: str
    """``"source"`` for roots, otherwise the step name."""

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True, slots=True)
class _Rec:
    id: str
    text: str
    sources: tuple[str, ...]
    stage: int
    kind: str


class Recorder:
    """Collects the nodes of one pipeline run; thread-safe, usable as a context manager.

    `meta` is stored in the DAG file's ``meta`` object (for example the model name and the
    pipeline settings). The recorder also writes ``meta["stage_names"]``: for each stage, the
    step names recorded at it, sorted and comma-separated (``"source"`` for roots).
    """

    def __init__(self, *, meta: Mapping[str, Any] | None = None) -> None:
        self.meta: dict[str, Any] = dict(meta or {})
        self._nodes: dict[str, _Rec] = {}
        self._counters: dict[str, int] = {}
        self._lock = threading.Lock()

    # -- context manager ------------------------------------------------------------------------

    def __enter__(self) -> Recorder:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # Nothing to flush: the recorder keeps everything in memory until `save`.
        return None

    # -- recording ------------------------------------------------------------------------------

    def source(self, text: str, *, id: str | None = None) -> NodeRef:
        """Record a source text (a root node: ground truth, stage 1)."""
        return self._add("source", text, (), 1, id)

    def sources(self, texts: Iterable[str], *, prefix: str = "source") -> list[NodeRef]:
        """Record several source texts with ids ``{prefix}-1``, ``{prefix}-2``, …"""
        return [self._add("source", t, (), 1, None, prefix=prefix) for t in texts]

    def step(
        self,
        name: str,
        inputs: Sequence[NodeRef | str],
        output: str,
        *,
        id: str | None = None,
        stage: int | None = None,
    ) -> NodeRef:
        """Record one generative step: `inputs` (refs or ids) went in, `output` came out.

        The new node's stage is `stage` when given (it must be at least the highest input
        stage), otherwise one more than the highest input stage.
        """
        if not inputs:
            raise RecorderError(f"step {name!r} has no inputs; record source text with source()")
        ids = tuple(dict.fromkeys(i.id if isinstance(i, NodeRef) else i for i in inputs))
        with self._lock:
            unknown = [i for i in ids if i not in self._nodes]
            if unknown:
                raise RecorderError(f"step {name!r}: unknown input ids {unknown}")
            top = max(self._nodes[i].stage for i in ids)
        if stage is None:
            stage = top + 1
        elif stage < top or stage < 2:
            raise RecorderError(
                f"step {name!r}: stage {stage} is lower than its inputs' (highest {top}) "
                "or than 2 (stage 1 is for sources)"
            )
        return self._add(name, output, ids, stage, id)

    def _add(
        self,
        kind: str,
        text: str,
        sources: tuple[str, ...],
        stage: int,
        node_id: str | None,
        *,
        prefix: str | None = None,
    ) -> NodeRef:
        if not isinstance(text, str) or not text.strip():
            raise RecorderError(f"{kind}: text must be a non-empty string (got {text!r:.60})")
        with self._lock:
            if node_id is None:
                base = _SAFE_NAME.sub("_", prefix or kind) or "node"
                while True:
                    n = self._counters.get(base, 0) + 1
                    self._counters[base] = n
                    node_id = f"{base}-{n}"
                    if node_id not in self._nodes:
                        break
            elif not node_id:
                raise RecorderError("node ids must be non-empty")
            elif node_id in self._nodes:
                raise RecorderError(f"duplicate node id {node_id!r}")
            self._nodes[node_id] = _Rec(node_id, text, sources, stage, kind)
        return NodeRef(node_id, text, stage, kind)

    # -- decorator ------------------------------------------------------------------------------

    def traced(
        self, name: str, *, text_args: bool = True
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorate a function (sync or async) that produces text from recorded inputs.

        Every `NodeRef` among the call's arguments (directly, or inside a list/tuple) is an input
        of the step; with `text_args` (default) the function receives the refs' texts instead of
        the refs. Its return value (a string) is recorded as the step's output, and the wrapper
        returns the new `NodeRef` (awaitable when the function is async).
        """

        def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
            if inspect.iscoroutinefunction(fn):

                @functools.wraps(fn)
                async def awrapper(*args: Any, **kwargs: Any) -> NodeRef:
                    refs, a, kw = _unwrap(args, kwargs, text_args)
                    out = await fn(*a, **kw)
                    return self._record_call(name, refs, out)

                return awrapper

            @functools.wraps(fn)
            def wrapper(*args: Any, **kwargs: Any) -> NodeRef:
                refs, a, kw = _unwrap(args, kwargs, text_args)
                return self._record_call(name, refs, fn(*a, **kw))

            return wrapper

        return deco

    def _record_call(self, name: str, refs: list[NodeRef], out: Any) -> NodeRef:
        if not isinstance(out, str):
            raise RecorderError(
                f"traced step {name!r} must return a string, got {type(out).__name__}"
            )
        if not refs:
            raise RecorderError(f"traced step {name!r} was called without any recorded input")
        return self.step(name, refs, out)

    # -- output ---------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._nodes)

    def get(self, node_id: str) -> NodeRef:
        """The recorded node with this id (KeyError if absent)."""
        r = self._nodes[node_id]
        return NodeRef(r.id, r.text, r.stage, r.kind)

    def records(
        self, *, terminal: NodeRef | str | None = None, prune: bool = False
    ) -> list[dict[str, Any]]:
        """Node dicts (`id`, `text`, `sources`, `stage`) in recording order.

        With `prune`, keep only `terminal` and the nodes it depends on (`terminal` defaults to
        the last recorded node); nodes that fed nothing into the final output are dropped.
        """
        with self._lock:
            nodes = list(self._nodes.values())
        if prune:
            if not nodes:
                return []
            tid = terminal.id if isinstance(terminal, NodeRef) else (terminal or nodes[-1].id)
            if tid not in self._nodes:
                raise RecorderError(f"unknown terminal id {tid!r}")
            keep = _ancestors(self._nodes, tid)
            nodes = [n for n in nodes if n.id in keep]
        elif terminal is not None:
            tid = terminal.id if isinstance(terminal, NodeRef) else terminal
            if tid not in self._nodes:
                raise RecorderError(f"unknown terminal id {tid!r}")
        return [
            {"id": n.id, "text": n.text, "sources": list(n.sources), "stage": n.stage}
            for n in nodes
        ]

    def stage_names(self, records: Iterable[Mapping[str, Any]] | None = None) -> dict[str, str]:
        """For each stage (as a string key), the step names recorded at it, comma-separated."""
        ids = None if records is None else {r["id"] for r in records}
        out: dict[int, set[str]] = {}
        for n in self._nodes.values():
            if ids is None or n.id in ids:
                out.setdefault(n.stage, set()).add(n.kind)
        return {str(k): ", ".join(sorted(v)) for k, v in sorted(out.items())}

    def dag(self, *, terminal: NodeRef | str | None = None, prune: bool = False) -> Dag:
        """Validate and return the recorded DAG (raises `DagValidationError` listing problems)."""
        recs = self.records(terminal=terminal, prune=prune)
        meta = {**self.meta, "stage_names": self.stage_names(recs)}
        dag = Dag.from_records(recs, meta)
        if terminal is not None:
            tid = terminal.id if isinstance(terminal, NodeRef) else terminal
            if dag.terminal != tid:
                raise RecorderError(f"the DAG's terminal node is {dag.terminal!r}, not {tid!r}")
        return dag

    def save(
        self, path: str | Path, *, terminal: NodeRef | str | None = None, prune: bool = False
    ) -> Dag:
        """Validate and write the DAG (JSON, or JSON Lines for ``.jsonl``); returns it."""
        dag = self.dag(terminal=terminal, prune=prune)
        save_dag(dag, path)
        return dag


def _ancestors(nodes: Mapping[str, _Rec], tid: str) -> set[str]:
    keep = {tid}
    stack = [tid]
    while stack:
        for s in nodes[stack.pop()].sources:
            if s not in keep:
                keep.add(s)
                stack.append(s)
    return keep


def _unwrap(
    args: tuple[Any, ...], kwargs: dict[str, Any], to_text: bool
) -> tuple[list[NodeRef], list[Any], dict[str, Any]]:
    refs: list[NodeRef] = []

    def conv(v: Any) -> Any:
        if isinstance(v, NodeRef):
            refs.append(v)
            return v.text if to_text else v
        if isinstance(v, list | tuple) and any(isinstance(x, NodeRef) for x in v):
            return type(v)(conv(x) for x in v)
        return v

    a = [conv(v) for v in args]
    kw = {k: conv(v) for k, v in kwargs.items()}
    return refs, a, kw


__all__ = ["NodeRef", "Recorder", "RecorderError"]
