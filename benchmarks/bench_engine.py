"""Engine overhead: CPU time of the verification loop with no model (oracle steps).

    python benchmarks/bench_engine.py /tmp/vtb/graphrag.json [--claims 60] [--seed 0]

Claims are drawn on the DAG (deterministic per seed), with oracle answers of three kinds:

* **supported** (60%): evidence (sentence 0) on one random path terminal → map answer → report
  → … → chunk; every verdict Fully Supported. The loop walks the path down to the root.
* **error at stage 3** (20%): the same, but the path stops at a summarized description: its
  extractions yield nothing, so Not Fully Supported rounds follow (widening to all sources).
* **unsupported** (20%): no evidence anywhere: Not Fully Supported from the first round, the worst
  case for nodes read (each round widens to the sources of every node checked).

Each claim is verified twice at q = 1 and q = 3: a cold pass on a fresh `SentenceIndex` (includes
segmenting the nodes read) and a warm pass on the same index (segmentation already cached), with a
fresh oracle. The warm pass is the engine overhead; the difference is segmentation. Figures are
CPU time (`time.process_time`) per claim and per iteration, and nodes read per claim; "engine"
columns exclude the time spent inside the oracle's steps, which stand in for the model calls.

Then: the engine CPU of each widening round of the unsupported claims (differences of the warm
cost at q = 1, 2, 3), the extra cost of the first claim that builds the run's shared read plans,
and all claims verified concurrently (60 and 4 × 60) with the peak RSS they add. The loaded DAG is
verified under the run's collector policy (`run/gcpolicy.engine_gc`: the loaded DAG frozen out of
the collector's view, higher thresholds), as every verifying command does; `--no-gc-policy`
leaves CPython's defaults.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import resource
import statistics
import time
from collections import defaultdict
from pathlib import Path
from typing import Any
from weakref import WeakKeyDictionary

from veritrail.dag import Dag, load_dag
from veritrail.method.config import VerifyConfig
from veritrail.method.context import RunContext
from veritrail.method.loop import verify_claim_in, verify_claims
from veritrail.method.oracle import Oracle
from veritrail.method.plans import ReadPlans
from veritrail.method.segment import SentenceIndex
from veritrail.records import Claim, ClaimResult
from veritrail.run.gcpolicy import engine_gc


def _path_to_root(dag: Dag, rng: random.Random) -> list[str]:
    """Random path from a source of the terminal down to a root (terminal excluded)."""
    cur = rng.choice(dag.sources(dag.terminal))
    path = [cur]
    while dag.sources(cur):
        cur = rng.choice(dag.sources(cur))
        path.append(cur)
    return path


def make_claims(dag: Dag, n: int, seed: int) -> tuple[list[Claim], dict[str, Any], dict[str, str]]:
    """Claims, the oracle document, and each claim's kind."""
    rng = random.Random(seed)
    claims: list[Claim] = []
    entries: list[dict[str, Any]] = []
    kinds: dict[str, str] = {}
    for k in range(n):
        roll = rng.random()
        kind = "supported" if roll < 0.6 else "error at stage 3" if roll < 0.8 else "unsupported"
        path = _path_to_root(dag, rng)
        if kind == "error at stage 3":
            path = [p for p in path if dag.stage(p) >= 3]
        elif kind == "unsupported":
            path = []
        text = f"Claim {k}: a statement drawn for the engine benchmark."
        claims.append(Claim(f"c{k}", text))
        kinds[f"c{k}"] = kind
        entries.append(
            {
                "claim": text,
                "evidence": {nid: [0] for nid in path},
                "summaries": {nid: f"{nid} supports the claim." for nid in path},
                "verdicts": ["Fully Supported"],
            }
        )
    return claims, {"claims": entries}, kinds


