"""`veritrail from-trace` takes time linear in the trace (issue 29, item 4).

Every node was tested against every later generation, and every new root against every node, so
an import was quadratic (100,000 spans: 2.9 s with 1,000 generations, 110 s with 10,000). The
check imports a map-reduce trace and one 8 times larger, through the CLI, and compares

* the work: sentences the matcher examined (`build.STATS`), the same on every run, so its bound
  can sit close to linear (8 times; quadratic: 64);
* the CPU time (`time.process_time`, which other processes' load does not count; the least of
  two imports), with a bound of 2.5 times the linear ratio, for noise.
"""

from __future__ import annotations

import gc
import itertools
import json
import random
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from veritrail.adapters.trace.build import STATS
from veritrail.cli.main import cli

# Each guard times the same work at two sizes (seconds to a minute): opt-in, CI runs them.
pytestmark = pytest.mark.scale

SMALL, LARGE = 300, 2400
"""Generations of the two traces (10 spans each)."""
WORK_BOUND = 12.0
"""Sentences examined grow 10.0 times here (a fixed vocabulary's chance matches grow a little with
the trace); the code before the fix: 57.6."""
CPU_BOUND = 20.0
"""Measured 7.7 to 11 times here on a loaded 2-core machine; the code before the fix: 44-72."""


class _Prose:
    """Sentences of Zipf-distributed pseudo-words, half of them function words (as
    benchmarks/bench_trace.py writes them): passages share common words, rarely rare ones."""

    FUNCTION = ("the", "of", "and", "to", "in", "a", "is", "was", "for", "on", "that", "with")

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        syllables = [c + v for c in "bcdfghklmnprstvz" for v in ("a", "e", "i", "o", "u", "ou")]
        words: set[str] = set()
        while len(words) < 20_000:
            words.add("".join(self.rng.choice(syllables) for _ in range(self.rng.randint(2, 4))))
        self.words = sorted(words)
        self.cum = list(itertools.accumulate(1 / (r + 1) for r in range(len(self.words))))

    def sentence(self, n: int = 12) -> str:
        rng = self.rng
        out = [
            rng.choice(self.FUNCTION)
            if rng.random() < 0.45
            else rng.choices(self.words, cum_weights=self.cum)[0]
            for _ in range(n)
        ]
        return " ".join(out).capitalize() + f" in {rng.randint(1700, 1999)}."


def _span(spans: list[dict[str, Any]], name: str, t0: int, t1: int, attrs: dict[str, Any]) -> None:
    """An opentelemetry-sdk `ReadableSpan.to_json()` object (times in whole seconds)."""
    spans.append(
        {
            "name": name,
            "context": {"trace_id": "0x" + "ab" * 16, "span_id": f"0x{len(spans) + 1:016x}"},
            "parent_id": "0x" + "f" * 16,
            "start_time": f"2025-01-01T{t0 // 3600:02d}:{t0 // 60 % 60:02d}:{t0 % 60:02d}Z",
            "end_time": f"2025-01-01T{t1 // 3600:02d}:{t1 // 60 % 60:02d}:{t1 % 60:02d}Z",
            "attributes": attrs,
        }
    )


