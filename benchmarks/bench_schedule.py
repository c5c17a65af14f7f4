"""Scheduling efficiency and the response cache, over real HTTP to the loopback OpenAI fake.

    python benchmarks/bench_schedule.py [--claims 200] [--concurrency 64] [--latency 0.2]

The LM-based steps run unchanged (`Model` → `OpenAIProvider` → `FakeOpenAIServer` on 127.0.0.1
with a fixed per-call latency; the server runs in its own process, as a real endpoint would) over
a hierarchical-summarization tree (27 chunks → 9 → 3 → 1, ten sentences per node). The server's
replies are deterministic: no sub-claim split; evidence selection picks the first sentence of
each prompt; every verdict is Fully Supported, so each claim walks one path from the final output
down to a chunk: 1 decomposition call, then 3 iterations of one evidence prompt and one verdict.

* **Scheduling** — the critical-path lower bound of the calls actually made: a claim's phases are
  sequential (each decomposition call; per iteration, one phase for its evidence prompts, which run
  in parallel, plus one per compression rerun; each verdict call), claims are independent, and no
  more than `--concurrency` calls run at once:
  ``bound = latency × max(max over claims of its phases, ceil(total calls / concurrency))``.
  Reported: achieved wall time / bound (target ≤ 1.1 at concurrency 64, 200 ms, 200 claims).
* **Where the time goes** — each HTTP call timed as the client sees it (send to parsed reply) and
  as the server spends it (`FakeOpenAIServer.service_seconds`); `--http-client` picks the SDK's
  transport (aiohttp by default, or httpx).
* **Cache** — the same run again with the same SQLite response cache: model calls that reach the
  server (target 0) and wall time as a share of the first run (target < 5%).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from gen_dag import Prose

from veritrail.dag import Dag
from veritrail.lm.cache import ResponseCache
from veritrail.lm.capabilities import CapabilityStore
from veritrail.lm.model import CallEvent, Model
from veritrail.lm.openai import OpenAIProvider
from veritrail.lm.retry import RetryPolicy
from veritrail.method.config import VerifyConfig
from veritrail.method.loop import lm_steps, verify_claims
from veritrail.method.segment import SentenceIndex
from veritrail.records import Claim, ClaimResult
from veritrail.testing import FakeOpenAIServer


def tree_records(seed: int = 0) -> list[dict[str, Any]]:
    """27 chunks → 9 → 3 → 1 final output, each node ten sentences (so one evidence prompt of 40
    sentences holds the three sources of a node)."""
    prose = Prose(random.Random(seed))
    recs: list[dict[str, Any]] = []
    level = [f"chunk-{k:02d}" for k in range(27)]
    recs += [
        {"id": n, "text": " ".join(prose.sentence() for _ in range(10)), "sources": []}
        for n in level
    ]
    for name in ("mid", "top"):
        nxt = [f"{name}-{k}" for k in range(len(level) // 3)]
        for k, n in enumerate(nxt):
            text = " ".join(prose.sentence() for _ in range(10))
            recs.append({"id": n, "text": text, "sources": level[3 * k : 3 * k + 3]})
        level = nxt
    recs.append(
        {"id": "final", "text": " ".join(prose.sentence() for _ in range(10)), "sources": level}
    )
    return recs


def responder(req: dict[str, Any]) -> str:
    """Deterministic replies keyed on the JSON schema each step asks for."""
    rf = req.get("response_format") or {}
    props = set((rf.get("json_schema") or {}).get("schema", {}).get("properties", {}))
    if "parts" in props:
        return json.dumps({"parts": []})
    if "selected_ids" in props:
        return json.dumps(
            {
                "selected_ids": [1],
                "context_ids": [],
                "summary": "The excerpt states it.",
                "missing": "",
            }
        )
    if "verdict" in props:
        return json.dumps(
            {"reasoning": "The evidence states the claim.", "verdict": "Fully Supported"}
        )
    return "unexpected request"


class ServerProcess:
    """The fake server in its own process, as a real endpoint would be: its CPU time and GIL do
    not compete with the client's event loop. Talks over stdin/stdout: `count`, `reset`."""

    def __init__(self, latency: float) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--serve", "--latency", str(latency)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        self.base_url = self.proc.stdout.readline().strip()

    def _ask(self, cmd: str) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()
        doc: dict[str, Any] = json.loads(self.proc.stdout.readline())
        return doc

    def stats(self) -> dict[str, Any]:
        """{"count": requests served, "max_in_flight": peak concurrent requests, and the
        server-side time per request: "service_mean_ms", "service_p95_ms"}."""
        return self._ask("count")

    def reset(self) -> None:
        """Zero the counters."""
        self._ask("reset")

    def close(self) -> None:
        """Stop the server process."""
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=10)


def serve(latency: float) -> None:
    """`--serve`: run the fake server until stdin closes, answering `count` and `reset`."""
    with FakeOpenAIServer(responder, latency=latency) as srv:
        print(srv.base_url, flush=True)
        for line in sys.stdin:
            if line.strip() == "reset":
                srv.reset_counters()
            times = sorted(srv.service_seconds) or [0.0]
            doc = {
                "count": srv.count,
                "max_in_flight": srv.max_in_flight,
                "service_mean_ms": statistics.fmean(times) * 1e3,
                "service_p95_ms": times[int(len(times) * 0.95)] * 1e3,
            }
            print(json.dumps(doc), flush=True)


def phases(result: ClaimResult, calls: Counter[str]) -> int:
    """Sequential phases of one claim (see the module docstring)."""
    n = calls["decomposition"] + calls["verdict"]
    for it in result.iterations:
        read = set(it.nodes_checked) - set(it.carried_roots)
        n += (1 if read else 0) + it.compression_reruns
    return n


