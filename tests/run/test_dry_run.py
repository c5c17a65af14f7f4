"""Dry-run estimates against the counts of real runs of the same claims with the scripted provider.

The scripted model behaves as each estimator scenario assumes (it selects every sentence it is
shown; verdicts all Not Fully Supported, or all Fully Supported), so the call counts must match
exactly and input tokens within the stated 25 %. `lower <= actual <= upper` is checked for a model
that answers differently (evidence in some nodes only).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from veritrail.cli.main import cli
from veritrail.dag import Dag, save_dag
from veritrail.lm.base import Message
from veritrail.lm.fake import FakeProvider
from veritrail.lm.model import Model
from veritrail.method.config import VerifyConfig
from veritrail.method.loop import lm_steps, verify_claims
from veritrail.method.segment import SentenceIndex
from veritrail.records import Claim
from veritrail.run.estimate import (
    DECOMPOSITION,
    EVIDENCE,
    VERDICT,
    decomposition_calls,
    estimate_run,
)

TOKEN_TOLERANCE = 0.25


def para(tag: str, n: int) -> str:
    return " ".join(f"Fact {k} about {tag} is recorded in the ledger of {tag}." for k in range(n))


def build_dag() -> Dag:
    """Four stages, uneven fan-in, nodes large enough to be split across prompts."""
    recs: list[dict[str, object]] = [
        {"id": f"r{i}", "text": para(f"source {i}", 4 + i % 5)} for i in range(10)
    ]
    recs += [
        {"id": "m0", "text": para("merge 0", 6), "sources": ["r0", "r1", "r2"]},
        {"id": "m1", "text": para("merge 1", 3), "sources": ["r3", "r4"]},
        {"id": "m2", "text": para("merge 2", 9), "sources": ["r5", "r6", "r7", "r8"]},
        {"id": "m3", "text": para("merge 3", 2), "sources": ["r9", "r2"]},
        {"id": "h0", "text": para("top 0", 5), "sources": ["m0", "m1"]},
        {"id": "h1", "text": para("top 1", 4), "sources": ["m2", "m3", "r4"]},
        {
            "id": "t",
            "text": "Final summary. Source 1 is recorded. Source 7 was lost.",
            "sources": ["h0", "h1", "m3"],
        },
    ]
    return Dag.from_records(recs)


CLAIMS = [
    Claim("c1", "Source 1 is recorded in the ledger."),
    Claim("c2", "Source 7 was lost and source 8 was found."),
    Claim("c3", "The ledger of source 4 exists."),
]


def fenced(text: str, label: str) -> str:
    m = re.search(rf"<<< {label}\n(.*?)\n>>> end {label}", text, re.S)
    assert m, label
    return m.group(1)


def responder(verdict: str, select: str = "all") -> object:
    """Answers like a model that finds evidence in every sentence it reads (or in merge nodes);
    a shared prompt (docs/method.md#shared-prompts) gets the same answer for each of its claims."""

    def entries(user: str, label: str, answer: dict[str, object]) -> str:
        n = len(re.findall(rf"^<<< {label} c\d+$", user, re.M))
        return json.dumps({"claims": [{"claim": f"c{k}", **answer} for k in range(1, n + 1)]})

    def reply(messages: Sequence[Message]) -> str:
        system, user = messages[0].content, messages[-1].content
        shared = "<<< claim c1\n" in user or "<<< statement c1\n" in user
        if system.startswith("You split factual"):
            if shared:
                parts = [
                    {"claim": f"c{k}", "parts": [p.strip() for p in st.split(" and ")]}
                    for k, st in enumerate(
                        re.findall(r"<<< statement c\d+\n(.*?)\n>>> end", user, re.S), 1
                    )
                ]
                return json.dumps({"claims": parts})
            statement = fenced(user, "statement")
            return json.dumps({"parts": [p.strip() for p in statement.split(" and ")]})
        if system.startswith("You find evidence"):
            ids = [int(i) for i in re.findall(r"^\[(\d+)\] ", user, re.M)]
            if select == "merge":
                ids = [int(i) for i in re.findall(r"^\[(\d+)\] .*merge", user, re.M)]
            summary = "The excerpts state the ledger facts in full detail. " * 5
            sel = {"selected_ids": ids, "context_ids": [], "summary": summary, "missing": ""}
            if not shared:
                return json.dumps(sel)
            # Each claim its own summary, as a model writes them: the verdicts over non-root
            # evidence then differ, so they are not shared (the estimate assumes so).
            claims = re.findall(r"<<< claim (c\d+)\n(.*?)\n>>> end", user, re.S)
            return json.dumps(
                {"claims": [{**sel, "claim": k, "summary": f"{t} {summary}"} for k, t in claims]}
            )
        if system.startswith("You judge"):
            judged = {"reasoning": "As instructed by the test.", "verdict": verdict}
            return entries(user, "claim", judged) if shared else json.dumps(judged)
        raise AssertionError(f"unexpected prompt: {system[:80]}")

    return reply


async def actual_counts(
    dag: Dag,
    config: VerifyConfig,
    verdict: str,
    select: str = "all",
    claims: Sequence[Claim] = CLAIMS,
) -> dict[str, tuple[int, int]]:
    provider = FakeProvider(responder=responder(verdict, select))  # type: ignore[arg-type]
    model = Model(provider, concurrency=4)
    results = await verify_claims(
        dag, claims, lm_steps(model), config, sentences=SentenceIndex(dag)
    )
    assert all(r.error is None for r in results), [r.error for r in results]
    return {k: (v.lm_calls, v.input_tokens) for k, v in model.usage.per_step().items()}


@pytest.mark.parametrize(
    ("verdict", "scenario", "q"),
    [
        ("Not Fully Supported", "estimate", 2),
        ("Not Fully Supported", "estimate", 3),
        ("Fully Supported", "upper", 2),
    ],
)
async def test_estimate_matches_a_run_that_behaves_as_assumed(
    verdict: str, scenario: str, q: int
) -> None:
    dag = build_dag()
    # The one-claim form (the paper's): c2's decomposition takes three calls where the others'
    # take one, so in the shared form it falls out of step (see the shared test below).
    config = VerifyConfig(
        q=q, evidence_sentences_root=7, evidence_sentences_nonroot=5, claims_per_prompt=1
    )
    est = estimate_run(dag, CLAIMS, config)
    got = await actual_counts(dag, config, verdict)
    s = getattr(est, scenario)
    for step in (EVIDENCE, VERDICT):
        assert got[step][0] == s.steps[step].calls, step
        assert abs(got[step][1] - s.steps[step].input_tokens) <= TOKEN_TOLERANCE * got[step][1], (
            step
        )
    # Decomposition: exact in the estimate scenario (the wording heuristic); the upper scenario
    # assumes the worst case (the call budget).
    if scenario == "estimate":
        assert got[DECOMPOSITION][0] == s.steps[DECOMPOSITION].calls == 1 + 3 + 1
        assert (
            abs(got[DECOMPOSITION][1] - s.steps[DECOMPOSITION].input_tokens)
            <= TOKEN_TOLERANCE * got[DECOMPOSITION][1]
        )
    assert est.lower.calls <= sum(c for c, _ in got.values()) <= est.upper.calls


# Claims that each decompose in one call reach every step together, as the estimate assumes.
IN_STEP = [CLAIMS[0], Claim("c2", "Source 7 was lost."), CLAIMS[2]]


@pytest.mark.parametrize(
    ("verdict", "scenario", "q"),
    [
        ("Not Fully Supported", "estimate", 2),
        ("Not Fully Supported", "estimate", 3),
        ("Not Fully Supported", "estimate", 1),
    ],
)
async def test_estimate_of_shared_prompts_matches_a_run_that_behaves_as_assumed(
    verdict: str, scenario: str, q: int
) -> None:
    dag = build_dag()
    config = VerifyConfig(q=q, evidence_sentences_root=7, evidence_sentences_nonroot=5)
    est = estimate_run(dag, IN_STEP, config)
    got = await actual_counts(dag, config, verdict, claims=IN_STEP)
    alone = estimate_run(dag, IN_STEP, replace(config, claims_per_prompt=1))
    s = getattr(est, scenario)
    for step in (DECOMPOSITION, EVIDENCE, VERDICT):
        assert got[step][0] == s.steps[step].calls, step
        assert abs(got[step][1] - s.steps[step].input_tokens) <= TOKEN_TOLERANCE * got[step][1], (
            step
        )
    # A third of the evidence prompts: the three claims share each batch.
    assert 3 * s.steps[EVIDENCE].calls == alone.estimate.steps[EVIDENCE].calls
    assert est.lower.calls <= sum(c for c, _ in got.values()) <= est.upper.calls


async def test_other_behaviour_stays_within_bounds() -> None:
    dag = build_dag()
    config = VerifyConfig(q=3, evidence_sentences_root=7, evidence_sentences_nonroot=5)
    est = estimate_run(dag, CLAIMS, config)
    got = await actual_counts(dag, config, "Fully Supported", select="merge")
    for step in (EVIDENCE, VERDICT):
        assert est.lower.steps[step].calls <= got[step][0] <= est.upper.steps[step].calls, step


def test_first_iteration_is_exact_batching() -> None:
    dag = build_dag()
    config = VerifyConfig(evidence_sentences_nonroot=5)
    est = estimate_run(dag, CLAIMS[:1], config)
    # src(t) = h0 (5 sentences), h1 (4), m3 (2): 11 sentences, limit 5 -> h0 | h1 | m3.
    assert est.lower.steps[EVIDENCE].calls == 3
    assert est.claims[0].lower.nodes_read == 3


def test_decomposition_heuristic() -> None:
    assert decomposition_calls("Paris is in France.", 20) == 1
    assert decomposition_calls("A founded B in 1990 and C joined; D left.", 20) == 4
    assert decomposition_calls("a and b and c and d and e", 3) == 3


def test_extraction_is_estimated_when_no_claims_are_given() -> None:
    dag = build_dag()
    est = estimate_run(dag, None, VerifyConfig(), extraction_mode="per-sentence")
    assert est.extraction.calls == 3 * 3  # three terminal sentences, three calls each
    assert len(est.claims) == 3
    # The batched form (the default): one call per stage for the whole short answer.
    batched = estimate_run(dag, None, VerifyConfig())
    assert batched.extraction.calls == 3 and len(batched.claims) == 3
    assert batched.extraction.input_tokens < est.extraction.input_tokens


def test_dry_run_cli_prints_estimate_and_calls_nothing(tmp_path: Path) -> None:
    dag = build_dag()
    save_dag(dag, tmp_path / "dag.json")
    (tmp_path / "claims.json").write_text(json.dumps([c.text for c in CLAIMS]))
    got = CliRunner().invoke(
        cli,
        [
            "verify",
            str(tmp_path / "dag.json"),
            "--claims",
            str(tmp_path / "claims.json"),
            "--model",
            "openai/gpt-4o",
            "--base-url",
            "http://127.0.0.1:9/v1",  # nothing listens
            "--dry-run",
            "-q",
            "2",
            "--evidence-sentences",
            "5",
            "--run-dir",
            str(tmp_path / "run"),
        ],
        env={"OPENAI_API_KEY": "sk-test-not-used"},
    )
    assert got.exit_code == 0, got.output
    config = VerifyConfig(q=2, evidence_sentences_root=5, evidence_sentences_nonroot=5)
    est = estimate_run(dag, [Claim(f"c{i}", c.text) for i, c in enumerate(CLAIMS)], config)
    out = got.output
    assert "dry run: no model was called" in out
    assert "openai/gpt-4o" in out and "3 claims" in out
    row = next(line for line in out.splitlines() if line.strip().startswith("total calls"))
    assert [int(x.replace(",", "")) for x in re.findall(r"[\d,]+", row)] == [
        est.lower.calls,
        est.estimate.calls,
        est.upper.calls,
    ]
    assert "$" in out  # gpt-4o has a list price
    assert not (tmp_path / "run").exists()  # a dry run creates no run directory
    assert "sk-test-not-used" not in out