class CountingOracle(Oracle):
    """The oracle, counting evidence prompts per claim (each would be one model call) and the
    time spent inside its steps (the stand-in for model calls, excluded from engine overhead)."""

    prompts: defaultdict[str, int]
    step_seconds: defaultdict[str, float]
    # Prompts of a round run through as many workers as a model with this concurrency would get
    # (evidence.select_over); 64 is the scheduling scenario, 8 the default.
    concurrency = 64

    async def decompose(self, claim: Claim, text: str) -> Any:
        t0 = time.perf_counter()
        try:
            return await super().decompose(claim, text)
        finally:
            self.step_seconds[claim.id] += time.perf_counter() - t0

    async def select(self, claim: Claim, subclaims: Any, batch: Any, *, sample: int = 0) -> Any:
        self.prompts[claim.id] += 1
        t0 = time.perf_counter()
        try:
            return await super().select(claim, subclaims, batch, sample=sample)
        finally:
            self.step_seconds[claim.id] += time.perf_counter() - t0

    async def judge(self, claim: Claim, subclaims: Any, evidence: Any, *, sample: int = 0) -> Any:
        t0 = time.perf_counter()
        try:
            return await super().judge(claim, subclaims, evidence, sample=sample)
        finally:
            self.step_seconds[claim.id] += time.perf_counter() - t0


_PLANS: WeakKeyDictionary[SentenceIndex, ReadPlans] = WeakKeyDictionary()
"""The passes over one sentence index share read plans, as the claims of one run do."""

Row = tuple[ClaimResult, float, int, float]
"""(result, CPU seconds of the whole claim, evidence prompts, seconds inside the oracle steps)."""


async def run_pass(
    dag: Dag, index: SentenceIndex, claims: list[Claim], oracle_doc: dict[str, Any], q: int
) -> list[Row]:
    """Verify claims one after another."""
    oracle = CountingOracle(Oracle.from_dict(oracle_doc).answers)
    oracle.prompts = defaultdict(int)
    oracle.step_seconds = defaultdict(float)
    steps = oracle.steps()
    config = VerifyConfig(q=q)
    plans = _PLANS.get(index) or _PLANS.setdefault(index, ReadPlans(dag, index, config))
    ctx = RunContext(dag, index, steps, config, plans)
    out: list[Row] = []
    for c in claims:
        t0 = time.process_time()
        r = await verify_claim_in(ctx, c)
        out.append((r, time.process_time() - t0, oracle.prompts[c.id], oracle.step_seconds[c.id]))
        if r.error:
            raise SystemExit(f"claim {c.id} failed: {r.error}")
    return out


