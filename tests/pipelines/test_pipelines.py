"""Reference pipelines driven by the scripted provider (and once by the embedded model)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from veritrail.dag import Dag, load_dag
from veritrail.lm.base import Message
from veritrail.lm.fake import FakeProvider
from veritrail.lm.model import Model
from veritrail.method.segment import split_sentences
from veritrail.method.tokens import estimate_tokens
from veritrail.pipelines import (
    NO_INFO,
    HierarchicalConfig,
    IncrementalConfig,
    PipelineError,
    QAConfig,
    answer_map_reduce,
    chunk_text,
    group_to_fit,
    summarize_hierarchical,
    summarize_incremental,
)

# Eight sentences of about 8 tokens each: with chunk_tokens=10 every sentence is its own chunk.
NAMES = ["Anna", "Ben", "Cara", "Dan", "Eve", "Finn", "Gus", "Hana"]
SENTENCES = [f"{n} walked to the old mill on day {i}." for i, n in enumerate(NAMES, 1)]
TEXT = " ".join(SENTENCES)


def _user(messages: Sequence[Message]) -> str:
    return messages[-1].content


def _summarizer(messages: Sequence[Message]) -> str:
    # Ten-token replies that name what they were given, so the DAG can be checked against them.
    u = _user(messages)
    found = re.findall(r"\b([A-H])[a-z]+ walked", u) or re.findall(r"Summary<([A-H]+)>", u)
    return f"Summary<{''.join(found)}>" + "." * (40 - len(found) - 10)


def _stage_counts(dag: Dag) -> dict[int, int]:
    return dict(Counter(n.stage for n in dag))


async def test_hierarchical_merges_level_by_level() -> None:
    fake = FakeProvider(responder=_summarizer)
    res = await summarize_hierarchical(
        TEXT, Model(fake), HierarchicalConfig(chunk_tokens=10, context_tokens=25, title="Story")
    )
    dag = res.dag
    # 8 chunks → 8 summaries → 4 → 2 → 1 (two ten-token summaries fit the 25-token budget).
    assert _stage_counts(dag) == {1: 8, 2: 8, 3: 4, 4: 2, 5: 1}
    assert res.lm_calls == len(fake.calls) == 15
    assert dag.terminal == "summary-3-1" and res.output.startswith("Summary<ABCDEFGH>")
    assert [dag.node(f"chunk-{i}").text for i in range(1, 9)] == SENTENCES
    assert dag.sources("summary-1-1") == ("summary-0-1", "summary-0-2")
    assert dag.meta["stage_names"] == {
        "1": "source",
        "2": "summarize_chunk",
        "3": "merge_summaries",
        "4": "merge_summaries",
        "5": "merge_summaries",
    }
    assert dag.meta["levels"] == 4 and dag.meta["over_budget_groups"] == 0
    # Chunk texts reach the model fenced, with the title as context.
    first = fake.calls[0].prompt
    assert "<<< passage" in first and "<<< title" in first


async def test_hierarchical_odd_level_and_single_chunk() -> None:
    fake = FakeProvider(responder=_summarizer)
    res = await summarize_hierarchical(
        " ".join(SENTENCES[:5]), Model(fake), HierarchicalConfig(chunk_tokens=10, context_tokens=25)
    )
    # 5 summaries → groups [2, 3] (the lone last one joins its neighbour) → 1.
    assert _stage_counts(res.dag) == {1: 5, 2: 5, 3: 2, 4: 1}
    assert len(res.dag.sources("summary-1-2")) == 3
    assert res.dag.meta["over_budget_groups"] == 1

    one = await summarize_hierarchical(SENTENCES[0], Model(FakeProvider(responder=_summarizer)))
    assert _stage_counts(one.dag) == {1: 1, 2: 1} and one.dag.terminal == "summary-0-1"


async def test_hierarchical_rejects_empty_text_and_empty_replies() -> None:
    with pytest.raises(PipelineError, match="empty"):
        await summarize_hierarchical("   ", Model(FakeProvider()))
    with pytest.raises(PipelineError, match="empty reply"):
        await summarize_hierarchical(TEXT, Model(FakeProvider(responder=lambda m: "  ")))


async def test_incremental_is_a_chain() -> None:
    fake = FakeProvider(responder=_summarizer)
    res = await summarize_incremental(TEXT, Model(fake), IncrementalConfig(chunk_tokens=10))
    dag = res.dag
    assert _stage_counts(dag) == {1: 8, **{k: 1 for k in range(2, 10)}}
    assert dag.terminal == "summary-8"
    assert dag.sources("summary-1") == ("chunk-1",)
    for k in range(2, 9):
        assert dag.sources(f"summary-{k}") == (f"summary-{k - 1}", f"chunk-{k}")
        assert dag.stage(f"chunk-{k}") == 1 and dag.stage(f"summary-{k}") == k + 1
    # The second call sees the first summary as "summary so far".
    assert "Summary<A>" in fake.calls[1].prompt and "nothing yet" in fake.calls[0].prompt


async def test_map_reduce_qa_drops_irrelevant_chunks() -> None:
    docs = [
        "Alice founded the lab in 1990. " * 3,
        "The weather was mild.",
        "Bob joined the lab in 1995.",
    ]

    def responder(messages: Sequence[Message]) -> str:
        u = _user(messages)
        if "Partial answers" in u:
            return "Alice founded the lab in 1990 and Bob joined in 1995."
        if "Alice" in u:
            return "Alice founded the lab in 1990."
        if "Bob" in u:
            return "Bob joined the lab in 1995."
        return NO_INFO

    fake = FakeProvider(responder=responder)
    res = await answer_map_reduce(
        "Who is in the lab?", docs, Model(fake), QAConfig(chunk_tokens=2048)
    )
    dag = res.dag
    assert _stage_counts(dag) == {1: 2, 2: 2, 3: 1}
    assert dag.terminal == "final-answer"
    assert set(dag.sources("final-answer")) == {"answer-doc-1-chunk-1", "answer-doc-3-chunk-1"}
    assert "doc-2-chunk-1" not in dag and dag.meta["irrelevant_chunks"] == 1
    assert dag.meta["question"] == "Who is in the lab?" and res.lm_calls == 4


async def test_map_reduce_qa_reduces_in_groups_when_answers_do_not_fit() -> None:
    docs = [f"Fact {i} is true." for i in range(6)]
    fake = FakeProvider(responder=lambda m: "A partial answer that is about forty chars.")
    res = await answer_map_reduce("Q?", docs, Model(fake), QAConfig(context_tokens=25))
    # 6 map answers (11 tokens each) → 3 group reductions → 1 final answer.
    assert _stage_counts(res.dag) == {1: 6, 2: 6, 3: 3, 4: 1}
    assert res.dag.terminal == "final-answer"


async def test_map_reduce_qa_keeps_sources_when_nothing_is_relevant() -> None:
    fake = FakeProvider(
        responder=lambda m: "The documents do not say." if "Partial" in _user(m) else NO_INFO
    )
    res = await answer_map_reduce("Q?", ["a b c.", "d e f."], Model(fake))
    assert _stage_counts(res.dag) == {1: 2, 2: 2, 3: 1}


@given(
    st.lists(
        st.sampled_from([*SENTENCES, "Short.", "A much longer sentence " * 8 + "ends."]),
        max_size=30,
    ),
    st.integers(1, 80),
)
def test_chunks_keep_every_sentence_in_order(sentences: list[str], limit: int) -> None:
    text = " ".join(sentences)
    chunks = chunk_text(text, limit)
    assert [s for c in chunks for s in split_sentences(c)] == split_sentences(text)
    for c in chunks:
        assert estimate_tokens(c) <= limit + len(split_sentences(c)) or len(split_sentences(c)) == 1


@given(st.lists(st.text(min_size=1, max_size=200), max_size=40), st.integers(1, 100))
def test_groups_cover_in_order_and_make_progress(texts: list[str], budget: int) -> None:
    groups = group_to_fit(texts, budget)
    assert [i for g in groups for i in g] == list(range(len(texts)))
    if len(texts) >= 2:
        assert all(len(g) >= 2 for g in groups)


def test_cli_pipeline_commands_against_a_loopback_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from veritrail.cli.main import cli
    from veritrail.testing.fake_openai_server import FakeOpenAIServer

    book = tmp_path / "book.txt"
    book.write_text(TEXT, encoding="utf-8")
    out = tmp_path / "dag.json"
    with FakeOpenAIServer(responder=lambda req: "Someone walked to the mill.") as server:
        monkeypatch.setenv("VERITRAIL_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        monkeypatch.setenv("VERITRAIL_CACHE", "0")
        common = ["--out", str(out), "--model", "openai/test-model", "--chunk-tokens", "30"]
        r = CliRunner().invoke(cli, ["pipeline", "summarize", str(book), *common])
        assert r.exit_code == 0, r.output
        dag = load_dag(out)
        assert len(dag.roots) == len(chunk_text(TEXT, 30)) >= 2
        assert dag.meta["pipeline"] == "hierarchical_summarization"
        r = CliRunner().invoke(cli, ["pipeline", "incremental", str(book), *common])
        assert r.exit_code == 0, r.output
        assert load_dag(out).terminal == f"summary-{len(chunk_text(TEXT, 30))}"
        r = CliRunner().invoke(cli, ["pipeline", "qa", "--question", "Who?", str(book), *common])
        assert r.exit_code == 0, r.output
        assert load_dag(out).terminal == "final-answer"
    r = CliRunner().invoke(
        cli, ["pipeline", "summarize", str(book), "--out", str(out), "--chunk-tokens", "0"]
    )
    assert r.exit_code == 2 and "chunk_tokens" in r.output


@pytest.mark.embedded
@pytest.mark.slow
async def test_hierarchical_with_the_embedded_model_end_to_end() -> None:
    registry = pytest.importorskip("veritrail.lm.registry")
    novella = (
        Path(__file__).resolve().parents[3]
        / "shared"
        / "data"
        / "graphrag"
        / "operation_dulce"
        / "Operation Dulce v2 1 1.md"
    )
    if not novella.is_file():
        pytest.skip("shared data not present")
    # A dozen sentences in three small chunks: four short calls (minutes on a loaded 2-core box).
    text = " ".join(split_sentences(novella.read_text(encoding="utf-8"))[3:15])
    model = registry.get_model("local/smollm2-135m", threads=2)
    try:
        res = await summarize_hierarchical(
            text,
            model,
            HierarchicalConfig(
                chunk_tokens=120, context_tokens=200, summary_words=40, max_output_tokens=40
            ),
        )
    finally:
        await model.aclose()
    dag = res.dag
    assert len(dag.roots) == len(chunk_text(text, 120)) >= 2
    assert dag.stage(dag.terminal) == max(n.stage for n in dag) >= 3
    assert res.output.strip() and all(n.text.strip() for n in dag)
