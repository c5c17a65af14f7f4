"""Claim extraction (issue 4): each stage driven by the scripted provider, prompts asserted.

Tests that hold for both forms run in both (`mode`: batched, the default, and per-sentence); those
about one form's prompts pin it. The batched form's own rules are in test_extraction_batch.py."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from veritrail.lm import FakeProvider, Message, Model
from veritrail.method.claims import load_claims
from veritrail.method.extraction import (
    Disambiguation,
    ExtractionConfig,
    ExtractionMode,
    LMClaimSource,
    SentenceOutcome,
    claims_document,
    extract,
    extract_claims,
    merge_claims,
    normalize_claim_text,
    text_sentences,
    write_claims_document,
)

_TARGET = re.compile(r"<<< target sentence\n(.*?)\n>>> end target sentence", re.DOTALL)
_STATEMENT = re.compile(r"<<< statement\n(.*?)\n>>> end statement", re.DOTALL)

PER_SENTENCE = ExtractionConfig(mode=ExtractionMode.PER_SENTENCE)

# The batched prompts (method.extraction_batch), told apart by their fences.
_BATCH_KINDS = (
    ("<<< statements\n", "decomposition"),
    ("<<< checkable parts\n", "disambiguation"),
    ("Sentences to answer:", "selection"),
)


def _fenced_lines(prompt: str, label: str) -> list[tuple[int, str]]:
    m = re.search(rf"<<< {label}\n(.*?)\n>>> end {label}", prompt, re.DOTALL)
    assert m, prompt[:300]
    return [(int(i), t) for i, t in re.findall(r"^\[(\d+)\] (.*)$", m.group(1), re.MULTILINE)]


def _batched(prompt: str) -> bool:
    return any(mark in prompt for mark, _ in _BATCH_KINDS)


def _kind(prompt: str) -> str:
    for mark, kind in _BATCH_KINDS:
        if mark in prompt:
            return kind
    if "<<< statement" in prompt:
        return "decomposition"
    if "<<< checkable part" in prompt:
        return "disambiguation"
    assert "<<< target sentence" in prompt, prompt[:300]
    return "selection"


class Script:
    """Answers each stage by the sentence (or statement) the prompt is about, in any order.

    selection: sentence -> kept text, or None for "nothing checkable";
    disambiguation: sentence -> (status, text); default "clear" with the kept text;
    decomposition: statement -> parts; default the statement itself.
    """

    def __init__(
        self,
        selection: dict[str, str | None],
        disambiguation: dict[str, tuple[str, str]] | None = None,
        decomposition: dict[str, list[str]] | None = None,
    ) -> None:
        self.selection = selection
        self.disambiguation = disambiguation or {}
        self.decomposition = decomposition or {}
        self.prompts: list[tuple[str, str]] = []  # (kind, prompt)

    def __call__(self, messages: Sequence[Message]) -> str:
        prompt = "\n".join(m.content for m in messages)
        kind = _kind(prompt)
        self.prompts.append((kind, prompt))
        if _batched(prompt):
            return self._batch(kind, prompt)
        if kind == "decomposition":
            m = _STATEMENT.search(prompt)
            assert m
            stmt = m.group(1)
            return json.dumps({"parts": self.decomposition.get(stmt, [stmt])})
        m = _TARGET.search(prompt)
        assert m
        sentence = m.group(1)
        if kind == "selection":
            kept = self.selection[sentence]
            return json.dumps(
                {
                    "has_verifiable_content": kept is not None,
                    "verifiable_text": kept or "",
                    "reason": "scripted",
                }
            )
        kept_m = re.search(r"<<< checkable part\n(.*?)\n>>> end checkable part", prompt, re.DOTALL)
        assert kept_m
        status, text = self.disambiguation.get(sentence, ("clear", kept_m.group(1)))
        return json.dumps({"status": status, "text": text, "reason": "scripted"})

    def _batch(self, kind: str, prompt: str) -> str:
        # Sentence ids are index + 1 in every batched prompt; the text block shows the sentences.
        shown = dict(_fenced_lines(prompt, "text"))
        if kind == "selection":
            asked = re.search(r"Sentences to answer: ([0-9, ]+)", prompt)
            assert asked
            ids = [int(i) for i in re.findall(r"\d+", asked.group(1))]
            entries: list[dict[str, object]] = [
                {"id": i, "text": self.selection[shown[i]] or ""} for i in ids
            ]
        elif kind == "disambiguation":
            entries = []
            for i, part in _fenced_lines(prompt, "checkable parts"):
                status, text = self.disambiguation.get(shown[i], ("clear", part))
                entries.append({"id": i, "status": status, "text": text})
        else:
            entries = [
                {"id": i, "parts": self.decomposition.get(stmt, [stmt])}
                for i, stmt in _fenced_lines(prompt, "statements")
            ]
        return json.dumps({"sentences": entries})

    def of(self, kind: str) -> list[str]:
        return [p for k, p in self.prompts if k == kind]

    def decomposed(self) -> list[str]:
        """Every statement sent to decomposition, in either form."""
        out: list[str] = []
        for p in self.of("decomposition"):
            if _batched(p):
                out += [t for _, t in _fenced_lines(p, "statements")]
            else:
                m = _STATEMENT.search(p)
                assert m
                out.append(m.group(1))
        return out


@pytest.fixture(params=[ExtractionMode.BATCHED, ExtractionMode.PER_SENTENCE])
def mode(request: pytest.FixtureRequest) -> ExtractionMode:
    return request.param  # type: ignore[no-any-return]


def _model(script: Script) -> tuple[Model, FakeProvider]:
    fake = FakeProvider(responder=script)
    return Model(fake), fake


async def test_sentence_without_verifiable_content_yields_nothing(mode: ExtractionMode) -> None:
    text = "What a wonderful story this is! Everyone should read it."
    script = Script({s: None for s in text_sentences(text)})
    model, _ = _model(script)
    res = await extract(model, text, config=ExtractionConfig(mode=mode))
    assert res.claims == ()
    assert [t.outcome for t in res.trace] == [SentenceOutcome.NO_VERIFIABLE_CONTENT] * 2
    # Only selection ran: no disambiguation or decomposition call for such sentences.
    assert len(script.of("selection")) == (1 if mode is ExtractionMode.BATCHED else 2)
    assert script.of("disambiguation") == [] and script.of("decomposition") == []


async def test_unresolvable_pronoun_is_dropped_and_resolvable_one_rewritten(
    mode: ExtractionMode,
) -> None:
    text = (
        "Two sisters, Ana and Bea, ran the farm. "
        "She sold it in 1950. "
        "Ana Reyes moved to Lima. "
        "She opened a bakery there."
    )
    s = text_sentences(text)
    assert len(s) == 4
    script = Script(
        {x: x for x in s},
        disambiguation={
            s[1]: ("unresolvable", ""),
            s[3]: ("resolved", "Ana Reyes opened a bakery in Lima."),
        },
    )
    model, _ = _model(script)
    res = await extract(model, text, config=ExtractionConfig(mode=mode))
    texts = [c.text for c in res.claims]
    assert "She sold it in 1950." not in texts
    assert "Ana Reyes opened a bakery in Lima." in texts
    assert res.trace[1].outcome is SentenceOutcome.UNRESOLVABLE
    assert res.trace[1].disambiguation is Disambiguation.UNRESOLVABLE
    assert res.trace[3].disambiguation is Disambiguation.RESOLVED
    # The dropped sentence never reached decomposition; the resolved text is what got decomposed.
    decomposed = script.decomposed()
    assert "She sold it in 1950." not in decomposed
    assert "Ana Reyes opened a bakery in Lima." in decomposed
    # The disambiguation prompt for sentence 3 showed the preceding sentences as context.
    p3 = next(p for p in script.of("disambiguation") if s[3] in p)
    if mode is ExtractionMode.PER_SENTENCE:
        assert "<<< preceding sentences" in p3 and s[2] in p3
    else:
        assert (3, s[2]) in _fenced_lines(p3, "text")


async def test_compound_sentence_yields_several_claims_with_right_pointers(
    mode: ExtractionMode,
) -> None:
    text = (
        "The report covers the harbour town. "
        "Marta founded the museum in 1921 and ran it until 1940, and the town grew quickly. "
        "The museum is still open."
    )
    s = text_sentences(text)
    parts = [
        "Marta founded the museum in 1921.",
        "Marta ran the museum until 1940.",
        "The harbour town grew quickly.",
    ]
    script = Script(
        {s[0]: None, s[1]: s[1], s[2]: "The museum is still open."},
        decomposition={s[1]: parts},
    )
    model, _ = _model(script)
    res = await extract(model, text, config=ExtractionConfig(mode=mode))
    assert [c.text for c in res.claims] == [*parts, "The museum is still open."]
    assert [c.sentence_indices for c in res.claims] == [(1,), (1,), (1,), (2,)]
    assert [c.id for c in res.claims] == ["c1", "c2", "c3", "c4"]
    grouped = res.claims_by_sentence()
    assert grouped[0] == [] and len(grouped[1]) == 3 and len(grouped[2]) == 1
    # Every sentence pointer names a sentence whose text the claims came from.
    for c in res.claims:
        for i in c.sentence_indices:
            assert res.trace[i].outcome is SentenceOutcome.CLAIMS


async def test_duplicates_across_sentences_merge_keeping_every_source_sentence(
    mode: ExtractionMode,
) -> None:
    text = (
        "Paris is the capital of France. "
        "Berlin is large. "
        "As noted, paris is the capital of France!! "
        "Also, Paris is the capital of France ."
    )
    s = text_sentences(text)
    script = Script(
        {x: x for x in s},
        decomposition={
            s[2]: ["paris is the capital of France!!"],
            s[3]: ["Paris is the capital of france ."],
        },
    )
    model, _ = _model(script)
    claims = await extract_claims(model, text, mode=mode)
    assert [c.text for c in claims] == ["Paris is the capital of France.", "Berlin is large."]
    assert claims[0].sentence_indices == (0, 2, 3)
    assert claims[1].sentence_indices == (1,)


def test_near_duplicates_merge_but_different_facts_stay_apart() -> None:
    merged = merge_claims(
        [
            (0, "The expedition reached the northern coast of Greenland in the summer of 1906."),
            (3, "The expedition reached the northern coast of Greenland in the summer 1906."),
            (4, "The expedition reached the northern coast of Greenland in the summer of 1907."),
            (5, "Anna was born in 1901."),
            (6, "Anna was born in 1907."),
            (7, "Anna was not born in 1901."),
            (8, "Boats were built in the harbour."),
            (9, "Boat were built in the harbour."),
            (10, "Ruth hired Bill."),
            (11, "Bill hired Ruth."),
        ]
    )
    assert [(c.text, c.sentence_indices) for c in merged] == [
        ("The expedition reached the northern coast of Greenland in the summer of 1906.", (0, 3)),
        ("The expedition reached the northern coast of Greenland in the summer of 1907.", (4,)),
        ("Anna was born in 1901.", (5,)),
        ("Anna was born in 1907.", (6,)),
        ("Anna was not born in 1901.", (7,)),
        ("Boats were built in the harbour.", (8, 9)),
        ("Ruth hired Bill.", (10,)),
        ("Bill hired Ruth.", (11,)),
    ]
    # threshold 1.0 = exact (after normalisation) only
    exact = merge_claims([(0, "A b."), (1, "a  B"), (2, "A c.")], similarity_threshold=1.0)
    assert [(c.text, c.sentence_indices) for c in exact] == [("A b.", (0, 1)), ("A c.", (2,))]


@given(st.lists(st.tuples(st.integers(0, 20), st.text(min_size=0, max_size=40)), max_size=25))
def test_merge_invariants(found: list[tuple[int, str]]) -> None:
    merged = merge_claims(found)
    # Every input with content lands in exactly one claim that keeps its sentence index.
    for idx, text in found:
        if normalize_claim_text(text):
            owners = [c for c in merged if idx in c.sentence_indices]
            assert owners
    # Claim texts are inputs verbatim, ids unique, indices sorted and unique.
    inputs = {t for _, t in found}
    assert all(c.text in inputs for c in merged)
    assert len({c.id for c in merged}) == len(merged)
    assert all(list(c.sentence_indices) == sorted(set(c.sentence_indices)) for c in merged)
    assert len({normalize_claim_text(c.text) for c in merged}) == len(merged)


async def test_context_window_and_question_reach_the_prompts() -> None:
    text = "Alpha one. Beta two. Gamma three. Delta four. Epsilon five."
    s = text_sentences(text)
    assert len(s) == 5
    script = Script({x: None for x in s})
    model, _ = _model(script)
    await extract(
        model,
        text,
        question="What are the letters?",
        config=ExtractionConfig(
            context_before=1, context_after=1, mode=ExtractionMode.PER_SENTENCE
        ),
    )
    p = next(p for p in script.of("selection") if "<<< target sentence\nGamma three." in p)
    before = p.split("<<< preceding sentences\n", 1)[1].split("\n>>>", 1)[0]
    after = p.split("<<< following sentences\n", 1)[1].split("\n>>>", 1)[0]
    assert before == "Beta two." and after == "Delta four."
    assert "<<< question\nWhat are the letters?\n>>> end question" in p
    first = next(p for p in script.of("selection") if "<<< target sentence\nAlpha one." in p)
    assert "Sentences before the target sentence:\n(none)" in first


async def test_unreadable_reply_is_recorded_and_the_run_goes_on() -> None:
    text = "The bridge opened in 1932. The tower fell in 1950."
    s = text_sentences(text)
    good = Script({x: x for x in s})

    def responder(messages: Sequence[Message]) -> str:
        prompt = "\n".join(m.content for m in messages)
        if "<<< target sentence\nThe tower fell" in prompt and _kind(prompt) == "selection":
            return "I think it might be checkable, maybe."
        return good(messages)

    model = Model(FakeProvider(responder=responder), max_reasks=1)
    res = await extract(model, text, config=PER_SENTENCE)
    assert [c.text for c in res.claims] == ["The bridge opened in 1932."]
    bad = res.trace[1]
    assert bad.outcome is SentenceOutcome.ERROR
    assert bad.error is not None and bad.error.startswith("selection:")
    assert "maybe" in bad.raw


async def test_calls_are_accounted_under_their_step_names(mode: ExtractionMode) -> None:
    text = "Oslo is in Norway. How lovely."
    s = text_sentences(text)
    script = Script({s[0]: s[0], s[1]: None})
    model, _ = _model(script)
    await extract(model, text, config=ExtractionConfig(mode=mode))
    per_step = model.usage.per_step()
    assert per_step["claim_selection"].lm_calls == (1 if mode is ExtractionMode.BATCHED else 2)
    assert per_step["claim_disambiguation"].lm_calls == 1
    assert per_step["decomposition"].lm_calls == 1


async def test_claims_file_round_trips_through_load_claims(
    tmp_path: Path, mode: ExtractionMode
) -> None:
    text = "Lima is in Peru. Quito is in Ecuador."
    s = text_sentences(text)
    model, _ = _model(Script({x: x for x in s}))
    res = await extract(model, text, config=ExtractionConfig(mode=mode))
    out = tmp_path / "claims.json"
    write_claims_document(claims_document(res, source="x.txt", model=model.name), out)
    doc = json.loads(out.read_text())
    assert doc["sentences"] == s
    loaded = load_claims(out)
    assert loaded == list(res.claims)
    assert [c.sentence_indices for c in loaded] == [(0,), (1,)]


async def test_claim_source_plugs_into_the_verifier_seam() -> None:
    text = "Lima is in Peru."
    model, _ = _model(Script({text: text}))
    source = LMClaimSource(model, question="Where is Lima?")
    claims = await source.claims_for(text)
    assert [c.text for c in claims] == [text]
    assert source.last is not None and source.last.sentences == (text,)


def test_config_rejects_bad_values() -> None:
    with pytest.raises(ValueError):
        ExtractionConfig(context_before=-1)
    with pytest.raises(ValueError):
        ExtractionConfig(similarity_threshold=0.0)
    with pytest.raises(ValueError):
        ExtractionConfig(max_parallel=0)
    with pytest.raises(ValueError):
        ExtractionConfig(mode="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        ExtractionConfig(batch_sentences=0)
    with pytest.raises(ValueError):
        ExtractionConfig(batch_tokens=0)
    # A mode given as its spelling (a flag, a settings file) is kept as the enum.
    assert ExtractionConfig(mode="per-sentence").mode is ExtractionMode.PER_SENTENCE  # type: ignore[arg-type]


BOOOOKSCORE = Path(__file__).resolve().parents[3] / "shared" / "data" / "booookscore"


@pytest.mark.embedded
@pytest.mark.slow
async def test_embedded_model_over_a_real_final_summary() -> None:
    """Structure only: the small model's answers are not the point, the plumbing is."""
    pytest.importorskip("xllamacpp")
    registry = pytest.importorskip("veritrail.lm.registry")
    source = BOOOOKSCORE / "claude-88000-hier.json"
    if not source.is_file():
        pytest.skip("shared/data/booookscore is not beside the checkout")
    summary = json.loads(source.read_text(encoding="utf-8"))["a-day-of-fallen-night.epub"][
        "final_summary"
    ]
    # The first two sentences of a real final summary keep the run to a few dozen seconds.
    text = " ".join(text_sentences(summary)[:2])
    model = registry.get_model("local/smollm2-135m", cache=False)
    try:
        res = await extract(
            model, text, config=ExtractionConfig(context_before=1, context_after=0, max_tokens=200)
        )
    finally:
        await model.aclose()
    assert res.sentences == tuple(text_sentences(text)) and len(res.sentences) == 2
    assert [t.index for t in res.trace] == [0, 1]
    assert all(isinstance(t.outcome, SentenceOutcome) for t in res.trace)
    for t in res.trace:
        # Claims exist exactly for sentences that reached the end; failures keep their reply.
        assert bool(t.claims) == (t.outcome is SentenceOutcome.CLAIMS)
        if t.outcome is SentenceOutcome.ERROR:
            assert t.error
    assert [c.id for c in res.claims] == [f"c{i}" for i in range(1, len(res.claims) + 1)]
    for c in res.claims:
        assert c.text.strip() and c.sentence_indices
        assert all(
            0 <= i < 2 and res.trace[i].outcome is SentenceOutcome.CLAIMS
            for i in c.sentence_indices
        )
    per_step = model.usage.per_step()
    # The batched form (the default): one selection call covers both sentences (more when a
    # sentence missing from the reply is asked again).
    assert per_step["claim_selection"].lm_calls >= 1
    assert all(cost.input_tokens > 0 for cost in per_step.values())
