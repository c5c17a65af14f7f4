"""Map-reduce question answering over documents, recording its DAG.

1. Each document is cut into chunks of at most `chunk_tokens` (the roots, ids ``doc-D-chunk-C``).
2. *Map*: one call per chunk writes what the chunk says about the question (stage 2). Chunks
   with nothing relevant (the model replies with the marker ``NO RELEVANT INFORMATION``) are left
   out of the reduce and so out of the DAG; ``meta["irrelevant_chunks"]`` counts them. If no
   chunk is relevant, every map answer goes into the reduce, so the "not found" answer keeps its
   sources.
3. *Reduce*: the map answers are combined into the final answer (the terminal). When they do
   not fit `context_tokens` together they are reduced in groups first, level by level, as in
   hierarchical summarization.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from ..fencing import fence
from ..lm.model import Model
from ..method.prompting import load_prompt
from ..method.tokens import estimate_tokens
from ._common import PipelineError, PipelineResult, call, chunk_text, group_to_fit
from .recorder import NodeRef, Recorder

NO_INFO = "NO RELEVANT INFORMATION"


@dataclass(frozen=True, slots=True)
class QAConfig:
    """Settings of `answer_map_reduce`."""

    chunk_tokens: int = 2048
    context_tokens: int = 8192
    max_output_tokens: int | None = 600
    max_parallel: int = 4

    def __post_init__(self) -> None:
        if self.chunk_tokens < 1 or self.context_tokens < 1 or self.max_parallel < 1:
            raise ValueError("chunk_tokens, context_tokens and max_parallel must be >= 1")


def _no_info(text: str) -> bool:
    return text.strip().strip(".").upper().startswith(NO_INFO)


async def answer_map_reduce(
    question: str,
    documents: Sequence[str],
    model: Model,
    config: QAConfig | None = None,
    *,
    recorder: Recorder | None = None,
) -> PipelineResult:
    """Answer `question` over `documents` with `model`; returns the answer and the DAG."""
    cfg = config or QAConfig()
    if not question.strip():
        raise PipelineError("the question is empty")
    rec = recorder or Recorder()
    rec.meta.update({"pipeline": "map_reduce_qa", "model": model.name, "question": question})
    roots: list[NodeRef] = []
    for d, doc in enumerate(documents):
        for c, chunk in enumerate(chunk_text(doc, cfg.chunk_tokens)):
            roots.append(rec.source(chunk, id=f"doc-{d + 1}-chunk-{c + 1}"))
    if not roots:
        raise PipelineError("the documents are empty")
    sem = asyncio.Semaphore(cfg.max_parallel)
    map_prompt = load_prompt("pipeline_qa_map")
    reduce_prompt = load_prompt("pipeline_qa_reduce")
    q = fence(question, "question")
    calls = 0

    async def map_one(root: NodeRef) -> tuple[NodeRef, str]:
        nonlocal calls
        msgs = map_prompt.render(question=q, document=fence(root.text, "document"))
        async with sem:
            out = await call(model, msgs, "qa_map", cfg.max_output_tokens)
            calls += 1
        return root, out

    mapped = await asyncio.gather(*(map_one(r) for r in roots))
    relevant = [(r, out) for r, out in mapped if not _no_info(out)]
    rec.meta["irrelevant_chunks"] = len(mapped) - len(relevant)
    use = relevant or list(mapped)
    answers = [rec.step("qa_map", [r], out, id=f"answer-{r.id}") for r, out in use]

    level = 0
    while True:
        level += 1
        groups = (
            [list(range(len(answers)))]
            if sum(estimate_tokens(a.text) for a in answers) <= cfg.context_tokens
            or len(answers) < 3
            else group_to_fit([a.text for a in answers], cfg.context_tokens)
        )

        async def reduce(
            j: int, members: list[NodeRef], lvl: int = level, last: bool = len(groups) == 1
        ) -> NodeRef:
            nonlocal calls
            parts = "\n\n".join(
                fence(m.text, f"partial answer {k + 1}") for k, m in enumerate(members)
            )
            msgs = reduce_prompt.render(question=q, answers=parts)
            async with sem:
                out = await call(model, msgs, "qa_reduce", cfg.max_output_tokens)
                calls += 1
            return rec.step(
                "qa_reduce", members, out, id="final-answer" if last else f"reduce-{lvl}-{j + 1}"
            )

        answers = list(
            await asyncio.gather(
                *(reduce(j, [answers[i] for i in g]) for j, g in enumerate(groups))
            )
        )
        if len(answers) == 1:
            break
    final = answers[0]
    # Chunks judged irrelevant fed nothing into the answer: prune them, or they would be sinks.
    return PipelineResult(final.text, rec.dag(terminal=final, prune=True), calls)
