"""The live handlers' contracts (issue 29, item 9), with the real frameworks and their own fake
models (langchain-core's FakeListChatModel; llama-index's MockLLM and MockEmbedding):

* a run that raised gives no DAG by default: `result()`, `dag()` and `save()` raise
  `FailedRunError` naming the run and its error; `allow_failed=True` gives the partial DAG,
  flagged in `meta["failed_run"]` and first in `unmatched`;
* a step that raised inside a run that still finished (a fallback) is only noted;
* errors speak of the handler (`trace_id=`), never of "the file" or `--trace-id`;
* `save()` to a directory is a `VeritrailError`, not an `IsADirectoryError` from deep inside.

The failures are raised by ordinary user code inside the pipeline (a step of a chain, a step of
a Workflow, a custom query engine), as a pipeline bug would."""

# No `from __future__ import annotations`: llama-index-core's @step reads the step's annotations
# as types at class creation.
import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import Runnable, RunnableLambda
from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.llms import MockLLM
from llama_index.core.schema import QueryBundle
from llama_index.core.tools import FunctionTool
from llama_index.core.workflow import StartEvent, StopEvent, Workflow, step

from veritrail.adapters.trace import TraceError
from veritrail.dag import load_dag
from veritrail.errors import InputProblem, VeritrailError
from veritrail.integrations.langchain import DagCallbackHandler, DagSaveError, FailedRunError
from veritrail.integrations.llamaindex import DagEventHandler
from veritrail.integrations.llamaindex import DagSaveError as LiSaveError
from veritrail.integrations.llamaindex import FailedRunError as LiFailedRunError

DOC = "The Alder bridge opened in 1921. It carried trams across the Wend river."
SUMMARY = "The Alder bridge opened in 1921 and carried trams."
FINAL = "The Alder bridge, opened in 1921, carried trams over the Wend."
SECRET = "sk-" + "a1b2c3d4e5" * 4


def _chain(last: Runnable[Any, str]) -> Runnable[Any, str]:
    """Summarise (the fake model's first answer), then `last` on the summary."""
    llm = FakeListChatModel(responses=[SUMMARY, FINAL])
    prompt = ChatPromptTemplate.from_messages([("human", "Summarise:\n{doc}")])
    return prompt | llm | StrOutputParser() | last


def _broken(text: str) -> str:
    raise ValueError(f"post-processing failed (key {SECRET})")


def _failed_langchain_run() -> DagCallbackHandler:
    handler = DagCallbackHandler()
    with pytest.raises(ValueError, match="post-processing failed"):
        _chain(RunnableLambda(_broken)).invoke({"doc": DOC}, config={"callbacks": [handler]})
    return handler


def test_langchain_run_that_raised_is_an_error_by_default(tmp_path: Path) -> None:
    handler = _failed_langchain_run()
    top = next(s for s in handler.spans() if s.parent_id is None)
    for call in (handler.result, handler.dag, lambda: handler.save(tmp_path / "dag.json")):
        with pytest.raises(FailedRunError) as exc:
            call()
        err = exc.value
        assert isinstance(err, TraceError) and isinstance(err, InputProblem)
        assert isinstance(err, VeritrailError) and err.exit_code == 2
        msg = str(err)
        assert top.trace_id in msg and top.name in msg
        assert "raised ValueError: post-processing failed" in msg
        assert "allow_failed=True" in msg
        assert SECRET not in msg  # the error's text passes through redaction
        assert (err.trace_id, err.span_name) == (top.trace_id, top.name)
        assert err.error.startswith("ValueError: post-processing failed")
    assert not (tmp_path / "dag.json").exists()  # nothing written for a failed run


def test_langchain_failed_run_on_request_gives_the_partial_dag_flagged(tmp_path: Path) -> None:
    handler = _failed_langchain_run()
    res = handler.result(allow_failed=True)
    dag = res.dag
    # The partial DAG ends at the intermediate summary, and says so.
    assert dag.node(dag.terminal).text == SUMMARY
    flag = dag.meta["failed_run"]
    assert flag["terminal"] == dag.terminal and flag["name"] == "RunnableSequence"
    assert flag["error"].startswith("ValueError: post-processing failed")
    assert SECRET not in json.dumps(flag)
    first = res.unmatched[0]
    assert "the run raised ValueError" in first.note and "intermediate output" in first.note
    assert any(
        n.name == "_broken" and n.note.startswith("raised ValueError") for n in res.unmatched
    )
    saved = handler.save(tmp_path / "partial.json", allow_failed=True)
    assert load_dag(tmp_path / "partial.json").meta["failed_run"] == saved.meta["failed_run"]


def test_langchain_step_that_raised_inside_a_finished_run_is_only_noted() -> None:
    handler = DagCallbackHandler()
    recovered = RunnableLambda(_broken).with_fallbacks([RunnableLambda(lambda s: s)])
    assert _chain(recovered).invoke({"doc": DOC}, config={"callbacks": [handler]}) == SUMMARY
    res = handler.result()  # the run finished: no error
    assert "failed_run" not in res.dag.meta
    assert res.dag.node(res.dag.terminal).text == SUMMARY
    notes = [n for n in res.unmatched if n.note.startswith("raised ValueError")]
    assert [n.name for n in notes] == ["_broken"]


