"""Evidence selection with the scripted provider: batching, ids, ranges, invented ids, compression."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from dagkit import node_text
from veritrail import Claim, VerifyConfig
from veritrail.dag import Dag
from veritrail.lm import FakeProvider, Model
from veritrail.lm.base import Message
from veritrail.method.evidence import make_batches, validate_ids
from veritrail.method.loop import lm_steps, verify_claim, verify_claims
from veritrail.method.segment import SentenceIndex


def _items(sizes: dict[str, int]) -> list[tuple[str, range, list[str]]]:
    return [(nid, range(n), [f"s{i} of {nid}." for i in range(n)]) for nid, n in sizes.items()]


def test_batches_respect_the_sentence_limit_and_split_big_nodes() -> None:
    batches = make_batches(_items({"a": 3, "b": 2, "c": 7, "d": 1}), is_root=False, max_sentences=5)
    assert [b.size for b in batches] == [5, 5, 3]
    layout = [
        [(e.node_id, [s.sentence_index for s in e.sentences]) for e in b.excerpts] for b in batches
    ]
    assert layout == [
        [("a", [0, 1, 2]), ("b", [0, 1])],
        [("c", [0, 1, 2, 3, 4])],
        [("c", [5, 6]), ("d", [0])],
    ]
    for b in batches:
        ids = [s.prompt_id for e in b.excerpts for s in e.sentences]
        assert ids == list(range(1, len(ids) + 1))  # unique within the prompt, from 1


def test_batches_at_exact_limit_and_token_limit() -> None:
    assert [
        b.size for b in make_batches(_items({"a": 4, "b": 4}), is_root=True, max_sentences=4)
    ] == [4, 4]
    assert [
        b.size for b in make_batches(_items({"a": 4, "b": 4}), is_root=True, max_sentences=8)
    ] == [8]
    # Each sentence here is estimated at 2 tokens: a 7-token cap allows three per prompt.
    sizes = [
        b.size for b in make_batches(_items({"a": 5}), is_root=True, max_sentences=40, max_tokens=7)
    ]
    assert sizes == [3, 2]


def test_validate_ids_expands_ranges_and_drops_unknown() -> None:
    (batch,) = make_batches(_items({"a": 4, "b": 4}), is_root=False, max_sentences=10)
    picked, dropped = validate_ids([2, "5-7", "9", "12", "S3", "7-10", True, "x"], batch)
    assert [s.prompt_id for _, s in picked] == [2, 3, 5, 6, 7, 8]
    assert [(e.node_id, s.sentence_index) for e, s in picked] == [
        ("a", 1), ("a", 2), ("b", 0), ("b", 1), ("b", 2), ("b", 3),
    ]  # fmt: skip
    assert dropped == ["9", "12", "7-10 (2 unassigned)", "True", "x"]


def _sel(ids: list[object], summary: str = "sum") -> str:
    return json.dumps({"selected_ids": ids, "context_ids": [], "summary": summary, "missing": ""})


def _dag(root_sizes: dict[str, int]) -> Dag:
    recs = [{"id": r, "text": node_text(r, n), "sources": []} for r, n in root_sizes.items()]
    recs.append({"id": "T", "text": "Final.", "sources": list(root_sizes)})
    return Dag.from_records(recs)


def _ids_in(prompt: str) -> list[int]:
    return [int(m) for m in re.findall(r"^\[(\d+)\] ", prompt, re.MULTILINE)]


def test_batches_of_one_iteration_run_concurrently_and_invented_ids_are_recorded() -> None:
    dag = _dag({"r1": 30, "r2": 30})  # 60 sentences at 40 per prompt: one node per prompt
    in_flight = 0
    peak = 0

    class Slow(FakeProvider):
        async def generate(self, messages: list[Message], config):  # type: ignore[no-untyped-def, override]
            nonlocal in_flight, peak
            in_flight += 1
            peak = max(peak, in_flight)
            await asyncio.sleep(0.05)
            try:
                return await super().generate(messages, config)
            finally:
                in_flight -= 1

    def respond(messages: list[Message]) -> str:
        p = messages[-1].content
        if "Statement to split" in p:
            return '{"parts": ["x"]}'
        if "Evidence:" in p:
            return '{"reasoning": "ok", "verdict": "Fully Supported"}'
        ids = _ids_in(p)
        return _sel([ids[0], "999", f"{ids[1]}-{ids[2]}"])

    fake = Slow(responder=respond)
    model = Model(fake)
    res = asyncio.run(
        verify_claim(dag, SentenceIndex(dag), Claim("c", "x"), lm_steps(model), VerifyConfig())
    )
    assert res.error is None
    it = res.iterations[0]
    assert peak >= 2
    evidence_prompts = [c.prompt for c in fake.calls if "Excerpts" in c.prompt]
    assert len(evidence_prompts) == 2
    assert [len(_ids_in(p)) for p in evidence_prompts] == [30, 30]
    assert it.dropped_ids == ("999", "999")
    assert {i.kind for i in res.issues} == {"unknown_id"}
    # 3 sentences from each prompt, mapped back from prompt ids to each node's own indices.
    assert [(e.node_id, e.sentence_index) for e in it.evidence] == [
        ("r1", 0), ("r1", 1), ("r1", 2), ("r2", 0), ("r2", 1), ("r2", 2),
    ]  # fmt: skip
    for e in it.evidence:
        assert e.text == f"This is sentence {e.sentence_index} of node {e.node_id} in the test."


def test_oversized_verdict_input_forces_compression_reruns() -> None:
    # Non-root evidence summaries are long; the verdict limit in sentences forces reruns.
    recs = [
        {"id": "r", "text": "Root fact one. Root fact two.", "sources": []},
        {"id": "m1", "text": node_text("m1", 6), "sources": ["r"]},
        {"id": "m2", "text": node_text("m2", 6), "sources": ["r"]},
        {"id": "T", "text": "Final.", "sources": ["m1", "m2"]},
    ]
    dag = Dag.from_records(recs)
    long_summary = " ".join(f"Point {i} is made here." for i in range(8))
    replies = [
        '{"parts": ["x"]}',
        _sel(list(range(1, 13)), long_summary),  # all 12 sentences of m1+m2: 8-sentence summary
        _sel([1, 2], long_summary),  # rerun 1 on the 12 selected: still too long
        _sel([1], "Short summary."),  # rerun 2: fits
        '{"reasoning": "ok", "verdict": "Not Fully Supported"}',
    ]
    fake = FakeProvider(replies)
    model = Model(fake)
    cfg = VerifyConfig(q=1, verdict_sentences=3)
    res = asyncio.run(verify_claim(dag, SentenceIndex(dag), Claim("c", "x"), lm_steps(model), cfg))
    assert fake.remaining == 0 and res.error is None
    it = res.iterations[0]
    assert it.compression_reruns == 2 and not it.evidence_truncated
    assert [(e.node_id, e.sentence_index) for e in it.evidence] == [("m1", 0)]
    assert it.nodes_with_evidence == ("m1",)
    # The rerun prompts hold only the previously selected sentences, with their own fresh ids.
    assert len(_ids_in(fake.calls[2].prompt)) == 12 and len(_ids_in(fake.calls[3].prompt)) == 2
    assert "Short summary." in fake.calls[4].prompt and long_summary not in fake.calls[4].prompt


def test_compression_exhausted_falls_back_to_largest_fitting_subset() -> None:
    recs = [
        {"id": "r", "text": "Root fact one.", "sources": []},
        {"id": "m1", "text": node_text("m1", 2), "sources": ["r"]},
        {"id": "m2", "text": node_text("m2", 2), "sources": ["r"]},
        {"id": "m3", "text": node_text("m3", 2), "sources": ["r"]},
        {"id": "T", "text": "Final.", "sources": ["m1", "m2", "m3"]},
    ]
    dag = Dag.from_records(recs)

    def respond(messages: list[Message]) -> str:
        p = messages[-1].content
        if "Statement to split" in p:
            return '{"parts": ["x"]}'
        if "Evidence:" in p:
            return '{"reasoning": "ok", "verdict": "Fully Supported"}'
        return json.dumps(
            {
                "selected_ids": _ids_in(p),
                "context_ids": [],
                "summary": "",
                "missing": "",
            }
        )

    # Selection writes no summary, so each node's selected sentences stand in: 2 sentences each.
    fake = FakeProvider(responder=respond)
    model = Model(fake)
    cfg = VerifyConfig(
        q=1, verdict_sentences=4, max_compression_reruns=1, evidence_sentences_nonroot=2
    )
    res = asyncio.run(verify_claim(dag, SentenceIndex(dag), Claim("c", "x"), lm_steps(model), cfg))
    it = res.iterations[0]
    assert it.compression_reruns == 1 and it.evidence_truncated
    verdict_prompt = next(c.prompt for c in fake.calls if "Evidence:" in c.prompt)
    assert verdict_prompt.count("<<< item") == 2  # two of the three items fit in 4 sentences


def test_unparseable_selection_is_recorded_against_the_claim() -> None:
    dag = _dag({"r1": 2})
    fake = FakeProvider(['{"parts": ["x"]}', "I think sentence two", "still prose, sorry"])
    model = Model(fake, max_reasks=1)
    res = asyncio.run(
        verify_claim(dag, SentenceIndex(dag), Claim("c", "x"), lm_steps(model), VerifyConfig())
    )
    assert res.verdict is None and res.termination.value == "error"
    assert "still prose" in (res.error or "")
    assert res.cost.lm_calls == 3
    # Both unreadable tries stay on the errored claim's record, in order.
    details = [i.detail for i in res.issues if i.kind == "unparseable_reply"]
    assert len(details) == 2
    assert details[0].startswith("evidence_selection: try 1") and "I think" in details[0]
    assert details[1].startswith("evidence_selection: try 2") and "still prose" in details[1]


def test_unreadable_replies_followed_by_good_ones_are_issues_and_the_claim_goes_on() -> None:
    """Every step that asks for JSON (decomposition, evidence selection, verdict) records each
    unreadable reply as an issue; a later readable reply lets the claim go on to its verdict."""
    dag = _dag({"r1": 2})
    replies = [
        "parts: x",  # decomposition, try 1
        '{"parts": ["x"]}',
        "I pick sentence one",  # evidence selection, try 1
        "As I said: sentence one.",  # try 2
        _sel([1]),
        "Supported, I think.",  # verdict, try 1
        '{"reasoning": "ok", "verdict": "Fully Supported"}',
    ]
    fake = FakeProvider(replies)
    model = Model(fake, max_reasks=3)
    res = asyncio.run(
        verify_claim(dag, SentenceIndex(dag), Claim("c", "x"), lm_steps(model), VerifyConfig())
    )
    assert fake.remaining == 0
    assert res.error is None and res.verdict is not None and res.verdict.value == "Fully Supported"
    unreadable = [i.detail for i in res.issues if i.kind == "unparseable_reply"]
    steps = [d.split(":", 1)[0] for d in unreadable]
    assert steps == ["decomposition", "evidence_selection", "evidence_selection", "verdict"]
    assert [d.split(": ", 2)[1] for d in unreadable] == ["try 1", "try 1", "try 2", "try 1"]


@pytest.mark.parametrize("n_parts", [1, 3])
def test_decomposition_queue_bounded_and_deduplicated(n_parts: int) -> None:
    from veritrail.method.subclaims import decompose_claim

    calls: list[str] = []

    class D:
        async def decompose(self, claim: Claim, text: str) -> list[str]:
            calls.append(text)
            if text == "root":
                return [f"p{i}" for i in range(n_parts)] + ["p0"]
            if text.startswith("p") and len(text) < 4:
                return [text + "a", text + "b", "root"]  # loops back to an already-seen item
            return [text]

    subs = asyncio.run(decompose_claim(D(), Claim("c", "root"), max_calls=20))
    assert len(calls) <= 20
    assert len(calls) == len(set(calls))  # no item decomposed twice
    assert "root" not in subs
    assert len(subs) == len(set(subs))
    assert len(asyncio.run(decompose_claim(D(), Claim("c", "root"), max_calls=2))) >= 1


def test_fit_to_context_fills_only_unset_limits() -> None:
    from veritrail.method.config import fit_to_context, model_context_window

    class P:
        n_ctx = 8192

    assert model_context_window(P()) == 8192
    cfg = fit_to_context(VerifyConfig(evidence_tokens_root=1000), 8192)
    assert cfg.verdict_tokens == 8192 - 2048 and cfg.evidence_tokens_nonroot == 8192 - 2048
    assert cfg.evidence_tokens_root == 1000
    assert fit_to_context(VerifyConfig(), None) == VerifyConfig()


def test_soft_prediction_samples_vote_on_sentences_and_verdicts() -> None:
    """SPEC §4.6: k samples, a sentence counts with >= t votes, the verdict by vote, score = FS share."""
    dag = _dag({"r1": 4})
    replies = iter(
        [
            _sel([1, 2]),  # sample 0
            _sel([2, 3]),  # sample 1
            _sel([2]),  # sample 2 -> only id 2 has >= 2 votes
        ]
    )
    verdicts = iter(["Fully Supported", "Fully Supported", "Not Fully Supported"])

    def respond(messages: list[Message]) -> str:
        p = messages[-1].content
        if "Statement to split" in p:
            return '{"parts": ["x"]}'
        if "Evidence:" in p:
            return json.dumps({"reasoning": "r", "verdict": next(verdicts)})
        return next(replies)

    fake = FakeProvider(responder=respond)
    model = Model(fake)
    cfg = VerifyConfig(samples=3, threshold=2)
    res = asyncio.run(
        verify_claim(
            dag,
            SentenceIndex(dag),
            Claim("c", "x"),
            lm_steps(model, sample_temperature=0.3),
            cfg,
        )
    )
    it = res.iterations[0]
    assert [(e.node_id, e.sentence_index) for e in it.evidence] == [("r1", 1)]
    assert it.verdict.value == "Fully Supported" and res.score == 2 / 3
    temps = sorted(c.config.temperature for c in fake.calls if "Excerpts" in c.prompt)
    assert temps == [0.0, 0.3, 0.3]
    assert sorted(c.config.sample_index for c in fake.calls if "Excerpts" in c.prompt) == [0, 1, 2]


def test_soft_prediction_without_qualified_evidence_stops_with_no_verdict() -> None:
    dag = _dag({"r1": 4})
    picks = iter([_sel([1]), _sel([2]), _sel([3])])

    def respond(messages: list[Message]) -> str:
        if "Statement to split" in messages[-1].content:
            return '{"parts": ["x"]}'
        return next(picks)

    model = Model(FakeProvider(responder=respond))
    res = asyncio.run(
        verify_claim(
            dag,
            SentenceIndex(dag),
            Claim("c", "x"),
            lm_steps(model),
            VerifyConfig(samples=3, threshold=2),
        )
    )
    assert res.verdict is None and res.termination.value == "no_qualified_evidence"
    assert res.iterations == ()


from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@given(
    sizes=st.lists(st.integers(1, 30), min_size=1, max_size=12),
    limit=st.integers(1, 25),
    tok=st.one_of(st.none(), st.integers(1, 40)),
)
def test_batching_covers_every_sentence_once_within_limits(
    sizes: list[int], limit: int, tok: int | None
) -> None:
    items = _items({f"n{i}": n for i, n in enumerate(sizes)})
    batches = make_batches(items, is_root=False, max_sentences=limit, max_tokens=tok)
    seen = [(e.node_id, s.sentence_index) for b in batches for e in b.excerpts for s in e.sentences]
    assert seen == [(nid, i) for nid, idx, _ in items for i in idx]  # all, once, in order
    for b in batches:
        assert 1 <= b.size <= limit
        assert [s.prompt_id for e in b.excerpts for s in e.sentences] == list(range(1, b.size + 1))
        if tok is not None and b.size > 1:
            from veritrail.method.tokens import estimate_tokens

            assert sum(estimate_tokens(s.text) for e in b.excerpts for s in e.sentences) <= tok
    ends = [e.node_id for b in batches for e in b.excerpts if e.ends_node]
    assert ends == [nid for nid, _, _ in items]  # exactly one excerpt ends each node


def test_claim_extraction_keeps_unreadable_replies_per_sentence_and_hands_them_to_its_claims() -> (
    None
):
    from veritrail.method.extraction import ExtractionConfig, ExtractionMode, extract, trace_to_json

    replies = [
        "It is checkable.",  # selection, try 1
        json.dumps(
            {
                "reason": "a fact",
                "verifiable_text": "The river rose.",
                "has_verifiable_content": True,
            }
        ),
        json.dumps({"status": "clear", "text": "The river rose.", "reason": "ok"}),
        "parts: the river rose",  # decomposition, try 1
        '{"parts": ["The river rose."]}',
    ]
    model = Model(FakeProvider(replies), max_reasks=3)
    # The per-sentence form: the replies above are its calls, in order.
    per_sentence = ExtractionConfig(mode=ExtractionMode.PER_SENTENCE)
    result = asyncio.run(extract(model, "The river rose.", config=per_sentence))
    (trace,) = result.trace
    assert result.claims and [c.text for c in result.claims] == ["The river rose."]
    assert [i.detail.split(":", 1)[0] for i in trace.issues] == ["claim_selection", "decomposition"]
    assert {i.kind for i in trace.issues} == {"unparseable_reply"}
    by_claim = result.issues_by_claim()
    assert by_claim == {result.claims[0].id: trace.issues}
    assert trace_to_json(result.trace)[0]["issues"][0]["kind"] == "unparseable_reply"
    # Handed to the loop, they head the claim's issues.
    from veritrail.method.oracle import Oracle

    dag = _dag({"r1": 1})
    oracle = Oracle.from_dict(
        {"claims": [{"claim": "The river rose.", "verdicts": ["Not Fully Supported"]}]}
    )
    (res,) = asyncio.run(
        verify_claims(
            dag, list(result.claims), oracle.steps(), VerifyConfig(), claim_issues=by_claim
        )
    )
    assert res.issues[: len(trace.issues)] == trace.issues
