"""Trace import at scale: `dag_from_trace` on a large synthetic map-reduce trace (issues 17, 29).

    python benchmarks/bench_trace.py [--docs 2000] [--per-map 8] [--fan-in 6] [--trim 2]
                                     [--sizes 250,500,1000,2000] [--no-prefilter]
    python benchmarks/bench_trace.py --gens 10000,33333 --spans 100000 --per-map 2

The trace is written as opentelemetry-sdk span JSON (the objects ``ReadableSpan.to_json()``
returns, one per line) with OpenInference attributes, in the shape of a retrieval map-reduce:

* one top-level CHAIN span (input: a question);
* one RETRIEVER span returning ``--docs`` documents (3-5 synthetic sentences each);
* one map LLM call per ``--per-map`` documents; its prompt holds a template, and each document
  *trimmed to its first ``--trim`` sentences* (so the edge needs the sentence-level fuzzy
  matcher: the expensive path), and its output is a new summary sentence;
* reduce LLM calls over ``--fan-in`` summaries at a time, level after level, to one answer
  (exact containment), which is the chain's output.

With the defaults: 2,000 documents, 250 map + 42 + 7 + 1 reduce = 300 generations. ``--gens``
gives sizes in generations instead (issue 29's scale): each map call then has its own RETRIEVER
span (an agent that retrieves per step) with its ``--per-map`` documents, and ``--spans`` pads
the trace with EMBEDDING spans (no text: never nodes) to that many spans. For each size it
prints the span count, the wall and CPU time of `dag_from_trace` (read + build), the process's
peak RSS so far (the trace's generation included), how many node × generation pairs the indexes
never compared and how many sentences the prefilter ruled out, how many fuzzy sentence
comparisons ran (`veritrail.adapters.trace.build.STATS`), and checks the DAG: every document and
the question a root, the answer the terminal, the expected number of nodes. ``--no-prefilter``
turns the prefilter off (`MatchSettings(prefilter=False)`), to measure what it saves.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from veritrail.adapters.trace import MatchSettings, dag_from_trace
from veritrail.adapters.trace import build as trace_build

COMMON = (  # noqa: SIM905 - a word list reads better as prose
    "the of and to in a is was for on that with as by at from it its were which this also "
    "after before their they been has had more most many other over under into"
).split()


def vocabulary(rng: random.Random, n: int = 20_000) -> list[str]:
    """Pseudo-words from syllables: a vocabulary the size of real prose's."""
    syl = [c + v for c in "bcdfghklmnprstvwz" for v in ("a", "e", "i", "o", "u", "ai", "ou")]
    words: set[str] = set()
    while len(words) < n:
        words.add("".join(rng.choice(syl) for _ in range(rng.randint(2, 4))))
    return sorted(words)


