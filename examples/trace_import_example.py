"""Bring a pipeline as it already runs: the same LangChain map-reduce captured three ways.

    python examples/trace_import_example.py OUT_DIR

Needs `pip install 'veritrail[integrations-dev]'` (langchain-core, llama-index-core,
opentelemetry-sdk, openinference-instrumentation-langchain); no network and no API key: the
models are the frameworks' own fake models. Writes to OUT_DIR:

* trace.otlp.json: the run traced by OpenInference into OpenTelemetry, as OTLP JSON (the format
  the collector's file exporter writes) → dag-from-trace.json via `veritrail from-trace`;
* dag-langchain.json: the same run recorded live by `DagCallbackHandler`;
* dag-llamaindex.json: a LlamaIndex query (MockLLM) recorded by `DagEventHandler`.
"""

from __future__ import annotations

import sys
from pathlib import Path

from google.protobuf.json_format import MessageToJson
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from openinference.instrumentation.langchain import LangChainInstrumentor
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from veritrail.cli.main import main as veritrail
from veritrail.integrations.langchain import DagCallbackHandler

DOCS = [
    "The Alder bridge opened in 1921. It carried trams across the Wend river.",
    "The Wend river floods every spring. Farmers along its banks grow barley.",
    "Barley from the valley is malted in Corvin. The Corvin maltings employ forty people.",
    "Trams stopped running in 1962. Buses replaced them on the bridge.",
]
ANSWERS = [
    "The Alder bridge opened in 1921 and carried trams.",
    "The Wend river floods each spring; farmers grow barley.",
    "The Corvin maltings employ forty people.",
    "Buses replaced the trams in 1962.",
    "The Alder bridge opened in 1921. Buses replaced the trams in 1962.",
]


def chain():  # type: ignore[no-untyped-def]
    llm = FakeListChatModel(responses=ANSWERS)
    summarize = ChatPromptTemplate.from_messages([("human", "Summarise:\n{doc}")])
    combine = ChatPromptTemplate.from_messages([("human", "Combine:\n\n{summaries}")])
    per_doc = summarize | llm | StrOutputParser()
    return (
        ((lambda d: {"doc": d}) | per_doc).map()
        | (lambda ss: {"summaries": "\n\n".join(ss)})
        | combine
        | llm
        | StrOutputParser()
    )


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)

    # 1. Trace with OpenInference into OpenTelemetry, write OTLP JSON, import it.
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    LangChainInstrumentor().instrument(tracer_provider=provider)
    chain().invoke(DOCS, config={"max_concurrency": 1})
    LangChainInstrumentor().uninstrument()
    trace = out / "trace.otlp.json"
    trace.write_text(MessageToJson(encode_spans(exporter.get_finished_spans()), indent=None) + "\n")
    try:
        veritrail(
            ["from-trace", str(trace), "--out", str(out / "dag-from-trace.json"), "--explain"]
        )
    except SystemExit as exc:
        if exc.code:
            raise

    # 2. The same pipeline recorded live by the callback handler.
    handler = DagCallbackHandler()
    chain().invoke(DOCS, config={"max_concurrency": 1, "callbacks": [handler]})
    dag = handler.save(out / "dag-langchain.json")
    print(f"callback handler: {len(dag)} nodes, terminal {dag.terminal}")

    # 3. A LlamaIndex query with its mock LLM, recorded by the event handler.
    from llama_index.core import Document, Settings, SummaryIndex
    from llama_index.core.llms import MockLLM

    from veritrail.integrations.llamaindex import DagEventHandler

    li = DagEventHandler().attach()  # events and spans of the root dispatcher
    Settings.llm = MockLLM()
    engine = SummaryIndex.from_documents([Document(text=d) for d in DOCS]).as_query_engine(
        response_mode="refine"
    )
    engine.query("When did the Alder bridge open?")
    li.detach()
    dag = li.save(out / "dag-llamaindex.json")
    print(f"llamaindex handler: {len(dag)} nodes, {dag.edges} edges, terminal {dag.terminal}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python examples/trace_import_example.py OUT_DIR")
    main(Path(sys.argv[1]))
