"""The serving-time guard's latency (`veritrail.aguard`, docs/api.md "Guarding answers while
serving"; benchmarks/README.md, section "Guard").

    python benchmarks/bench_guard.py [--latency 0.2] [--budgets 500,1000,2000,5000]
                                     [--sentences 2,6,12] [--answers 10]

A loopback `FakeOpenAIServer` answers with the word-overlap rules after `--latency` seconds per
call (200 ms by default: a hosted model's order). One `Model` is built before the first request
and reused (the serving path the docs recommend), the model cache off. For each budget, answer
size (sentences, one claim each) and form (claims extracted, or given), `--answers` distinct
answers are guarded one after the other; it prints p50 and p95 of the guard's wall time, the
worst overrun past the budget (`elapsed - budget`, the bound the docs state), how many answers
were fully verified within the budget, and the model calls per answer. Then `--concurrent`
answers are guarded at once over the same model, per budget (a server under load).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from dataclasses import dataclass

import veritrail as vt
from veritrail.lm.overlap import responder
from veritrail.lm.registry import get_model
from veritrail.testing import FakeOpenAIServer

SUBJECTS = ["harbour", "museum", "library", "station", "theatre", "market", "bridge", "tower"]
FACTS = ["opened in {y}", "was rebuilt in {y}", "gained a roof garden in {y}", "closed in {y}"]


def _texts(n: int, seed: int) -> tuple[str, str]:
    """An answer of `n` sentences and its source (every sentence supported), distinct per
    `seed` so no prompt repeats between runs."""
    sentences = []
    for i in range(n):
        subject = SUBJECTS[(seed + i) % len(SUBJECTS)]
        fact = FACTS[(seed * 7 + i) % len(FACTS)].format(y=1800 + seed * 13 + i)
        sentences.append(f"The {subject} number {seed}-{i} {fact}.")
    answer = " ".join(sentences)
    return answer, answer + " Nothing else is known."


@dataclass(frozen=True, slots=True)
class Cell:
    budget: int
    sentences: int
    given: bool
    elapsed: list[float]
    verified: int
    calls: list[int]


def _pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(p * (len(xs) - 1)))]


async def _cell(
    model: vt.Model, budget: int, sentences: int, given: bool, answers: int, seed0: int
) -> Cell:
    elapsed: list[float] = []
    calls: list[int] = []
    verified = 0
    for k in range(answers):
        answer, source = _texts(sentences, seed0 + k)
        claims = [s + "." for s in answer.rstrip(".").split(". ")] if given else None
        t = time.perf_counter()
        r = await vt.aguard(answer, source, claims=claims, model=model, budget_ms=budget)
        elapsed.append((time.perf_counter() - t) * 1000)
        calls.append(r.lm_calls)
        verified += r.verified and not r.timed_out
    return Cell(budget, sentences, given, elapsed, verified, calls)


async def main(args: argparse.Namespace) -> None:
    os.environ.setdefault("OPENAI_API_KEY", "sk-bench-loopback")
    os.environ["NO_PROXY"] = "127.0.0.1"
    with FakeOpenAIServer(responder=responder, latency=args.latency) as srv:
        model = get_model("openai/loopback", base_url=srv.base_url, cache=False, concurrency=16)
        try:
            # Warm-up (a server's start-up): one guarded answer, not measured.
            await vt.aguard(*_texts(2, 10_000), model=model, budget_ms=60_000)
            seed = 0
            print(
                f"latency {args.latency * 1000:.0f} ms a call, {args.answers} answers a cell, "
                f"load average {os.getloadavg()[0]:.1f}"
            )
            print("| budget ms | sentences | claims | p50 ms | p95 ms | worst overrun ms "
                  "| fully verified | calls/answer |")  # fmt: skip
            print("| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |")
            overruns: list[float] = []
            for budget in args.budgets:
                for n in args.sentences:
                    for given in (False, True):
                        c = await _cell(model, budget, n, given, args.answers, seed)
                        seed += args.answers
                        over = max(e - budget for e in c.elapsed)
                        overruns.append(over)
                        print(
                            f"| {budget} | {n} | {'given' if given else 'extracted'} "
                            f"| {statistics.median(c.elapsed):.0f} | {_pct(c.elapsed, 0.95):.0f} "
                            f"| {max(over, 0):.0f} | {c.verified}/{args.answers} "
                            f"| {statistics.mean(c.calls):.1f} |"
                        )
            print(f"worst overrun past the budget over all cells: {max(overruns):.0f} ms")
            if args.concurrent:
                print(
                    f"\n{args.concurrent} answers of 6 sentences guarded at once over one Model "
                    "(16 calls in flight at most), claims extracted:"
                )
                print("| budget ms | p50 ms | p95 ms | worst overrun ms | fully verified |")
                print("| ---: | ---: | ---: | ---: | ---: |")
                for budget in args.budgets:
                    cells = await asyncio.gather(
                        *(
                            _cell(model, budget, 6, False, 1, seed + k)
                            for k in range(args.concurrent)
                        )
                    )
                    seed += args.concurrent
                    el = [e for c in cells for e in c.elapsed]
                    done = sum(c.verified for c in cells)
                    print(
                        f"| {budget} | {statistics.median(el):.0f} | {_pct(el, 0.95):.0f} "
                        f"| {max(max(e - budget for e in el), 0):.0f} "
                        f"| {done}/{args.concurrent} |"
                    )
        finally:
            await model.aclose()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--latency", type=float, default=0.2, help="seconds per model call")
    ap.add_argument("--budgets", default="500,1000,2000,5000")
    ap.add_argument("--sentences", default="2,6,12", help="answer sizes (one claim a sentence)")
    ap.add_argument("--answers", type=int, default=10, help="answers per cell")
    ap.add_argument(
        "--concurrent", type=int, default=20, help="answers guarded at once (0: skip that table)"
    )
    ns = ap.parse_args()
    ns.budgets = [int(b) for b in ns.budgets.split(",")]
    ns.sentences = [int(s) for s in ns.sentences.split(",")]
    sys.exit(asyncio.run(main(ns)))