class Text:
    """Sentences whose words follow Zipf's law (half of them function words), like prose:
    unrelated passages share common words, rarely the content words."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.words = vocabulary(rng)
        self.cum = list(itertools.accumulate(1 / (r + 1) for r in range(len(self.words))))

    def sentence(self, n: int | None = None) -> str:
        rng = self.rng
        out = []
        for _ in range(n or rng.randint(9, 15)):
            if rng.random() < 0.45:
                out.append(rng.choice(COMMON))
            else:
                out.append(rng.choices(self.words, cum_weights=self.cum)[0])
        out[0] = out[0].capitalize()
        return " ".join(out) + f" in {rng.randint(1700, 1999)}."


class SpanWriter:
    """opentelemetry-sdk ``to_json()``-shaped span objects with increasing times."""

    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        self.clock = 0
        self.trace_id = "0x" + "ab" * 16

    def tick(self) -> int:
        self.clock += 1000
        return self.clock

    @staticmethod
    def iso(ns: int) -> str:
        s, frac = divmod(ns, 1_000_000_000)
        return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(1_750_000_000 + s)) + (
            f".{frac // 1000:06d}Z"
        )

    def span(
        self, name: str, parent: str | None, start: int, end: int, attrs: dict[str, Any]
    ) -> str:
        sid = f"0x{len(self.spans) + 1:016x}"
        self.spans.append(
            {
                "name": name,
                "context": {"trace_id": self.trace_id, "span_id": sid, "trace_state": "[]"},
                "kind": "SpanKind.INTERNAL",
                "parent_id": parent,
                "start_time": self.iso(start),
                "end_time": self.iso(end),
                "status": {"status_code": "UNSET"},
                "attributes": attrs,
                "events": [],
                "links": [],
                "resource": {"attributes": {"service.name": "bench"}, "schema_url": ""},
            }
        )
        return sid


def llm_attrs(prompt: str, output: str) -> dict[str, Any]:
    return {
        "openinference.span.kind": "LLM",
        "llm.input_messages.0.message.role": "system",
        "llm.input_messages.0.message.content": "You write short factual summaries.",
        "llm.input_messages.1.message.role": "user",
        "llm.input_messages.1.message.content": prompt,
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": output,
    }


def reduce_calls(n_maps: int, fan_in: int) -> int:
    """How many reduce calls fold `n_maps` summaries, `fan_in` at a time, into one answer."""
    calls, level = 0, n_maps
    while level > 1:
        level = -(-level // fan_in)
        calls += level
    return calls


def docs_for_generations(gens: int, per_map: int, fan_in: int) -> int:
    """The document count whose map-reduce has the most generations not above `gens`."""
    n_maps = max(1, gens * (fan_in - 1) // fan_in)
    while n_maps > 1 and n_maps + reduce_calls(n_maps, fan_in) > gens:
        n_maps -= 1
    while n_maps + 1 + reduce_calls(n_maps + 1, fan_in) <= gens:
        n_maps += 1
    return n_maps * per_map


def retriever_attrs(question: str, docs: list[str]) -> dict[str, Any]:
    attrs: dict[str, Any] = {"openinference.span.kind": "RETRIEVER", "input.value": question}
    for i, d in enumerate(docs):
        attrs[f"retrieval.documents.{i}.document.content"] = d
    return attrs


def make_trace(
    n_docs: int,
    per_map: int,
    fan_in: int,
    trim: int,
    seed: int = 7,
    *,
    retrieve_per_map: bool = False,
    pad_to: int = 0,
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The spans, and what the DAG must hold (documents, generations).

    `retrieve_per_map`: each map call gets its own retriever span (an agent that retrieves per
    step) instead of one retrieval up front; `pad_to`: EMBEDDING spans (no text: never nodes)
    are added after the retrievals until the trace holds this many spans."""
    rng = random.Random(seed)
    text = Text(rng)
    w = SpanWriter()
    docs = [" ".join(text.sentence() for _ in range(rng.randint(3, 5))) for _ in range(n_docs)]
    question = "What happened in the valley towns over the centuries?"
    n_maps = -(-n_docs // per_map)
    n_spans = 2 + n_maps + (n_maps - 1 if retrieve_per_map else 0) + reduce_calls(n_maps, fan_in)
    pad = max(0, pad_to - n_spans)
    # The top-level chain is written last (it ends last) but starts first.
    t_root = w.tick()
    root_sid = f"0x{10**9:016x}"
    if not retrieve_per_map:
        t0 = w.tick()
        w.span("retrieve", root_sid, t0, w.tick(), retriever_attrs(question, docs))
    level = []
    for m, g in enumerate(range(0, n_docs, per_map)):
        group = docs[g : g + per_map]
        if retrieve_per_map:
            t0 = w.tick()
            w.span("retrieve", root_sid, t0, w.tick(), retriever_attrs(question, group))
        for _ in range(pad // n_maps + (m < pad % n_maps)):
            t0 = w.tick()
            w.span("embed", root_sid, t0, w.tick(), {"openinference.span.kind": "EMBEDDING"})
        trimmed = [" ".join(d.split(". ")[:trim]).rstrip(".") + "." for d in group]
        prompt = "Summarise these passages in one sentence.\n\n" + "\n---\n".join(
            f"Passage {k + 1}: {t}" for k, t in enumerate(trimmed)
        )
        out = text.sentence(12)
        s = w.tick()
        w.span("map", root_sid, s, w.tick(), llm_attrs(prompt, out))
        level.append(out)
    gens = len(level)
    while len(level) > 1:
        nxt = []
        for g in range(0, len(level), fan_in):
            prompt = f"Question: {question}\nCombine these summaries:\n\n" + "\n\n".join(
                level[g : g + fan_in]
            )
            out = " ".join(text.sentence(12) for _ in range(2))
            s = w.tick()
            w.span("reduce", root_sid, s, w.tick(), llm_attrs(prompt, out))
            nxt.append(out)
        gens += len(nxt)
        level = nxt
    answer = level[0]
    w.spans.append(
        {
            **w.spans[0],
            "name": "pipeline",
            "context": {"trace_id": w.trace_id, "span_id": root_sid, "trace_state": "[]"},
            "parent_id": None,
            "start_time": w.iso(t_root),
            "end_time": w.iso(w.tick()),
            "attributes": {
                "openinference.span.kind": "CHAIN",
                "input.value": question,
                "output.value": answer,
            },
        }
    )
    return w.spans, {"docs": n_docs, "gens": gens, "spans": len(w.spans)}


def run(n_docs: int, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    spans, want = make_trace(
        n_docs,
        args.per_map,
        args.fan_in,
        args.trim,
        retrieve_per_map=args.gens is not None,
        pad_to=args.spans,
    )
    f = tmp / f"trace-{n_docs}.jsonl"
    f.write_text("\n".join(json.dumps(s) for s in spans) + "\n", encoding="utf-8")
    del spans
    trace_build.STATS.clear()
    t, cpu = time.perf_counter(), time.process_time()
    res = dag_from_trace(f, settings=MatchSettings(prefilter=not args.no_prefilter))
    secs, cpu_secs = time.perf_counter() - t, time.process_time() - cpu
    dag = res.dag
    roots = [n for n in dag if dag.is_root(n.id)]
    fuzzy = sum(1 for lk in res.links if lk.how == "fuzzy")
    # Roots: every document, and the question (a top-level input every reduce prompt quotes).
    ok = (
        len(roots) == want["docs"] + 1
        and len(dag) == want["docs"] + want["gens"] + 1
        and fuzzy == want["docs"]
        and not res.ambiguous
    )
    return {
        "docs": n_docs,
        "spans": want["spans"],
        "gens": want["gens"],
        "secs": secs,
        "cpu": cpu_secs,
        "fuzzy_calls": trace_build.STATS.get("fuzzy_calls", 0),
        "skipped": trace_build.STATS.get("prefilter_skips", 0),
        "pairs_skipped": trace_build.STATS.get("pairs_skipped", 0),
        "fuzzy_links": fuzzy,
        "ok": ok,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--docs", type=int, default=2000)
    ap.add_argument("--per-map", type=int, default=8)
    ap.add_argument("--fan-in", type=int, default=6)
    ap.add_argument("--trim", type=int, default=2, help="sentences of each document in its prompt")
    ap.add_argument(
        "--sizes", default=None, help="comma-separated document counts (default: --docs)"
    )
    ap.add_argument(
        "--gens",
        default=None,
        help="comma-separated generation counts instead of --sizes: one retriever span per map "
        "call, documents as many as the map calls need",
    )
    ap.add_argument(
        "--spans", type=int, default=0, help="pad each trace with EMBEDDING spans to this many"
    )
    ap.add_argument("--no-prefilter", action="store_true")
    args = ap.parse_args()
    if args.gens is not None:
        sizes = [
            docs_for_generations(int(g), args.per_map, args.fan_in) for g in args.gens.split(",")
        ]
    else:
        sizes = [int(x) for x in args.sizes.split(",")] if args.sizes else [args.docs]
    mode = "prefilter on" if not args.no_prefilter else "prefilter off"
    with tempfile.TemporaryDirectory() as d:
        for n in sizes:
            r = run(n, args, Path(d))
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            print(
                f"  {r['docs']:6d} docs, {r['gens']:5d} generations, {r['spans']:6d} spans "
                f"({mode}): dag_from_trace {r['secs']:7.2f} s (CPU {r['cpu']:.2f} s, peak RSS so "
                f"far {peak:,.0f} MB); node x generation pairs the indexes never compared "
                f"{r['pairs_skipped']:,}; sentences ruled out {r['skipped']:,}; fuzzy "
                f"comparisons run {r['fuzzy_calls']:,}; {r['fuzzy_links']} fuzzy links; "
                f"DAG {'as expected' if r['ok'] else 'WRONG'}",
                flush=True,
            )
            if not r["ok"]:
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
