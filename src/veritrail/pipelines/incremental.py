"""Incremental summarization (a chain), recording its DAG.

The text is cut into chunks (the roots); the summary is updated chunk by chunk: summary *k* is
written from summary *k-1* and chunk *k*. The DAG is a chain of summaries, each also fed by its
chunk; the last summary is the terminal node. Stage of summary *k* is *k + 1*.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..fencing import fence
from ..lm.model import Model
from ..method.prompting import load_prompt
from ._common import PipelineError, PipelineResult, call, chunk_text
from .recorder import NodeRef, Recorder


@dataclass(frozen=True, slots=True)
class IncrementalConfig:
    """Settings of `summarize_incremental`."""

    chunk_tokens: int = 2048
    summary_words: int = 300
    max_output_tokens: int | None = 600

    def __post_init__(self) -> None:
        if self.chunk_tokens < 1 or self.summary_words < 1:
            raise ValueError("chunk_tokens and summary_words must be >= 1")


async def summarize_incremental(
    text: str,
    model: Model,
    config: IncrementalConfig | None = None,
    *,
    recorder: Recorder | None = None,
) -> PipelineResult:
    """Summarize `text` incrementally with `model`; returns the summary and the DAG."""
    cfg = config or IncrementalConfig()
    chunks = chunk_text(text, cfg.chunk_tokens)
    if not chunks:
        raise PipelineError("the text is empty")
    rec = recorder or Recorder()
    rec.meta.update(
        {
            "pipeline": "incremental_summarization",
            "model": model.name,
            "chunk_tokens": cfg.chunk_tokens,
        }
    )
    prompt = load_prompt("pipeline_summarize_incremental")
    summary: NodeRef | None = None
    for i, chunk in enumerate(chunks):
        src = rec.source(chunk, id=f"chunk-{i + 1}")
        msgs = prompt.render(
            max_words=str(cfg.summary_words),
            summary=fence(summary.text, "summary so far")
            if summary
            else "(nothing yet: this is the first passage)",
            passage=fence(chunk, f"passage {i + 1}"),
        )
        out = await call(model, msgs, "update_summary", cfg.max_output_tokens)
        inputs = [summary, src] if summary else [src]
        summary = rec.step("update_summary", inputs, out, id=f"summary-{i + 1}")
    assert summary is not None
    return PipelineResult(summary.text, rec.dag(terminal=summary), len(chunks))
