"""Every ```python block of README.md and docs/*.md runs.

Each block runs on its own (a fresh namespace) in a temporary directory holding a copy of
`examples/`, with every model pointed at the loopback server (`loopback_model`: deterministic
answers by word overlap, no key, no network). A block with top-level `await` (written as in a
notebook) runs inside an event loop.

A block that uses names the reader supplies says so on its first line, `# needs: model, text
(...)`; the test supplies each from `PRELUDE` below (a model on the loopback server, a short
text, a LangChain chain with its fake chat model, ...), so the snippet runs as printed. A name
the test does not know is a failure, not a skip.

A block that cannot run here says so on a line containing `doctest: skip` and why: only blocks
that need a real external service or package that is not a dependency, or that are not complete
Python; such blocks are still compiled when they are complete Python.
"""

from __future__ import annotations

import ast
import asyncio
import importlib.util
import inspect
import re
import shutil
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from loopback_model import loopback

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SKIP = "doctest: skip"
_FENCE = re.compile(r"^```python[^\n]*\n(.*?)^```", re.M | re.S)
_NEEDS = re.compile(r"^# needs: ([\w.]+(?:, [\w.]+)*)", re.M)

# The skips left, each needing something this machine does not have (counted so that a new
# skip is a decision, not an accident).
EXPECTED_SKIPS = {
    "docs/adapters.md": 2,  # GraphRAG: not a dependency, and an index built by its own LLM calls
    "docs/plugins.md": 2,  # a download of NLI weights; an outline of the step protocols
    "docs/sirg.md": 1,  # SmolLM2 (~25 s to load) and a classifier trained by `sirg train`
}


def _blocks() -> list[tuple[str, str]]:
    out = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for m in _FENCE.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            out.append((f"{doc.relative_to(ROOT)}:{line}", m.group(1)))
    return out


BLOCKS = _blocks()


# -- what the snippets' readers supply ----------------------------------------------------------


@dataclass
class Prelude:
    """The directory a snippet runs in and what must be closed after it (in its event loop)."""

    cwd: Path
    closers: list[Callable[[], Coroutine[Any, Any, None]]] = field(default_factory=list)


TEXT = "The Harbour Museum opened in 1921. It was founded by Marta Reyes. It has a roof garden."
DOCUMENTS = [
    "The Harbour Museum opened in 1921. It was founded by Marta Reyes.",
    "The museum shows ship models. Its cafe is on the ground floor.",
]


def _model(p: Prelude) -> Any:
    from veritrail.lm.registry import get_model

    model = get_model("openai/loopback")  # VERITRAIL_BASE_URL: the loopback server
    p.closers.append(model.aclose)
    return model


def _claim(p: Prelude) -> Any:
    from veritrail.records import Claim

    return Claim("c1", "The Harbour Museum opened in 1921.")


