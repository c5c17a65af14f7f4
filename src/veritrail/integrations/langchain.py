"""`DagCallbackHandler`: record the generation DAG of a LangChain run as it happens.

    from veritrail.integrations.langchain import DagCallbackHandler

    handler = DagCallbackHandler()
    chain.invoke(inputs, config={"callbacks": [handler]})
    handler.save("dag.json")

The handler records chains (inputs and outputs), chat/LLM calls (every prompt message and the
generations), retrievers (documents) and tools (outputs) as spans, then builds the DAG with the
rules of ``veritrail from-trace`` (docs/adapters.md, "Traces"). Prompt templates (LangChain's
``run_type="prompt"``) are recorded as prompt spans, which never give roots, as OpenInference's
tracer marks them. Needs ``pip install 'veritrail[langchain]'`` (langchain-core).

A run that raised (its top-level chain reported an error) or has not finished has no answer,
and the DAG built from it would end at whatever generation came last: `result()`, `dag()` and
`save()` raise `FailedRunError` (a `TraceError`) naming the run and its error. Pass
``allow_failed=True`` to get that partial DAG anyway: ``dag.meta["failed_run"]`` records the
run, its error and the terminal it ended at, and `result().unmatched` says so first. A step that
raised inside a run that still finished (a fallback, a retried tool) is only noted in
`unmatched`. `save(path)` writes the file `path` (``.jsonl``: JSON Lines); a directory, or a
file that cannot be written, raises `DagSaveError` (an `OSError`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

try:
    from langchain_core.callbacks import BaseCallbackHandler
    from langchain_core.documents import Document
    from langchain_core.messages import BaseMessage
    from langchain_core.outputs import LLMResult
    from langchain_core.prompt_values import PromptValue
except ImportError as exc:  # pragma: no cover - depends on the install
    raise ImportError(
        "veritrail.integrations.langchain needs langchain-core: pip install 'veritrail[langchain]'"
    ) from exc

from ..adapters.trace.build import MatchSettings
from ..adapters.trace.model import Kind, text_leaves
from ._collector import DagSaveError, FailedRunError, RecordedRuns, SpanCollector


def _plain(value: Any) -> Any:
    """LangChain objects as plain JSON-like data (only what can hold pipeline text)."""
    if isinstance(value, BaseMessage):
        return {"role": value.type, "content": value.content}
    if isinstance(value, Document):
        return {"page_content": value.page_content}
    if isinstance(value, PromptValue):
        return [_plain(m) for m in value.to_messages()]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return None  # other objects carry no text we can trust to be pipeline text


def _message_texts(msg: BaseMessage) -> list[str]:
    # Every message of a prompt counts, system ones too (a RAG prompt's context often sits there).
    return list(text_leaves(msg.content, parse_json=False))


def _name(serialized: dict[str, Any] | None, kwargs: dict[str, Any], default: str) -> str:
    name = kwargs.get("name")
    if isinstance(name, str) and name:
        return name
    if serialized:
        if isinstance(serialized.get("name"), str):
            return str(serialized["name"])
        ids = serialized.get("id")
        if isinstance(ids, list) and ids:
            return str(ids[-1])
    return default


class DagCallbackHandler(RecordedRuns, BaseCallbackHandler):
    """A langchain-core callback handler that records the run's generation DAG.

    Pass it in ``config={"callbacks": [handler]}`` (or to a model/chain constructor); then
    `dag()`, `save(path)` or `result()` (the DAG with the `--explain` details). Each top-level
    run is its own trace; with several, pass ``trace_id=str(run_id)`` of the one you want, or
    call `reset()` between runs. Thread-safe.
    """

    raise_error = True

    def __init__(self, *, settings: MatchSettings | None = None) -> None:
        super().__init__()
        self._c = SpanCollector(
            settings=settings,
            source="langchain",
            how_to_record='pass it to the run, e.g. chain.invoke(x, config={"callbacks": [handler]})',
        )

    # -- chains ---------------------------------------------------------------------------------

    def on_chain_start(
        self,
        serialized: dict[str, Any],
        inputs: dict[str, Any],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """A chain (or prompt template, parser, lambda) started."""
        kind = Kind.PROMPT if kwargs.get("run_type") == "prompt" else Kind.CHAIN
        self._c.start(
            str(run_id),
            str(parent_run_id) if parent_run_id else None,
            _name(serialized, kwargs, "chain"),
            kind,
            text_leaves(_plain(inputs)),
        )

    def on_chain_end(
        self,
        outputs: dict[str, Any],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        """A chain finished."""
        self._c.end(str(run_id), text_leaves(_plain(outputs)))

    def on_chain_error(
        self,
        error: BaseException,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        """A chain failed: closed with no output, the error kept (a top-level chain that
        failed makes `result()` raise `FailedRunError`)."""
        self._c.end(str(run_id), error=error)

    # -- models ---------------------------------------------------------------------------------

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """A chat model call started: its prompt messages are the generation's input."""
        texts = [t for batch in messages for m in batch for t in _message_texts(m)]
        self._c.start(
            str(run_id),
            str(parent_run_id) if parent_run_id else None,
            _name(serialized, kwargs, "chat_model"),
            Kind.LLM,
            texts,
        )

    def on_llm_start(
        self,
        serialized: dict[str, Any],
        prompts: list[str],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """A completion model call started."""
        self._c.start(
            str(run_id),
            str(parent_run_id) if parent_run_id else None,
            _name(serialized, kwargs, "llm"),
            Kind.LLM,
            prompts,
        )

    def on_llm_end(
        self,
        response: LLMResult,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        """A model call finished: its generations are the node text."""
        self._c.end(str(run_id), [g.text for batch in response.generations for g in batch])

    def on_llm_error(
        self,
        error: BaseException,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        """A model call failed: closed with no output (no node), the error kept."""
        self._c.end(str(run_id), error=error)

    # -- retrievers and tools -------------------------------------------------------------------

    def on_retriever_start(
        self,
        serialized: dict[str, Any],
        query: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """A retriever started."""
        self._c.start(
            str(run_id),
            str(parent_run_id) if parent_run_id else None,
            _name(serialized, kwargs, "retriever"),
            Kind.RETRIEVER,
            [query],
        )

    def on_retriever_end(
        self,
        documents: Sequence[Document],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        """A retriever finished: its documents are roots."""
        self._c.end(str(run_id), documents=[d.page_content for d in documents])

    def on_retriever_error(
        self,
        error: BaseException,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        """A retriever failed: closed with no documents, the error kept."""
        self._c.end(str(run_id), error=error)

    def on_tool_start(
        self,
        serialized: dict[str, Any],
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        inputs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """A tool started."""
        self._c.start(
            str(run_id),
            str(parent_run_id) if parent_run_id else None,
            _name(serialized, kwargs, "tool"),
            Kind.TOOL,
            text_leaves(_plain(inputs) if inputs is not None else input_str),
        )

    def on_tool_end(
        self,
        output: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        """A tool finished: its output is a root."""
        self._c.end(str(run_id), text_leaves(_plain(output), parse_json=False))

    def on_tool_error(
        self,
        error: BaseException,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        """A tool failed: closed with no output, the error kept."""
        self._c.end(str(run_id), error=error)

    # -- results --------------------------------------------------------------------------------

    def reset(self) -> None:
        """Forget every recorded run."""
        self._c.reset()


__all__ = ["DagCallbackHandler", "DagSaveError", "FailedRunError"]
