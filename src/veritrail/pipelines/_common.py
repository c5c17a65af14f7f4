"""Helpers shared by the reference pipelines: chunking, grouping, one recorded model call."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..dag import Dag
from ..errors import VeritrailError
from ..lm.base import GenerateConfig, Message
from ..lm.model import Model
from ..method.segment import split_sentences
from ..method.tokens import estimate_tokens


class PipelineError(VeritrailError, RuntimeError):
    """A pipeline could not produce a valid DAG (empty input, an empty model reply, …)."""


@dataclass(frozen=True, slots=True)
class PipelineResult:
    """A finished pipeline run: its final output and the recorded, validated DAG."""

    output: str
    dag: Dag
    lm_calls: int


def chunk_text(text: str, chunk_tokens: int) -> list[str]:
    """Cut `text` into consecutive chunks of at most `chunk_tokens` estimated tokens.

    Chunks end at sentence boundaries (`veritrail.method.segment.split_sentences`), so every chunk is
    made of whole sentences; a single sentence longer than the limit becomes a chunk of its own.
    """
    if chunk_tokens < 1:
        raise ValueError("chunk_tokens must be >= 1")
    chunks: list[str] = []
    cur: list[str] = []
    used = 0
    for s in split_sentences(text):
        t = estimate_tokens(s) + 1
        if cur and used + t > chunk_tokens:
            chunks.append(" ".join(cur))
            cur, used = [], 0
        cur.append(s)
        used += t
    if cur:
        chunks.append(" ".join(cur))
    return chunks


def group_to_fit(texts: Sequence[str], budget_tokens: int) -> list[list[int]]:
    """Consecutive groups of indices whose texts fit `budget_tokens` together.

    Every group has at least two members when there are two or more texts, even if two do not
    fit, so that merging always makes progress (the caller's limit is then exceeded, never
    ignored silently: `PipelineResult.dag.meta` records it as ``over_budget_groups``). A lone last
    text joins the previous group.
    """
    groups: list[list[int]] = []
    cur: list[int] = []
    used = 0
    for i, t in enumerate(texts):
        n = estimate_tokens(t)
        if len(cur) >= 2 and used + n > budget_tokens:
            groups.append(cur)
            cur, used = [], 0
        cur.append(i)
        used += n
    if cur:
        if len(cur) == 1 and groups:
            groups[-1].extend(cur)
        else:
            groups.append(cur)
    return groups


async def call(model: Model, messages: list[Message], step: str, max_tokens: int | None) -> str:
    """One model call whose reply is a node text; an empty reply is a `PipelineError`."""
    gen = await model.generate(messages, GenerateConfig(max_tokens=max_tokens), step=step)
    text = gen.text.strip()
    if not text:
        raise PipelineError(f"the model returned an empty reply in step {step!r}")
    return text
