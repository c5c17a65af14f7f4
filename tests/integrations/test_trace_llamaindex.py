"""A LlamaIndex query over documents with its MockLLM and MockEmbedding, recorded live by
`DagEventHandler` (refine mode: one LLM call per retrieved document, each refining the last
answer). MockLLM echoes its prompt, so each answer contains the previous one: the document
inside that earlier answer must not get a second, direct edge. No network."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from llama_index.core import Document, Settings, VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.llms import MockLLM

from veritrail.dag import load_dag
from veritrail.integrations.llamaindex import DagEventHandler

DOCS = [
    "Apples grow on trees in orchards.",
    "Bees make honey from nectar.",
    "Rivers flow to the sea.",
]
QUESTION = "What grows on trees?"


@pytest.fixture
def handler() -> Iterator[DagEventHandler]:
    h = DagEventHandler()
    dispatcher = get_dispatcher()
    dispatcher.add_event_handler(h)
    old_llm, old_embed = Settings._llm, Settings._embed_model
    Settings.llm = MockLLM()
    Settings.embed_model = MockEmbedding(embed_dim=8)
    try:
        yield h
    finally:
        dispatcher.event_handlers.remove(h)
        Settings._llm, Settings._embed_model = old_llm, old_embed


def test_query_engine_refine_gives_a_chain_dag(handler: DagEventHandler, tmp_path: Path) -> None:
    index = VectorStoreIndex.from_documents([Document(text=d) for d in DOCS])
    engine = index.as_query_engine(similarity_top_k=3, response_mode="refine")
    response = engine.query(QUESTION)

    dag = handler.save(tmp_path / "dag.json")
    assert load_dag(tmp_path / "dag.json").terminal == dag.terminal
    assert dag.node(dag.terminal).text == str(response).strip()
    roots = {dag.node(r).text for r in dag.roots}
    assert roots == {QUESTION, *DOCS}
    gens = sorted((n for n in dag if not dag.is_root(n.id)), key=lambda n: n.stage)
    assert [g.stage for g in gens] == [2, 3, 4]
    for prev, g in zip([None, *gens[:-1]], gens, strict=True):
        src = {dag.node(s).text for s in g.sources}
        # the question, exactly one new document, and the previous answer (not its documents)
        assert QUESTION in src
        docs_here = src & set(DOCS)
        assert len(docs_here) == 1
        if prev is not None:
            assert prev.text in src
    res = handler.result()
    assert not res.ambiguous
    assert res.dag.meta["trace_format"] == "llamaindex"
