"""Hierarchical summarization (BooookScore-style), recording its DAG.

1. The text is cut into chunks of at most `chunk_tokens` (whole sentences): the roots.
2. Each chunk is summarized on its own (stage 2).
3. Consecutive summaries are merged in groups that fit `context_tokens`, level after level,
   until one summary remains: the terminal node. A text that fits in one chunk gives one
   summary, which is then the terminal.

Stages are the merge levels: chunk 1, chunk summaries 2, first merge 3, and so on (a summary
carried into a later merge keeps its own stage).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from ..fencing import fence
from ..lm.model import Model
from ..method.prompting import load_prompt
from ..method.tokens import estimate_tokens
from ._common import PipelineError, PipelineResult, call, chunk_text, group_to_fit
from .recorder import NodeRef, Recorder


@dataclass(frozen=True, slots=True)
class HierarchicalConfig:
    """Settings of `summarize_hierarchical` (BooookScore used 2,048-token chunks)."""

    chunk_tokens: int = 2048
    context_tokens: int = 8192
    """Token budget for the summaries merged in one call (the prompt adds its instructions)."""
    summary_words: int = 300
    max_output_tokens: int | None = 600
    max_parallel: int = 4
    title: str | None = None
    """Shown to the model with each chunk, when given."""

    def __post_init__(self) -> None:
        if self.chunk_tokens < 1 or self.context_tokens < 1 or self.summary_words < 1:
            raise ValueError("chunk_tokens, context_tokens and summary_words must be >= 1")
        if self.max_parallel < 1:
            raise ValueError("max_parallel must be >= 1")


async def summarize_hierarchical(
    text: str,
    model: Model,
    config: HierarchicalConfig | None = None,
    *,
    recorder: Recorder | None = None,
) -> PipelineResult:
    """Summarize `text` hierarchically with `model`; returns the summary and the DAG."""
    cfg = config or HierarchicalConfig()
    chunks = chunk_text(text, cfg.chunk_tokens)
    if not chunks:
        raise PipelineError("the text is empty")
    rec = recorder or Recorder()
    rec.meta.update(
        {
            "pipeline": "hierarchical_summarization",
            "model": model.name,
            "chunk_tokens": cfg.chunk_tokens,
            "context_tokens": cfg.context_tokens,
        }
    )
    sem = asyncio.Semaphore(cfg.max_parallel)
    calls = 0
    roots = [rec.source(c, id=f"chunk-{i + 1}") for i, c in enumerate(chunks)]
    chunk_prompt = load_prompt("pipeline_summarize_chunk")
    merge_prompt = load_prompt("pipeline_summarize_merge")
    context = fence(cfg.title, "title") + "\n\n" if cfg.title else ""

    async def summarize(i: int, chunk: NodeRef) -> NodeRef:
        nonlocal calls
        msgs = chunk_prompt.render(
            max_words=str(cfg.summary_words),
            context=context,
            passage=fence(chunk.text, f"passage {i + 1}"),
        )
        async with sem:
            out = await call(model, msgs, "summarize_chunk", cfg.max_output_tokens)
            calls += 1
        return rec.step("summarize_chunk", [chunk], out, id=f"summary-0-{i + 1}")

    level_nodes = list(await asyncio.gather(*(summarize(i, c) for i, c in enumerate(roots))))
    level = 0
    over_budget = 0
    while len(level_nodes) > 1:
        level += 1
        groups = group_to_fit([n.text for n in level_nodes], cfg.context_tokens)
        over_budget += sum(
            1
            for g in groups
            if sum(estimate_tokens(level_nodes[i].text) for i in g) > cfg.context_tokens
        )

        async def merge(j: int, members: list[NodeRef], lvl: int = level) -> NodeRef:
            nonlocal calls
            parts = "\n\n".join(fence(m.text, f"part {k + 1}") for k, m in enumerate(members))
            msgs = merge_prompt.render(max_words=str(cfg.summary_words), summaries=parts)
            async with sem:
                out = await call(model, msgs, "merge_summaries", cfg.max_output_tokens)
                calls += 1
            return rec.step("merge_summaries", members, out, id=f"summary-{lvl}-{j + 1}")

        level_nodes = list(
            await asyncio.gather(
                *(merge(j, [level_nodes[i] for i in g]) for j, g in enumerate(groups))
            )
        )
    final = level_nodes[0]
    rec.meta.update({"levels": level + 1, "over_budget_groups": over_budget})
    dag = rec.dag(terminal=final)
    return PipelineResult(final.text, dag, calls)
