"""`GuardRunnable`: a LangChain runnable that lets an answer through only once it is verified
against its sources within a latency budget (`veritrail.aguard`, docs/api.md "Guarding answers
while serving").

    import veritrail as vt
    from veritrail.integrations.langchain_guard import GuardRunnable

    guarded = chain | GuardRunnable(vt.aguard, sources=docs, budget_ms=1500, model="openai/gpt-4o-mini")
    guarded.invoke({"question": "..."})     # the answer, or GuardBlocked raised

The guard function is handed in (`vt.aguard`) rather than imported: this module sits below the
run layer (docs/architecture.md) and needs only its call. Input: the answer (a `str` or a
message, what a chain ends with; sources from `sources=`), or a dict `{"answer": ...,
"sources": ...}` (optionally `"question"`, `"claims"`), e.g. from a `RunnableParallel` of the
chain and its retriever. Sources: a text, a list of texts or of LangChain `Document`s, or a dict
`{name: text}`. Output: the answer as it came (the `str` or the message) when it is allowed;
`GuardBlocked` (a `veritrail.VeritrailError`, its `result` the decision) when it is not, so a
chain's `with_fallbacks(..., exceptions_to_handle=(vt.GuardBlocked,))` can answer otherwise.
`on_result` is told every decision (an unverified answer that passed, for one).

Streamed (`stream`/`astream` of a chain ending in the runnable): under ``on_timeout="pass"`` the
chunks pass through as they come and the answer is verified after the last one (`GuardBlocked`
raised then if it is not allowed); under "block" the chunks are held until it is verified and
given only if it is allowed. Needs ``pip install 'veritrail[langchain]'`` (langchain-core).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from typing import Any

try:
    from langchain_core.documents import Document
    from langchain_core.messages import BaseMessage
    from langchain_core.runnables import Runnable, RunnableConfig
except ImportError as exc:  # pragma: no cover - depends on the install
    raise ImportError(
        "veritrail.integrations.langchain_guard needs langchain-core: "
        "pip install 'veritrail[langchain]'"
    ) from exc

GuardFn = Callable[..., Awaitable[Any]]
"""`veritrail.aguard`: `(answer, sources, *, raise_blocked, **settings) -> GuardResult`."""


def _text(value: Any) -> str:
    """The text of an answer or a chunk: a str, or a message's text content."""
    if isinstance(value, str):
        return value
    if isinstance(value, BaseMessage):
        content = value.content
        if isinstance(content, str):
            return content
        return "".join(
            p if isinstance(p, str) else str(p.get("text", "")) if isinstance(p, dict) else ""
            for p in content
        )
    raise TypeError(
        "GuardRunnable takes an answer (a str or a message) or a dict with 'answer' and "
        f"'sources', not {type(value).__name__}"
    )


def _sources(value: Any) -> Any:
    """Sources as the guard takes them: `Document`s become `{name: text}`, named by their
    `metadata["source"]` (made unique) or `doc1`, `doc2`, ... by position."""
    if isinstance(value, Document):
        value = [value]
    if isinstance(value, Sequence) and not isinstance(value, str) and value:
        if all(isinstance(d, Document) for d in value):
            named: dict[str, str] = {}
            for i, d in enumerate(value, 1):
                base = str(d.metadata.get("source") or f"doc{i}")
                name, k = base, 2
                while name in named:
                    name, k = f"{base}~{k}", k + 1
                named[name] = d.page_content
            return named
        return list(value)
    return value


class GuardRunnable(Runnable[Any, Any]):
    """A runnable guarding an answer with `guard` (`veritrail.aguard`); see the module
    docstring. `sources` is used when the input does not carry its own; `on_result` is called
    with each `GuardResult`; every other keyword goes to `guard` (`budget_ms`, `on_timeout`,
    `model`, `base_url`, `claims_per_prompt`, ...)."""

    def __init__(
        self,
        guard: GuardFn,
        *,
        sources: Any = None,
        on_result: Callable[[Any], None] | None = None,
        **settings: Any,
    ) -> None:
        if not callable(guard):
            raise TypeError("GuardRunnable(guard): pass veritrail.aguard")
        self.guard = guard
        self.sources = sources
        self.on_result = on_result
        self.settings = settings

    @property
    def _hold(self) -> bool:
        return bool(self.settings.get("on_timeout", "pass") == "block")

    def _split(self, value: Any) -> tuple[str, Any, dict[str, Any]]:
        extra: dict[str, Any] = {}
        if isinstance(value, Mapping):
            if "answer" not in value:
                raise TypeError("GuardRunnable: a dict input needs an 'answer' key")
            for key in ("question", "claims"):
                if value.get(key) is not None:
                    extra[key] = value[key]
            sources = value.get("sources", self.sources)
            value = value["answer"]
        else:
            sources = self.sources
        if sources is None:
            raise TypeError("GuardRunnable: no sources (give sources= or an input 'sources' key)")
        return _text(value), _sources(sources), extra

    async def _check(self, answer: str, sources: Any, extra: Mapping[str, Any]) -> None:
        try:
            result = await self.guard(
                answer, sources, raise_blocked=True, **{**self.settings, **extra}
            )
        except Exception as exc:
            result = getattr(exc, "result", None)
            if result is not None and self.on_result is not None:
                self.on_result(result)
            raise
        if self.on_result is not None:
            self.on_result(result)

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        answer, sources, extra = self._split(input)
        await self._check(answer, sources, extra)
        return input["answer"] if isinstance(input, Mapping) else input

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        return _blocking(self.ainvoke(input, config))

    async def atransform(
        self, input: AsyncIterator[Any], config: RunnableConfig | None = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        held: list[Any] = []
        async for chunk in input:
            held.append(chunk)
            if not self._hold and not isinstance(chunk, Mapping):
                yield chunk
        async for out in self._finish(held):
            yield out

    async def _finish(self, held: list[Any]) -> AsyncIterator[Any]:
        if len(held) == 1 and isinstance(held[0], Mapping):  # a dict input is not streamed
            yield await self.ainvoke(held[0])
            return
        await self._check("".join(_text(c) for c in held), _sources(self.sources), {})
        if self._hold:
            for chunk in held:
                yield chunk

    def transform(
        self, input: Iterator[Any], config: RunnableConfig | None = None, **kwargs: Any
    ) -> Iterator[Any]:
        held: list[Any] = []
        for chunk in input:
            held.append(chunk)
            if not self._hold and not isinstance(chunk, Mapping):
                yield chunk

        async def finish() -> list[Any]:
            return [c async for c in self._finish(held)]

        yield from _blocking(finish())

    def stream(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Iterator[Any]:
        yield from self.transform(iter([input]), config)

    async def astream(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        async def one() -> AsyncIterator[Any]:
            yield input

        async for out in self.atransform(one(), config):
            yield out


def _blocking(coro: Awaitable[Any]) -> Any:
    """Run `coro` to its end from sync code: its own event loop, or a worker thread's where one
    is running already (as `veritrail.guard` does)."""

    async def run() -> Any:
        return await coro

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(run())
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="veritrail-guard") as pool:
        return pool.submit(asyncio.run, run()).result()


__all__ = ["GuardRunnable"]
