"""Batched claim extraction (issue 38, item 1): each stage over many sentences per call.

The scripted provider answers the batched prompts by the ids they show; the demonstration model
(`demo/overlap`, in-process) gives the call counts and the claims of both forms on the examples."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from veritrail.dag import load_dag
from veritrail.lm import FakeProvider, Message, Model
from veritrail.lm.registry import get_model
from veritrail.method.extraction import (
    ExtractionConfig,
    ExtractionMode,
    SentenceOutcome,
    extract,
    text_sentences,
)
from veritrail.method.extraction_batch import (
    DECOMPOSITION_SCHEMA_NAME,
    DISAMBIGUATION_SCHEMA_NAME,
    SELECTION_SCHEMA_NAME,
    batch_windows,
    selection_schema,
    sentence_id,
)
from veritrail.method.tokens import estimate_tokens
from veritrail.records import IssueKind

ROOT = Path(__file__).resolve().parents[2]
BATCHED = ExtractionConfig(mode=ExtractionMode.BATCHED)
PER_SENTENCE = ExtractionConfig(mode=ExtractionMode.PER_SENTENCE)
FIVE = (
    "The Harbour Museum opened in 1921. It was founded by Marta Reyes. "
    "The building has three floors. Its oldest chart dates from 1687. "
    "Visitors come from many countries."
)


def _lines(prompt: str, label: str) -> list[tuple[int, str]]:
    m = re.search(rf"<<< {label}\n(.*?)\n>>> end {label}", prompt, re.DOTALL)
    assert m, prompt[:300]
    return [(int(i), t) for i, t in re.findall(r"^\[(\d+)\] (.*)$", m.group(1), re.MULTILINE)]


def _asked(prompt: str) -> list[int]:
    m = re.search(r"Sentences to answer: ([0-9, ]+)", prompt)
    assert m, prompt[-300:]
    return [int(i) for i in re.findall(r"\d+", m.group(1))]


def _kind(prompt: str) -> str:
    if "<<< statements\n" in prompt:
        return "decomposition"
    if "<<< checkable parts\n" in prompt:
        return "disambiguation"
    return "selection"


Entries = list[dict[str, Any]]


def keep_all(kind: str, prompt: str) -> Entries:
    """Every sentence kept, clear and undivided: the entries a faithful model gives."""
    if kind == "selection":
        shown = dict(_lines(prompt, "text"))
        return [{"id": i, "text": shown[i]} for i in _asked(prompt)]
    if kind == "disambiguation":
        return [
            {"id": i, "status": "clear", "text": t} for i, t in _lines(prompt, "checkable parts")
        ]
    return [{"id": i, "parts": [t]} for i, t in _lines(prompt, "statements")]


class Batches:
    """A scripted model for the batched prompts: `entries(kind, prompt, ask)` gives a reply's
    entries (`ask` counts the calls of that kind so far, from 1); a str return is sent as is."""

    def __init__(self, entries: Callable[[str, str, int], Entries | str] | None = None) -> None:
        self.entries = entries or (lambda kind, prompt, ask: keep_all(kind, prompt))
        self.calls: list[tuple[str, str]] = []

    def __call__(self, messages: Sequence[Message]) -> str:
        prompt = "\n".join(m.content for m in messages)
        kind = _kind(prompt)
        self.calls.append((kind, prompt))
        got = self.entries(kind, prompt, len(self.of(kind)))
        return got if isinstance(got, str) else json.dumps({"sentences": got})

    def of(self, kind: str) -> list[str]:
        return [p for k, p in self.calls if k == kind]


def _model(script: Batches, **kw: Any) -> tuple[Model, FakeProvider]:
    fake = FakeProvider(responder=script)
    return Model(fake, **kw), fake


# -- call counts and the same claims as the per-sentence form -------------------------------------


async def test_five_sentences_cost_three_calls_batched_and_fifteen_per_sentence() -> None:
    assert len(text_sentences(FIVE)) == 5
    got = {}
    for cfg in (BATCHED, PER_SENTENCE):
        model = get_model("demo/overlap", cache=False)
        res = await extract(model, FIVE, config=cfg)
        calls = {str(k): v.lm_calls for k, v in model.usage.per_step().items()}
        got[cfg.mode] = ([(c.text, c.sentence_indices) for c in res.claims], calls)
    claims, calls = got[ExtractionMode.BATCHED]
    assert calls == {"claim_selection": 1, "claim_disambiguation": 1, "decomposition": 1}
    per_claims, per_calls = got[ExtractionMode.PER_SENTENCE]
    assert per_calls == {"claim_selection": 5, "claim_disambiguation": 5, "decomposition": 5}
    assert claims == per_claims and len(claims) == 5


def _example_texts() -> list[str]:
    dag = load_dag(ROOT / "examples" / "quickstart" / "dag.json")
    answer = (ROOT / "examples" / "check" / "answer.txt").read_text(encoding="utf-8")
    return [dag.node(dag.terminal).text, answer]


@pytest.mark.parametrize("which", [0, 1], ids=["quickstart", "check"])
async def test_both_forms_give_identical_claims_on_the_examples(which: int) -> None:
    text = _example_texts()[which]
    out = []
    for cfg in (BATCHED, PER_SENTENCE):
        res = await extract(get_model("demo/overlap", cache=False), text, config=cfg)
        out.append((res.sentences, res.claims, [t.outcome for t in res.trace]))
    assert out[0] == out[1]
    assert out[0][1]  # the examples do have claims


# -- what a stage drops does not reach the next ---------------------------------------------------


async def test_dropped_sentences_do_not_reach_the_next_stage() -> None:
    text = "Oslo is in Norway. How lovely! She moved there. Bergen is wet."
    s = text_sentences(text)

    def entries(kind: str, prompt: str, ask: int) -> Entries:
        got = keep_all(kind, prompt)
        if kind == "selection":
            return [{**e, "text": ""} if "lovely" in e["text"] else e for e in got]
        if kind == "disambiguation":
            return [
                {**e, "status": "unresolvable", "text": ""} if "She" in e["text"] else e
                for e in got
            ]
        return got

    script = Batches(entries)
    model, _ = _model(script)
    res = await extract(model, text)
    assert [t.outcome for t in res.trace] == [
        SentenceOutcome.CLAIMS,
        SentenceOutcome.NO_VERIFIABLE_CONTENT,
        SentenceOutcome.UNRESOLVABLE,
        SentenceOutcome.CLAIMS,
    ]
    assert [c.text for c in res.claims] == [s[0], s[3]]
    assert [i for i, _ in _lines(script.of("disambiguation")[0], "checkable parts")] == [1, 3, 4]
    assert [i for i, _ in _lines(script.of("decomposition")[0], "statements")] == [1, 4]
    assert len(script.calls) == 3


async def test_a_stage_with_nothing_left_makes_no_call() -> None:
    text = "What a lovely day! I hope this helps."
    script = Batches(lambda kind, prompt, ask: [{"id": i, "text": ""} for i in _asked(prompt)])
    model, _ = _model(script)
    res = await extract(model, text)
    assert res.claims == () and [k for k, _ in script.calls] == ["selection"]


# -- ids: unknown, missing, twice, echoed ---------------------------------------------------------


async def test_an_unknown_id_is_dropped_and_recorded_on_the_calls_sentences() -> None:
    text = "Oslo is in Norway. Bergen is wet."

    def entries(kind: str, prompt: str, ask: int) -> Entries:
        got = keep_all(kind, prompt)
        if kind == "selection":
            got.append({"id": 9, "text": "Trondheim is cold."})
        return got

    model, _ = _model(Batches(entries))
    res = await extract(model, text)
    assert [c.text for c in res.claims] == text_sentences(text)
    issues = res.issues_by_claim()
    assert set(issues) == {"c1", "c2"}
    for got in issues.values():
        assert [(i.kind, i.detail) for i in got] == [
            (IssueKind.UNKNOWN_ID, "claim_selection: id '9' was not asked for")
        ]


async def test_a_missing_sentence_is_asked_again_once_with_the_other_missing_ones() -> None:
    text = "Oslo is in Norway. Bergen is wet. Tromso is north."

    def entries(kind: str, prompt: str, ask: int) -> Entries:
        got = keep_all(kind, prompt)
        # The first selection reply leaves out sentences 2 and 3; the second answers them.
        return got[:1] if kind == "selection" and ask == 1 else got

    script = Batches(entries)
    model, _ = _model(script)
    res = await extract(model, text)
    assert [c.text for c in res.claims] == text_sentences(text)
    assert [_asked(p) for p in script.of("selection")] == [[1, 2, 3], [2, 3]]
    assert len(script.calls) == 4  # one extra call, for both missing sentences
    assert all(t.issues == () for t in res.trace)


async def test_a_sentence_missing_twice_is_an_error_for_that_sentence_only() -> None:
    text = "Oslo is in Norway. Bergen is wet."

    def entries(kind: str, prompt: str, ask: int) -> Entries:
        got = keep_all(kind, prompt)
        return [e for e in got if e["id"] != 2] if kind == "disambiguation" else got

    script = Batches(entries)
    model, _ = _model(script)
    res = await extract(model, text)
    assert [c.text for c in res.claims] == ["Oslo is in Norway."]
    bad = res.trace[1]
    assert bad.outcome is SentenceOutcome.ERROR and bad.selected == "Bergen is wet."
    assert bad.error == "disambiguation: no readable answer for this sentence"
    assert len(script.of("disambiguation")) == 2


async def test_an_unreadable_entry_is_asked_again_and_recorded_on_its_sentence() -> None:
    text = "Oslo is in Norway. Bergen is wet."

    def entries(kind: str, prompt: str, ask: int) -> Entries:
        got = keep_all(kind, prompt)
        if kind == "disambiguation" and ask == 1:
            got[1]["status"] = "maybe"
        return got

    script = Batches(entries)
    model, _ = _model(script)
    res = await extract(model, text)
    assert [c.text for c in res.claims] == text_sentences(text)
    assert [i for i, _ in _lines(script.of("disambiguation")[1], "checkable parts")] == [2]
    assert res.trace[0].issues == ()
    (issue,) = res.trace[1].issues
    assert issue.kind is IssueKind.UNPARSEABLE_REPLY
    assert issue.detail.startswith("claim_disambiguation: ask 1: the entry for id 2: ValueError")
    assert res.issues_by_claim() == {"c2": (issue,)}


async def test_a_second_answer_for_one_id_is_dropped_and_recorded() -> None:
    text = "Oslo is in Norway."

    def entries(kind: str, prompt: str, ask: int) -> Entries:
        got = keep_all(kind, prompt)
        return [*got, {"id": 1, "parts": ["Oslo is a city."]}] if kind == "decomposition" else got

    model, _ = _model(Batches(entries))
    res = await extract(model, text)
    assert [c.text for c in res.claims] == ["Oslo is in Norway."]
    assert [i.detail for i in res.trace[0].issues] == [
        "decomposition: id 1 answered twice (the first answer kept)"
    ]


async def test_ids_given_as_text_and_echoed_ids_and_fences_are_read() -> None:
    text = "Oslo is in Norway. Bergen is wet."

    def entries(kind: str, prompt: str, ask: int) -> Entries:
        got = keep_all(kind, prompt)
        if kind == "selection":
            return [{"id": f"[{e['id']}]", "text": f"[{e['id']}] {e['text']}"} for e in got]
        if kind == "decomposition":
            return [
                {**e, "parts": ["<<< statements", *e["parts"], ">>> end statements"]} for e in got
            ]
        return got

    model, _ = _model(Batches(entries))
    res = await extract(model, text)
    assert [c.text for c in res.claims] == text_sentences(text)


async def test_an_unreadable_reply_is_an_error_for_every_sentence_of_the_call() -> None:
    text = "Oslo is in Norway. Bergen is wet."
    script = Batches(lambda kind, prompt, ask: "I would say both are checkable.")
    model, _ = _model(script, max_reasks=1)
    res = await extract(model, text)
    assert res.claims == ()
    for t in res.trace:
        assert t.outcome is SentenceOutcome.ERROR
        assert t.error is not None and t.error.startswith("selection:")
        assert "checkable" in t.raw
        # Both tries were unreadable: each sentence of the call carries both.
        assert [i.kind for i in t.issues] == [IssueKind.UNPARSEABLE_REPLY] * 2
    assert len(script.calls) == 2  # the model layer's re-ask; no follow-up on top of it


# -- windows, prompt layout, schema ---------------------------------------------------------------


async def test_a_long_text_goes_in_windows_with_their_context() -> None:
    text = " ".join(f"Town {n} has {n} bridges." for n in range(1, 8))
    s = text_sentences(text)
    cfg = ExtractionConfig(batch_sentences=3, context_before=1, context_after=1)
    script = Batches()
    model, fake = _model(script)
    res = await extract(model, text, config=cfg)
    assert [c.text for c in res.claims] == s
    selections = script.of("selection")
    assert [_asked(p) for p in selections] == [[1, 2, 3], [4, 5, 6], [7]]
    # Each window shows one sentence before and one after it, numbered as everywhere else.
    assert [[i for i, _ in _lines(p, "text")] for p in selections] == [
        [1, 2, 3, 4],
        [3, 4, 5, 6, 7],
        [6, 7],
    ]
    assert len(script.calls) == 9
    # The shared part first, the call's own part last: every window's system message is the
    # same, and its user message ends with the ids it asks about.
    systems = {
        c.messages[0].content for c in fake.calls if "Sentences to answer" in c.messages[-1].content
    }
    assert len(systems) == 1
    assert all(p.rstrip().endswith("Reply with the JSON object only.") for p in selections)
    names = {c.config.schema_name for c in fake.calls}
    assert names == {SELECTION_SCHEMA_NAME, DISAMBIGUATION_SCHEMA_NAME, DECOMPOSITION_SCHEMA_NAME}
    # The reply cap is the per-sentence cap once per sentence asked about.
    caps = [
        c.config.max_tokens for c in fake.calls if c.config.schema_name == SELECTION_SCHEMA_NAME
    ]
    assert caps == [384 * 3, 384 * 3, 384]


async def test_the_question_reaches_every_batched_prompt() -> None:
    script = Batches()
    model, _ = _model(script)
    await extract(model, "Oslo is in Norway.", question="Where is Oslo?")
    assert len(script.calls) == 3
    assert all("<<< question\nWhere is Oslo?\n>>> end question" in p for _, p in script.calls)


async def test_a_given_decompose_function_is_called_per_sentence() -> None:
    text = "Oslo is in Norway and Bergen is wet. Tromso is north."
    seen: list[tuple[str, str]] = []

    async def decompose(model: Model, statement: str, context: str) -> list[str]:
        seen.append((statement, context))
        return [p.strip() + "." for p in statement.rstrip(".").split(" and ")]

    script = Batches()
    model, _ = _model(script)
    res = await extract(model, text, question="Q?", decompose=decompose)
    assert [c.text for c in res.claims] == [
        "Oslo is in Norway.",
        "Bergen is wet.",
        "Tromso is north.",
    ]
    assert script.of("decomposition") == []
    assert seen[1] == (
        "Tromso is north.",
        "Question the text answers: Q?\nPreceding text: " + text_sentences(text)[0],
    )


def test_schema_is_bounded_and_one_object_per_size() -> None:
    got = selection_schema(4)
    assert got is selection_schema(4)
    assert got["properties"]["sentences"]["maxItems"] == 4
    entry = got["properties"]["sentences"]["items"]
    assert entry["required"] == ["id", "text"] and entry["additionalProperties"] is False
    assert sentence_id(0) == 1


@given(
    st.lists(st.text(alphabet="ab .", min_size=1, max_size=60), min_size=0, max_size=30),
    st.integers(1, 6),
    st.one_of(st.none(), st.integers(1, 40)),
    st.integers(0, 3),
    st.integers(0, 3),
)
def test_windows_cover_every_sentence_once_in_order_within_their_bounds(
    sentences: list[str], most: int, tokens: int | None, before: int, after: int
) -> None:
    cfg = ExtractionConfig(
        context_before=before, context_after=after, batch_sentences=most, batch_tokens=tokens
    )
    wins = batch_windows(sentences, cfg)
    assert [i for w in wins for i in w.targets] == list(range(len(sentences)))
    for w in wins:
        assert 1 <= len(w.targets) <= most
        size = sum(estimate_tokens(sentences[i]) for i in w.targets)
        assert tokens is None or size <= tokens or len(w.targets) == 1
        assert w.shown_lo == max(0, w.lo - before)
        assert w.shown_hi == min(len(sentences), w.hi + after)


async def test_the_batched_prompts_are_listed_and_overridable(tmp_path: Path) -> None:
    from veritrail.method.prompting import packaged_prompt_names, prompt_dir, prompt_source

    names = {"claim_selection_batch", "claim_disambiguation_batch", "claim_decomposition_batch"}
    assert names <= set(packaged_prompt_names())
    (tmp_path / "claim_selection_batch.md").write_text(
        prompt_source("claim_selection_batch").replace("## system\n", "## system\nHOUSE RULES.\n"),
        encoding="utf-8",
    )
    script = Batches()
    model, fake = _model(script)
    with prompt_dir(tmp_path):
        await extract(model, "Oslo is in Norway.")
    systems = [c.messages[0].content for c in fake.calls]
    assert systems[0].startswith("HOUSE RULES.")
    assert not any(s.startswith("HOUSE RULES.") for s in systems[1:])