def _example_module(p: Prelude) -> Any:
    """examples/trace_import_example.py: its LangChain map-reduce and documents."""
    spec = importlib.util.spec_from_file_location(
        "trace_import_example", p.cwd / "examples" / "trace_import_example.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _exporter(p: Prelude) -> Any:
    """An OpenTelemetry in-memory exporter holding the example chain's run, traced by
    OpenInference (as examples/trace_import_example.py does)."""
    from openinference.instrumentation.langchain import LangChainInstrumentor
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    ex = _example_module(p)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    LangChainInstrumentor().instrument(tracer_provider=provider)
    try:
        ex.chain().invoke(ex.DOCS, config={"max_concurrency": 1})
    finally:
        LangChainInstrumentor().uninstrument()
    return exporter


def _trace_file(p: Prelude) -> None:
    """trace.json in the working directory: that run as OTLP JSON."""
    from google.protobuf.json_format import MessageToJson
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    spans = _exporter(p).get_finished_spans()
    (p.cwd / "trace.json").write_text(MessageToJson(encode_spans(spans)), encoding="utf-8")


def _query_engine(p: Prelude) -> Any:
    """A LlamaIndex query engine with its MockLLM (no global Settings changed)."""
    from llama_index.core import Document, SummaryIndex
    from llama_index.core.llms import MockLLM

    index = SummaryIndex.from_documents([Document(text=d) for d in DOCUMENTS])
    return index.as_query_engine(llm=MockLLM(), response_mode="refine")


def _my_model(p: Prelude) -> Callable[[str], str]:
    return lambda text: text.split(". ")[0].rstrip(".") + "."


def _my_async_model(p: Prelude) -> Callable[[str], Awaitable[str]]:
    sync = _my_model(p)

    async def call(text: str) -> str:
        return sync(text)

    return call


PRELUDE: dict[str, Callable[[Prelude], Any]] = {
    "model": _model,
    "text": lambda p: TEXT,
    "claim": _claim,
    "dag_or_documents": lambda p: list(DOCUMENTS),
    "trace.json": _trace_file,
    "exporter": _exporter,
    "chain": lambda p: _example_module(p).chain(),
    "docs": lambda p: list(_example_module(p).DOCS),
    "query_engine": _query_engine,
    "report_1": lambda p: DOCUMENTS[0],
    "report_2": lambda p: DOCUMENTS[1],
    "my_model": _my_model,
    "my_async_model": _my_async_model,
}
"""Name (or file, with a dot) a snippet's `# needs:` line asks for -> how to make it. Files are
written into the snippet's working directory; names are put in its namespace."""


def _needs(code: str) -> list[str]:
    m = _NEEDS.search(code)
    return m.group(1).split(", ") if m else []


# -- the tests ----------------------------------------------------------------------------------


def test_the_docs_have_runnable_snippets() -> None:
    runnable = [where for where, code in BLOCKS if SKIP not in code]
    assert sum(w.startswith("docs/api.md") for w in runnable) >= 6
    assert any(w.startswith("README.md") for w in runnable)
    skipped: dict[str, int] = {}
    for where, code in BLOCKS:
        if SKIP in code:
            doc = where.split(":")[0]
            skipped[doc] = skipped.get(doc, 0) + 1
    assert skipped == EXPECTED_SKIPS


def test_every_needed_name_has_a_prelude() -> None:
    unknown = {w: n for w, code in BLOCKS for n in _needs(code) if n not in PRELUDE}
    assert not unknown


@pytest.mark.parametrize(("where", "code"), BLOCKS, ids=[w for w, _ in BLOCKS])
def test_snippet_runs(
    where: str, code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    try:
        _run_snippet(where, code, tmp_path, monkeypatch)
    except ModuleNotFoundError as exc:
        # A snippet of an extra's feature where that extra is not installed
        # (scripts/test-fast.sh): skipped here, a failure in the full suite (tests/conftest.py).
        pytest.skip(f"{where}: could not import {exc.name!r}")


def _run_snippet(where: str, code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    if SKIP in code:
        reason = next(line for line in code.splitlines() if SKIP in line)
        if "`...`" not in reason:  # a fragment with `...` for the reader's arguments says so
            compile(code, where, "exec", flags=flags)
        pytest.skip(f"{where}: {reason.strip()}")
    compiled = compile(code, where, "exec", flags=flags)
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    ns: dict[str, Any] = {"__name__": "__snippet__"}
    prelude = Prelude(tmp_path)
    with loopback(monkeypatch):
        for name in _needs(code):
            value = PRELUDE[name](prelude)
            if "." not in name:
                ns[name] = value
        if compiled.co_flags & inspect.CO_COROUTINE:

            async def run() -> None:
                try:
                    await eval(compiled, ns)
                finally:
                    for close in prelude.closers:
                        await close()

            asyncio.run(run())
        else:
            try:
                exec(compiled, ns)
            finally:
                for close in prelude.closers:
                    asyncio.run(close())
