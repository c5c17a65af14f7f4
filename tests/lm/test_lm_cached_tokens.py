"""Prompt-cache (prefix-cache) tokens: read from the reply, counted per step, priced at the cached
rate, and kept out of report v1 (issue 19)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from veritrail.lm.base import GenerateConfig, Message, ModelOutput
from veritrail.lm.model import CallEvent, Model
from veritrail.lm.openai import _read_reply
from veritrail.lm.pricing import Price, PriceTable
from veritrail.records import StepCost


def _reply(usage: dict[str, object]) -> dict[str, object]:
    return {"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}], "usage": usage}


def test_read_reply_counts_cached_prompt_tokens() -> None:
    out = _reply(
        {
            "prompt_tokens": 1000,
            "completion_tokens": 5,
            "prompt_tokens_details": {"cached_tokens": 768},
        }
    )
    got = _read_reply(out, "http://x/v1")
    assert (got.input_tokens, got.cached_input_tokens, got.output_tokens) == (1000, 768, 5)
    # Absent, null or odd details: nothing cached; never more than the prompt.
    assert _read_reply(_reply({"prompt_tokens": 10}), "u").cached_input_tokens == 0
    assert (
        _read_reply(
            _reply({"prompt_tokens": 10, "prompt_tokens_details": None}), "u"
        ).cached_input_tokens
        == 0
    )
    assert (
        _read_reply(
            _reply({"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": 99}}), "u"
        ).cached_input_tokens
        == 10
    )


def test_price_charges_cached_tokens_at_the_cached_rate() -> None:
    p = Price(2.0, 8.0, 0.5)
    assert p.dollars(1_000_000, 0, 400_000) == pytest.approx(600_000 * 2e-6 + 400_000 * 0.5e-6)
    assert Price(2.0, 8.0).dollars(1_000_000, 0, 400_000) == pytest.approx(2.0)  # no rate: full
    assert p.dollars(100, 0, 10**9) == pytest.approx(100 * 0.5e-6)  # clamped to the prompt
    table = PriceTable()
    gpt = table.lookup("openai", "gpt-4o-mini-2024-07-18")
    assert gpt is not None and gpt.cached_input == 0.075


def test_price_file_takes_an_optional_cached_rate(tmp_path: Path) -> None:
    f = tmp_path / "prices.json"
    f.write_text(
        json.dumps(
            {"a": {"input": 1, "output": 2, "cached_input": 0.1}, "b": {"input": 1, "output": 2}}
        )
    )
    table = PriceTable.from_file(f)
    assert table.lookup("openai", "a") == Price(1.0, 2.0, 0.1)
    assert table.lookup("openai", "b") == Price(1.0, 2.0, None)
    f.write_text(json.dumps({"a": {"input": 1, "output": 2, "cached_input": "cheap"}}))
    with pytest.raises(ValueError, match="cached_input"):
        PriceTable.from_file(f)


class CachingProvider:
    """A provider whose server says half of every prompt came from its prompt cache."""

    name = "openai"
    model = "gpt-4o"

    async def generate(self, messages: Sequence[Message], config: GenerateConfig) -> ModelOutput:
        return ModelOutput("done", input_tokens=1000, output_tokens=100, cached_input_tokens=500)

    async def aclose(self) -> None:
        return None


async def test_model_counts_cached_tokens_per_step_and_prices_them() -> None:
    events: list[CallEvent] = []
    model = Model(CachingProvider(), on_call=events.append)
    gen = await model.generate([Message("user", "hi")], step="verdict")
    await model.generate([Message("user", "hi again")], step="verdict")
    expected = (500 * 2.50 + 500 * 1.25 + 100 * 10.0) / 1e6
    assert gen.dollars == pytest.approx(expected)
    step = model.usage.per_step()["verdict"]
    assert step.cached_input_tokens == 1000
    assert step.input_tokens == 2000
    assert step.dollars == pytest.approx(2 * expected)
    assert [e.cached_input_tokens for e in events] == [500, 500]
    assert (
        StepCost(cached_input_tokens=3) + StepCost(cached_input_tokens=4)
    ).cached_input_tokens == 7


def test_report_v1_does_not_carry_cached_prompt_tokens() -> None:
    from veritrail.records import (
        Claim,
        ClaimResult,
        Cost,
        ErrorStageStatus,
        Termination,
        Verdict,
    )
    from veritrail.report import claim_to_dict

    cost = StepCost(1, 0, 100, 10, 0.0, cached_input_tokens=80)
    r = ClaimResult(
        claim=Claim("c1", "x"),
        subclaims=(),
        verdict=Verdict.FULLY_SUPPORTED,
        reasoning="",
        termination=Termination.ROOTS_ONLY,
        iterations=(),
        provenance=(),
        error_stages=(),
        error_stage_status=ErrorStageStatus.NOT_APPLICABLE,
        cost=Cost(lm_calls=1, input_tokens=100, output_tokens=10, per_step={"verdict": cost}),
    )
    doc = claim_to_dict(r)
    assert doc["cost"]["per_step"]["verdict"] == {
        "lm_calls": 1,
        "cached_calls": 0,
        "input_tokens": 100,
        "output_tokens": 10,
        "dollars": 0.0,
    }


def test_dry_run_estimate_prices_repeated_prefixes_at_the_cached_rate() -> None:
    from veritrail.dag import load_dag
    from veritrail.method.claims import load_claims
    from veritrail.method.config import VerifyConfig
    from veritrail.run.estimate import EVIDENCE, estimate_run

    ex = Path(__file__).resolve().parents[2] / "examples" / "quickstart"
    dag = load_dag(ex / "dag.json")
    claims = load_claims(ex / "claims.json")
    cfg = VerifyConfig()
    full = estimate_run(dag, claims, cfg, price=(1.0, 1.0))
    cached = estimate_run(dag, claims, cfg, price=Price(1.0, 1.0, 0.1))
    one = estimate_run(dag, claims[:1], cfg, price=Price(1.0, 1.0, 0.1))
    est = cached.estimate
    assert 0 < est.cacheable_input_tokens < est.input_tokens
    # Three of four claims repeat the first one's excerpts: most evidence input is a prefix.
    ev = est.steps[EVIDENCE]
    assert ev.cacheable_input_tokens > ev.input_tokens / 2
    assert one.estimate.steps[EVIDENCE].cacheable_input_tokens < ev.cacheable_input_tokens / 3
    assert full.dollars_estimate is not None and cached.dollars_estimate is not None
    assert cached.dollars_estimate < full.dollars_estimate
    assert full.dollars_estimate == pytest.approx(
        (est.input_tokens + est.output_tokens) / 1e6
    )  # a (input, output) pair prices every token in full, as before
