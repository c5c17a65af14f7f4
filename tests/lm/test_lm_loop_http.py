"""The whole loop over the real HTTP path: LM steps → Model → OpenAIProvider → loopback server.

Faults are injected at the server; the test asserts that every claim comes back, that a claim
whose requests keep failing ends with `termination: error` and the error text, that unreadable
replies are recorded (not read as "no evidence"), and that a cached re-run makes no requests
and gives the same results.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lm_helpers import FAST_RETRY

from veritrail.dag import Dag
from veritrail.lm.cache import ResponseCache
from veritrail.lm.capabilities import CapabilityStore
from veritrail.lm.model import Model
from veritrail.lm.openai import OpenAIProvider
from veritrail.method.config import VerifyConfig
from veritrail.method.loop import lm_steps, verify_claims
from veritrail.method.segment import SentenceIndex
from veritrail.records import Claim, ClaimResult, Termination
from veritrail.testing import FakeOpenAIServer, Fault


def _dag() -> Dag:
    def text(node: str) -> str:
        return " ".join(f"Node {node} states fact number {i}." for i in range(3))

    return Dag.from_records(
        [
            {"id": "r1", "text": text("r1"), "sources": []},
            {"id": "r2", "text": text("r2"), "sources": []},
            {"id": "m1", "text": text("m1"), "sources": ["r1", "r2"]},
            {"id": "t", "text": text("t"), "sources": ["m1"]},
        ]
    )


CLAIMS = [
    Claim("c1", "Node r1 states fact number 1."),
    Claim("c2", "Node r2 states fact number 2."),
    Claim("c3", "BAD-CLAIM: every request about it fails."),
    Claim("c4", "PROSE-CLAIM: evidence replies are never JSON."),
    Claim("c5", "Node m1 states fact number 0."),
]


def responder(req: dict[str, Any]) -> str | Fault:
    prompt = "\n".join(str(m["content"]) for m in req["messages"])
    if "BAD-CLAIM" in prompt:
        return Fault.server_error()
    rf = req.get("response_format") or {}
    props = set((rf.get("json_schema") or {}).get("schema", {}).get("properties", {}))
    if "parts" in props:
        return json.dumps({"parts": []})  # no split: the claim is final
    if "selected_ids" in props:
        if "PROSE-CLAIM" in prompt:
            return "I looked at the excerpts and nothing there is JSON."
        # id 1 plus an invented id the engine must drop and record.
        return json.dumps(
            {"selected_ids": [1, 9999], "context_ids": [], "summary": "a fact", "missing": ""}
        )
    if "verdict" in props:
        return json.dumps({"reasoning": "the fact is stated", "verdict": "Fully Supported"})
    return "unexpected request"


async def _run(srv: FakeOpenAIServer, cache: ResponseCache) -> tuple[list[ClaimResult], Model]:
    model = Model(
        OpenAIProvider("gpt-4o-mini", base_url=srv.base_url, api_key="k", timeout=2.0),
        cache=cache,
        retry=FAST_RETRY,
        concurrency=4,
        capabilities=CapabilityStore(),
    )
    try:
        # The loop itself (veritrail.run.runner's one caller was this test; the runner is gone:
        # the CLI and the API run through veritrail.run.job).
        dag = _dag()
        results = await verify_claims(
            dag,
            CLAIMS,
            lm_steps(model),
            # One claim per prompt: the test is about one claim's calls failing (a shared
            # prompt's failure would end its whole group, docs/method.md#shared-prompts).
            VerifyConfig(q=1, claims_per_prompt=1),
            sentences=SentenceIndex(dag),
        )
    finally:
        await model.aclose()
    return results, model


def _summary(results: list[ClaimResult]) -> list[tuple[str, str, str | None, int]]:
    return [
        (r.claim.id, r.termination.value, r.verdict.value if r.verdict else None, len(r.iterations))
        for r in results
    ]


async def test_faults_lose_no_claim_and_cached_rerun_is_free(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "cache.sqlite")
    with FakeOpenAIServer(responder, latency=0.01) as srv:
        srv.inject(
            Fault.rate_limit(retry_after=0.05),
            Fault.reset(),
            Fault.truncated(),
            Fault.unavailable(),
            Fault.rate_limit(),
        )
        results, model = await _run(srv, cache)
        first_count = srv.count
        by_id = {r.claim.id: r for r in results}
        assert sorted(by_id) == ["c1", "c2", "c3", "c4", "c5"]  # no claim lost

        bad = by_id["c3"]
        assert bad.termination is Termination.ERROR
        assert bad.error is not None and "500" in bad.error and "TransientError" in bad.error

        for cid in ("c1", "c2", "c5"):
            r = by_id[cid]
            assert r.termination is not Termination.ERROR, r.error
            assert r.iterations and r.verdict is not None
            assert any(i.kind == "unknown_id" for i in r.issues)  # the invented id 9999

        prose = by_id["c4"]
        # An unreadable evidence reply is recorded, never taken as "no evidence".
        assert prose.termination is Termination.ERROR or any(
            i.kind == "unparseable_reply" for i in prose.issues
        )
        assert model.stats.retries >= 5  # the injected faults were retried
        assert srv.pending_faults == 0

        # Second identical run: everything that succeeded comes from the cache.
        srv.reset_counters()
        again, model2 = await _run(srv, cache)
        # Only the always-failing claim goes to the server again (failures are not cached).
        assert all("BAD-CLAIM" in json.dumps(r["messages"]) for r in srv.requests)
        assert srv.count == FAST_RETRY.max_attempts
        assert first_count > srv.count
        assert _summary(again) == _summary(results)
        total = model2.usage.total()
        assert total.lm_calls == total.cached_calls > 0 and total.dollars == 0.0