def map_reduce_trace(generations: int, seed: int = 3) -> list[dict[str, Any]]:
    """A retrieval map-reduce with about `generations` LLM calls: per map call a retriever span
    (2 passages), 7 embedding spans (no text) and the call, whose prompt quotes the first 2
    sentences of each passage (so the edges need the fuzzy matcher); then reduce calls over 6
    summaries at a time, down to one answer, the output of the top-level chain."""
    prose = _Prose(seed)
    spans: list[dict[str, Any]] = []
    clock = itertools.count(2)
    question = "What happened in the valley towns over the centuries?"

    def llm(prompt: str, output: str) -> dict[str, Any]:
        return {
            "openinference.span.kind": "LLM",
            "llm.input_messages.0.message.content": prompt,
            "llm.output_messages.0.message.content": output,
        }

    level: list[str] = []
    for _ in range(generations * 5 // 6):
        docs = [" ".join(prose.sentence() for _ in range(4)) for _ in range(2)]
        t = next(clock)
        attrs: dict[str, Any] = {"openinference.span.kind": "RETRIEVER", "input.value": question}
        for i, d in enumerate(docs):
            attrs[f"retrieval.documents.{i}.document.content"] = d
        _span(spans, "retrieve", t, t, attrs)
        for _ in range(7):
            t = next(clock)
            _span(spans, "embed", t, t, {"openinference.span.kind": "EMBEDDING"})
        trimmed = "\n---\n".join(" ".join(d.split(". ")[:2]) + "." for d in docs)
        t = next(clock)
        level.append(prose.sentence())
        _span(spans, "map", t, t, llm("Summarise these passages.\n\n" + trimmed, level[-1]))
    while len(level) > 1:
        nxt = []
        for g in range(0, len(level), 6):
            t = next(clock)
            nxt.append(prose.sentence() + " " + prose.sentence())
            _span(
                spans,
                "reduce",
                t,
                t,
                llm(f"{question}\n\n" + "\n\n".join(level[g : g + 6]), nxt[-1]),
            )
        level = nxt
    _span(
        spans,
        "pipeline",
        1,
        next(clock),
        {"openinference.span.kind": "CHAIN", "input.value": question, "output.value": level[0]},
    )
    spans[-1]["context"]["span_id"] = spans[-1]["parent_id"]
    spans[-1]["parent_id"] = None
    return spans


def _import(tmp_path: Path, generations: int, runs: int = 2) -> tuple[float, int, dict[str, Any]]:
    """The least CPU time of `runs` imports of the trace (the collector's pauses and the
    machine's caches vary from run to run; the least is the steadiest), how many sentences the
    matcher examined (`build.STATS`: the same every run), and the DAG."""
    trace = tmp_path / f"trace-{generations}.jsonl"
    spans = map_reduce_trace(generations)
    trace.write_text("".join(json.dumps(s) + "\n" for s in spans), encoding="utf-8")
    del spans
    out = tmp_path / f"dag-{generations}.json"
    best = float("inf")
    for _ in range(runs):
        gc.collect()
        STATS.clear()
        t = time.process_time()
        res = CliRunner().invoke(cli, ["from-trace", str(trace), "--out", str(out)])
        best = min(best, time.process_time() - t)
        assert res.exit_code == 0, res.output
    # Sentences the matcher looked at: compared with rapidfuzz, or ruled out by the prefilter.
    examined = STATS.get("fuzzy_calls", 0) + STATS.get("prefilter_skips", 0)
    return best, examined, json.loads(out.read_text(encoding="utf-8"))


def test_import_time_grows_linearly(tmp_path: Path) -> None:
    _import(tmp_path, 30, 1)  # imports and the sentence splitter's model, once
    small, small_work, dag_small = _import(tmp_path, SMALL)
    large, large_work, dag_large = _import(tmp_path, LARGE)
    # The DAGs are what the traces hold: every passage a root, one node per generation.
    for dag, n in ((dag_small, SMALL), (dag_large, LARGE)):
        maps = n * 5 // 6
        assert sum(1 for r in dag["nodes"] if r["id"].startswith("doc-")) == 2 * maps
        assert sum(1 for r in dag["nodes"] if r["id"].startswith("gen-")) >= maps
    scale = LARGE / SMALL
    # Counted work first: deterministic, so its bound can be close to linear.
    assert large_work / small_work < WORK_BOUND, (
        f"sentences examined: {small_work:,} for {SMALL} generations, {large_work:,} for "
        f"{LARGE}: {large_work / small_work:.1f} times (linear: {scale:.0f})"
    )
    ratio = large / small
    assert ratio < CPU_BOUND, (
        f"{LARGE} generations took {large:.2f} s of CPU, {SMALL} took {small:.2f} s: "
        f"{ratio:.1f} times (linear: {scale:.0f}, quadratic: {scale**2:.0f})"
    )
