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
CPU time (`time.process_time`) per claim and per iteration, and nodes read per claim.
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

from veritrail.config import VerifyConfig
from veritrail.dag import Dag, load_dag
from veritrail.loop import verify_claim
from veritrail.oracle import Oracle
from veritrail.records import Claim, ClaimResult
from veritrail.segment import SentenceIndex


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
    """The oracle, counting evidence prompts per claim (each would be one model call)."""

    prompts: defaultdict[str, int]

    async def select(self, claim: Claim, subclaims: Any, batch: Any, *, sample: int = 0) -> Any:
        self.prompts[claim.id] += 1
        return await super().select(claim, subclaims, batch, sample=sample)


async def run_pass(
    dag: Dag, index: SentenceIndex, claims: list[Claim], oracle_doc: dict[str, Any], q: int
) -> list[tuple[ClaimResult, float, int]]:
    """Verify claims one after another; (result, CPU seconds, evidence prompts) per claim."""
    oracle = CountingOracle(Oracle.from_dict(oracle_doc).answers)
    oracle.prompts = defaultdict(int)
    steps = oracle.steps()
    config = VerifyConfig(q=q)
    out: list[tuple[ClaimResult, float, int]] = []
    for c in claims:
        t0 = time.process_time()
        r = await verify_claim(dag, index, c, steps, config)
        out.append((r, time.process_time() - t0, oracle.prompts[c.id]))
        if r.error:
            raise SystemExit(f"claim {c.id} failed: {r.error}")
    return out


def main(argv: list[str] | None = None) -> None:
    """Command line: see the module docstring."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("dag", type=Path)
    ap.add_argument("--claims", type=int, default=60)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)

    t0 = time.perf_counter()
    dag = load_dag(a.dag)
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
            f"{'prompts/claim':>13} {'cold ms/claim':>13} {'warm ms/claim':>13} {'warm ms/iter':>12} "
            f"{'warm µs/prompt':>14}"
        )
        rows: dict[str, list[tuple[ClaimResult, float, float, int]]] = defaultdict(list)
        for (r, c_cpu, n_prompts), (r2, w_cpu, _) in zip(cold, warm, strict=True):
            assert r.verdict == r2.verdict and r.cost.nodes_read == r2.cost.nodes_read
            rows[kinds[r.claim.id]].append((r, c_cpu, w_cpu, n_prompts))
        rows["all"] = [x for k in sorted(rows) for x in rows[k]]
        for kind, xs in rows.items():
            iters = sum(len(r.iterations) for r, *_ in xs)
            prompts = sum(p for *_, p in xs)
            warm_total = sum(w for _, _, w, _ in xs)
            read = statistics.fmean(r.cost.nodes_read for r, *_ in xs)
            share = statistics.fmean(r.cost.nodes_read_share for r, *_ in xs)
            cold_ms = statistics.fmean(c for _, c, _, _ in xs) * 1e3
            print(
                f"  {kind:<17} {len(xs):>6} {iters / len(xs):>10.2f} {read:>10.1f} {share:>6.2%} "
                f"{prompts / len(xs):>13.1f} {cold_ms:>13.2f} {warm_total / len(xs) * 1e3:>13.2f} "
                f"{warm_total / iters * 1e3:>12.3f} {warm_total / max(prompts, 1) * 1e6:>14.1f}"
            )
        worst = max(w / len(r.iterations) for r, _, w, _ in rows["all"]) * 1e3
        print(f"  slowest claim, warm: {worst:.3f} ms per iteration")
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\npeak RSS after all passes: {rss1:.0f} MB (+{rss1 - rss0:.0f} MB over the loaded DAG)")


if __name__ == "__main__":
    main()