def test_langchain_messages_speak_of_the_handler_not_the_cli() -> None:
    handler = DagCallbackHandler()
    with pytest.raises(TraceError) as nothing:
        handler.dag()
    assert "recorded nothing" in str(nothing.value) and '"callbacks": [handler]' in str(
        nothing.value
    )
    for _ in range(2):
        _chain(RunnableLambda(lambda s: s)).invoke({"doc": DOC}, config={"callbacks": [handler]})
    with pytest.raises(TraceError) as two:
        handler.dag()
    with pytest.raises(TraceError) as unknown:
        handler.dag(trace_id="no-such-run")
    for exc in (nothing, two, unknown):
        msg = str(exc.value)
        assert "--trace-id" not in msg and "the file" not in msg, msg
    assert "trace_id=" in str(two.value) and "reset()" in str(two.value)
    assert "no recorded run has trace_id 'no-such-run'" in str(unknown.value)


def test_save_to_a_directory_is_a_clear_error(tmp_path: Path) -> None:
    handler = DagCallbackHandler()
    _chain(RunnableLambda(lambda s: s)).invoke({"doc": DOC}, config={"callbacks": [handler]})
    with pytest.raises(DagSaveError) as exc:
        handler.save(tmp_path)
    err = exc.value
    assert isinstance(err, VeritrailError) and isinstance(err, OSError) and err.exit_code == 2
    assert not isinstance(err, IsADirectoryError)
    assert str(err) == (
        f"cannot save the DAG to {tmp_path}: it is a directory; give the file to write, "
        f"e.g. {tmp_path / 'dag.json'}"
    )
    with pytest.raises(DagSaveError, match=r"cannot save the DAG to .*missing"):
        handler.save(tmp_path / "missing" / "dag.json")
    assert list(tmp_path.iterdir()) == []
    handler.save(tmp_path / "dag.json")
    assert load_dag(tmp_path / "dag.json").node(handler.dag().terminal).text == SUMMARY


# -- LlamaIndex ---------------------------------------------------------------------------------

QUESTION = "What should we do in Oslo tonight?"
WEATHER = "In Oslo it will rain all evening, with a strong wind from the west."


def get_weather(city: str) -> str:
    """The evening's weather in a city."""
    return WEATHER


class CrashingPlanner(Workflow):
    """Calls the weather tool and MockLLM, then the step's own code fails."""

    @step
    async def plan(self, ev: StartEvent) -> StopEvent:
        report = FunctionTool.from_defaults(get_weather).call(city="Oslo").content
        await MockLLM().acomplete(f"Question: {ev.get('question')}\nWeather report: {report}")
        raise RuntimeError("planner crashed")


class CrashingEngine(BaseQueryEngine):
    """A query engine written on LlamaIndex's base class (whose `query` sends the query events)
    that fails after its LLM call."""

    def __init__(self) -> None:
        super().__init__(callback_manager=None)

    def _get_prompt_modules(self) -> dict[str, Any]:
        return {}

    def _query(self, query_bundle: QueryBundle) -> Any:
        MockLLM().complete(f"Question: {query_bundle.query_str}\nWeather report: {WEATHER}")
        raise RuntimeError("engine crashed")

    async def _aquery(self, query_bundle: QueryBundle) -> Any:
        return self._query(query_bundle)


def test_llamaindex_workflow_that_raised_is_an_error_by_default(tmp_path: Path) -> None:
    handler = DagEventHandler().attach()
    try:

        async def go() -> Any:
            return await CrashingPlanner(timeout=60).run(question=QUESTION)

        with pytest.raises(RuntimeError, match="planner crashed"):
            asyncio.run(go())
    finally:
        handler.detach()
    with pytest.raises(LiFailedRunError) as exc:
        handler.save(tmp_path / "dag.json")
    msg = str(exc.value)
    assert "(CrashingPlanner) raised RuntimeError: planner crashed" in msg
    assert "allow_failed=True" in msg and "--trace-id" not in msg
    assert not (tmp_path / "dag.json").exists()
    res = handler.result(allow_failed=True)
    assert res.dag.meta["failed_run"]["name"] == "CrashingPlanner"
    assert res.dag.meta["failed_run"]["error"] == "RuntimeError: planner crashed"
    assert "the run raised RuntimeError: planner crashed" in res.unmatched[0].note
    # The partial DAG's terminal is the model's intermediate output, not an answer.
    assert res.dag.node(res.dag.terminal).text.startswith("Question: " + QUESTION)


def test_llamaindex_query_that_raised_without_the_span_handler_has_not_finished() -> None:
    """Added as an event handler alone, the handler sees no error: the query that raised never
    ended, and a run that has not finished is refused the same way."""
    handler = DagEventHandler()
    get_dispatcher().add_event_handler(handler)
    try:
        with pytest.raises(RuntimeError, match="engine crashed"):
            CrashingEngine().query(QUESTION)
    finally:
        handler.detach()
    with pytest.raises(LiFailedRunError, match=r"\(query\) has not finished"):
        handler.dag()
    dag = handler.dag(allow_failed=True)
    assert dag.meta["failed_run"]["error"] == "had not finished when the DAG was built"


def test_llamaindex_query_that_raised_with_the_span_handler_names_the_error(
    tmp_path: Path,
) -> None:
    handler = DagEventHandler().attach()
    try:
        with pytest.raises(RuntimeError, match="engine crashed"):
            CrashingEngine().query(QUESTION)
    finally:
        handler.detach()
    with pytest.raises(LiFailedRunError, match=r"\(query\) raised RuntimeError: engine crashed"):
        handler.result()
    with pytest.raises(LiSaveError, match="it is a directory"):
        handler.save(tmp_path, allow_failed=True)
    with pytest.raises(TraceError) as exc:
        DagEventHandler().dag()
    assert "handler.attach()" in str(exc.value) and "the file" not in str(exc.value)