class TimedProvider(OpenAIProvider):
    """The provider, timing each HTTP call as the client sees it (send to parsed reply)."""

    durations: list[float]

    async def generate(self, messages: Any, config: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return await super().generate(messages, config)
        finally:
            self.durations.append(time.perf_counter() - t0)


CALL_TIMES: list[float] = []


async def run(
    dag: Dag,
    claims: list[Claim],
    base_url: str,
    cache: ResponseCache | None,
    concurrency: int,
    http_client: str | None = None,
) -> tuple[list[ClaimResult], float, dict[str, Counter[str]]]:
    """One verification run; (results, wall seconds, calls per claim per step)."""
    calls: dict[str, Counter[str]] = {}
    provider = TimedProvider(
        "fake-model", base_url=base_url, api_key="k", timeout=30.0, http_client=http_client
    )
    provider.durations = CALL_TIMES

    def on_call(ev: CallEvent) -> None:
        if not ev.cached:
            calls.setdefault(ev.claim or "", Counter())[ev.step] += 1

    model = Model(
        provider,
        cache=cache,
        retry=RetryPolicy(max_attempts=2, base_delay=0.05),
        concurrency=concurrency,
        capabilities=CapabilityStore(),
        on_call=on_call,
    )
    try:
        t0 = time.perf_counter()
        results = await verify_claims(
            dag,
            claims,
            lm_steps(model),
            VerifyConfig(q=3),
            sentences=SentenceIndex(dag),
            model=model,
        )
        wall = time.perf_counter() - t0
    finally:
        await model.aclose()
    for r in results:
        if r.error:
            raise SystemExit(f"claim {r.claim.id} failed: {r.error}")
    return results, wall, calls


def main(argv: list[str] | None = None) -> None:
    """Command line: see the module docstring."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--claims", type=int, default=200)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--no-cache", action="store_true", help="no response cache (first run only)")
    ap.add_argument(
        "--http-client", choices=["aiohttp", "httpx"], help="the SDK's transport (default: aiohttp)"
    )
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.serve:
        serve(a.latency)
        return

    dag = Dag.from_records(tree_records())
    claims = [
        Claim(f"c{k}", f"Claim number {k} about the book is stated in its chunks.")
        for k in range(a.claims)
    ]
    srv = ServerProcess(a.latency)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            cache = None if a.no_cache else ResponseCache(Path(tmp) / "cache.sqlite")
            report(a, dag, claims, srv, cache)
    finally:
        srv.close()


def provider_http(a: argparse.Namespace) -> str:
    """The transport the run used."""
    return str(a.http_client or OpenAIProvider("m", base_url="http://127.0.0.1:1").http_client)


def report(
    a: argparse.Namespace,
    dag: Dag,
    claims: list[Claim],
    srv: ServerProcess,
    cache: ResponseCache | None,
) -> None:
    """Both runs and their figures."""
    c0 = time.process_time()
    results, wall, calls = asyncio.run(
        run(dag, claims, srv.base_url, cache, a.concurrency, a.http_client)
    )
    cpu = time.process_time() - c0
    st = srv.stats()
    total = sum(sum(c.values()) for c in calls.values())
    by_step = Counter[str]()
    for c in calls.values():
        by_step.update(c)
    crit = max(phases(r, calls.get(r.claim.id, Counter())) for r in results)
    bound = a.latency * max(crit, math.ceil(total / a.concurrency))
    print(
        f"tree DAG ({len(dag)} nodes), {len(claims)} claims, concurrency {a.concurrency}, latency {a.latency * 1e3:.0f} ms"
    )
    steps = ", ".join(f"{k} {v}" for k, v in sorted(by_step.items()))
    print(
        f"  model calls: {total} ({steps}); server saw {st['count']}, max in flight {st['max_in_flight']}"
    )
    print(
        f"  iterations per claim: {sum(len(r.iterations) for r in results) / len(results):.2f}; longest claim: {crit} sequential phases"
    )
    print(
        f"  lower bound {bound:.2f} s (critical path {crit * a.latency:.2f} s, capacity {math.ceil(total / a.concurrency) * a.latency:.2f} s)"
    )
    print(f"  achieved {wall:.2f} s  →  wall / bound = {wall / bound:.3f}  (target ≤ 1.1)")
    print(f"  client CPU {cpu:.2f} s = {cpu / max(total, 1) * 1e3:.2f} ms per model call")
    print(
        f"  server-side time per request: mean {st['service_mean_ms']:.1f} ms, "
        f"p95 {st['service_p95_ms']:.1f} ms"
    )
    ct = sorted(CALL_TIMES)
    print(
        f"  HTTP call as the client sees it ({provider_http(a)}): mean {statistics.fmean(ct) * 1e3:.1f} ms, "
        f"median {ct[len(ct) // 2] * 1e3:.1f} ms, p95 {ct[int(len(ct) * 0.95)] * 1e3:.1f} ms "
        f"(server latency {a.latency * 1e3:.0f} ms)"
    )

    if cache is None:
        return
    srv.reset()
    results2, wall2, calls2 = asyncio.run(
        run(dag, claims, srv.base_url, cache, a.concurrency, a.http_client)
    )
    same = [(r.verdict, r.iterations) for r in results] == [
        (r.verdict, r.iterations) for r in results2
    ]
    print("cache: second identical run")
    uncached = sum(sum(c.values()) for c in calls2.values())
    print(
        f"  server requests {srv.stats()['count']}, uncached model calls {uncached}, same results: {same}"
    )
    print(f"  wall {wall2:.2f} s = {wall2 / wall:.1%} of the first run (target < 5%)")


if __name__ == "__main__":
    main()