def main(argv: list[str] | None = None) -> None:
    """Command line: see the module docstring."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("dag", type=Path)
    ap.add_argument("--claims", type=int, default=60)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--no-gc-policy",
        "--no-gc-freeze",
        dest="no_gc_policy",
        action="store_true",
        help="CPython's collector defaults instead of the run's policy (run/gcpolicy.py)",
    )
    a = ap.parse_args(argv)

    t0 = time.perf_counter()
    dag = load_dag(a.dag)
    if not a.no_gc_policy:
        # As every verifying command does once the DAG is loaded (run/gcpolicy.py); held
        # until the process ends.
        engine_gc().__enter__()
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"{a.dag}: {len(dag)} nodes, loaded in {time.perf_counter() - t0:.2f} s, peak RSS {rss0:.0f} MB"
    )
    claims, doc, kinds = make_claims(dag, a.claims, a.seed)
    counts = defaultdict(int)
    for k in kinds.values():
        counts[k] += 1
    print(f"{len(claims)} claims: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))

    for q in (1, 3):
        index = SentenceIndex(dag)
        cold = asyncio.run(run_pass(dag, index, claims, doc, q))
        seg_nodes = index.segmented
        warm = asyncio.run(run_pass(dag, index, claims, doc, q))
        print(f"\nq = {q}  (nodes segmented in the cold pass: {seg_nodes})")
        print(
            f"  {'kind':<17} {'claims':>6} {'iter/claim':>10} {'read/claim':>10} {'share':>6} "
            f"{'prompts/claim':>13} {'cold ms/claim':>13} {'warm ms/claim':>13} "
            f"{'oracle ms/claim':>15} {'engine ms/iter':>14} {'engine µs/prompt':>16}"
        )
        rows: dict[str, list[tuple[Row, Row]]] = defaultdict(list)
        for c_row, w_row in zip(cold, warm, strict=True):
            r, r2 = c_row[0], w_row[0]
            assert r.verdict == r2.verdict and r.cost.nodes_read == r2.cost.nodes_read
            rows[kinds[r.claim.id]].append((c_row, w_row))
        rows["all"] = [x for k in sorted(rows) for x in rows[k]]
        for kind, xs in rows.items():
            n = len(xs)
            iters = sum(len(w[0].iterations) for _, w in xs)
            prompts = sum(w[2] for _, w in xs)
            warm_total = sum(w[1] for _, w in xs)
            oracle_total = sum(w[3] for _, w in xs)
            engine = warm_total - oracle_total
            read = statistics.fmean(w[0].cost.nodes_read for _, w in xs)
            share = statistics.fmean(w[0].cost.nodes_read_share for _, w in xs)
            cold_ms = statistics.fmean(c[1] for c, _ in xs) * 1e3
            print(
                f"  {kind:<17} {n:>6} {iters / n:>10.2f} {read:>10.1f} {share:>6.2%} "
                f"{prompts / n:>13.1f} {cold_ms:>13.2f} {warm_total / n * 1e3:>13.2f} "
                f"{oracle_total / n * 1e3:>15.2f} {engine / iters * 1e3:>14.3f} "
                f"{engine / max(prompts, 1) * 1e6:>16.1f}"
            )
        worst = max((w[1] - w[3]) / len(w[0].iterations) for _, w in rows["all"]) * 1e3
        print(f"  slowest claim, warm: {worst:.3f} ms of engine CPU per iteration")

    # The widest iterations: an unsupported claim's rounds are the same for every such claim
    # (terminal's sources, then all their sources, ...), so the engine CPU of round k is the
    # warm cost at q = k minus the warm cost at q = k - 1.
    unsupported = [c for c in claims if kinds[c.id] == "unsupported"]
    if unsupported:
        print("\nwidening rounds of the unsupported claims (engine CPU, warm, mean over claims):")
        index = SentenceIndex(dag)
        prev = 0.0
        prev_prompts = 0.0
        for q in (1, 2, 3):
            asyncio.run(run_pass(dag, index, unsupported, doc, q))
            xs = asyncio.run(run_pass(dag, index, unsupported, doc, q))
            engine = statistics.fmean(w[1] - w[3] for w in xs)
            n_prompts = statistics.fmean(w[2] for w in xs)
            it = xs[0][0].iterations[-1]
            print(
                f"  round {q}: {len(it.nodes_checked):>6} nodes, "
                f"{n_prompts - prev_prompts:>6.0f} prompts: {(engine - prev) * 1e3:7.3f} ms"
            )
            prev, prev_prompts = engine, n_prompts
        # Read plans are built by the first claim that reads a set and shared by the run
        # (plans.ReadPlans, held by the run's context): that claim's extra cost, sentences
        # already cached.
        _PLANS.pop(index, None)
        (first,) = asyncio.run(run_pass(dag, index, unsupported[:1], doc, 3))
        print(
            f"  first claim of a run through all three rounds (builds the shared read plans): "
            f"{(first[1] - first[3]) * 1e3:.2f} ms engine CPU, vs {prev * 1e3:.2f} ms once built"
        )
    # All claims at once (as `veritrail verify` runs them), on the last run's sentence cache:
    # claims share node records, sentences and read plans, so memory does not grow per claim.
    rss_seq = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    for n_copies in (1, 4):
        many = [
            Claim(f"{c.id}-{k}", c.text) for k in range(n_copies) for c in claims
        ]  # same texts: the oracle answers each copy like its original
        oracle = CountingOracle(Oracle.from_dict(doc).answers)
        oracle.prompts, oracle.step_seconds = defaultdict(int), defaultdict(float)
        t0 = time.process_time()
        res = asyncio.run(
            verify_claims(dag, many, oracle.steps(), VerifyConfig(q=3), sentences=index)
        )
        cpu = time.process_time() - t0
        assert not any(r.error for r in res)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(
            f"\n{len(many)} claims concurrently at q = 3: {cpu:.2f} s CPU, "
            f"{sum(oracle.prompts.values())} evidence prompts; peak RSS {rss:.0f} MB "
            f"(+{rss - rss_seq:.0f} MB over the sequential passes)"
        )
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\npeak RSS after all passes: {rss1:.0f} MB (+{rss1 - rss0:.0f} MB over the loaded DAG)")


if __name__ == "__main__":
    main()
