"""From (context, query, response) to token relevance and fragment scores, teacher-forced.

The prompt is our own: the context and the request go into one user message, rendered with the
model's chat template when it has one (a plain ``Context: / Request: / Response:`` layout
otherwise), and the response is appended as the assistant's turn. The response is therefore
**teacher-forced**: we attribute the given text, not a sample from the model. The paper
attributes the generator's own outputs; on responses written by someone else the relevance shows
how the white-box model would have produced them.

An ``Analysis`` holds everything later steps need (fragments with their token positions, the
relevance rows of the substantive response tokens, the fragment score matrix), so graphs,
classifier training and baselines never need the LM again; ``cache.AnalysisCache`` stores them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

import numpy as np

from .attribution import Method, relevance_rows
from .fragments import (
    FragmentKind,
    TokenizedFragment,
    fragment_scores,
    place_fragments,
    split_fragments,
    target_positions,
)

DEFAULT_QUERY = "Write a response that is faithful to the context."
PROMPT_VERSION = 1


class Section(enum.IntEnum):
    """What each prompt token belongs to (stored per token for coarse features)."""

    TEMPLATE = 0
    CONTEXT = 1
    QUERY = 2
    RESPONSE = 3


@dataclass(frozen=True)
class Example:
    """One RAG instance: the retrieved context, the user's request and the response to check."""

    context: str
    response: str
    query: str = DEFAULT_QUERY


@dataclass(frozen=True)
class Prompt:
    """The full teacher-forced sequence with where each section starts (character offsets)."""

    text: str
    context_start: int
    query_start: int
    response_start: int
    input_ids: tuple[int, ...]
    offsets: tuple[tuple[int, int], ...]


def build_prompt(tokenizer: Any, example: Example) -> Prompt:
    """Render the prompt and tokenize prompt + response once, with character offsets."""
    user = f"Context:\n{example.context}\n\nRequest: {example.query}"
    if getattr(tokenizer, "chat_template", None):
        head = tokenizer.apply_chat_template(
            [{"role": "user", "content": user}], tokenize=False, add_generation_prompt=True
        )
    else:
        head = f"{user}\n\nResponse: "
    base = head.find(user)
    if base < 0:
        raise ValueError("the chat template altered the user message; cannot locate the context")
    context_start = base + len("Context:\n")
    query_start = base + user.rindex(example.query)
    text = head + example.response
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    return Prompt(
        text=text,
        context_start=context_start,
        query_start=query_start,
        response_start=len(head),
        input_ids=tuple(int(i) for i in enc["input_ids"]),
        offsets=tuple((int(a), int(b)) for a, b in enc["offset_mapping"]),
    )


def token_sections(prompt: Prompt, example: Example) -> np.ndarray:
    """Section label per token (a token belongs to the section that contains its start)."""
    spans = [
        (prompt.context_start, prompt.context_start + len(example.context), Section.CONTEXT),
        (prompt.query_start, prompt.query_start + len(example.query), Section.QUERY),
        (prompt.response_start, len(prompt.text), Section.RESPONSE),
    ]
    out = np.zeros(len(prompt.input_ids), dtype=np.int8)
    for i, (a, b) in enumerate(prompt.offsets):
        for s, e, sec in spans:
            if b > a and s <= a < e:
                out[i] = int(sec)
    return out


@dataclass(frozen=True)
class Analysis:
    """Attribution results for one example (see module doc)."""

    model: str
    method: Method
    input_ids: tuple[int, ...]
    sections: np.ndarray
    nodes: tuple[TokenizedFragment, ...]
    targets: tuple[int, ...]
    rows: np.ndarray
    scores: np.ndarray

    @property
    def kinds(self) -> list[FragmentKind]:
        """Fragment kinds in node order."""
        return [n.fragment.kind for n in self.nodes]

    @property
    def texts(self) -> list[str]:
        """Fragment texts in node order."""
        return [n.fragment.text for n in self.nodes]

    def response_node_ids(self) -> list[int]:
        """Node ids of the response fragments."""
        return [i for i, k in enumerate(self.kinds) if k is FragmentKind.RESPONSE]

    def with_rows(self, rows: np.ndarray, method: Method | None = None) -> Analysis:
        """The same fragments with other relevance rows (scores recomputed): used for the
        random-attribution baseline."""
        if rows.shape != self.rows.shape:
            raise ValueError(f"rows of shape {rows.shape}, expected {self.rows.shape}")
        return Analysis(
            model=self.model,
            method=method or self.method,
            input_ids=self.input_ids,
            sections=self.sections,
            nodes=self.nodes,
            targets=self.targets,
            rows=rows,
            scores=fragment_scores(self.nodes, rows, self.targets),
        )


def plan(tokenizer: Any, example: Example) -> tuple[Prompt, list[TokenizedFragment]]:
    """Prompt and fragments placed on its tokens, in prompt order (context, query, response)."""
    prompt = build_prompt(tokenizer, example)
    nodes = [
        *place_fragments(
            split_fragments(example.context, FragmentKind.CONTEXT),
            prompt.context_start,
            prompt.offsets,
        ),
        *place_fragments(
            split_fragments(example.query, FragmentKind.QUERY), prompt.query_start, prompt.offsets
        ),
        *place_fragments(
            split_fragments(example.response, FragmentKind.RESPONSE),
            prompt.response_start,
            prompt.offsets,
        ),
    ]
    return prompt, [n for n in nodes if n.tokens]


def analyse(
    lm_model: Any,
    tokenizer: Any,
    example: Example,
    *,
    model_name: str,
    method: Method = Method.ATTNLRP,
    max_targets_per_fragment: int | None = None,
    threads: int | None = None,
) -> Analysis:
    """Run attribution for the substantive response tokens and aggregate to fragments."""
    prompt, nodes = plan(tokenizer, example)
    response = [n for n in nodes if n.fragment.kind is FragmentKind.RESPONSE]
    if not response:
        raise ValueError("the response has no text to attribute")
    targets = target_positions(response, max_per_fragment=max_targets_per_fragment)
    rows = relevance_rows(lm_model, prompt.input_ids, targets, method=method, threads=threads)
    return Analysis(
        model=model_name,
        method=method,
        input_ids=prompt.input_ids,
        sections=token_sections(prompt, example),
        nodes=tuple(nodes),
        targets=tuple(targets),
        rows=rows,
        scores=fragment_scores(nodes, rows, targets),
    )


def random_rows(analysis: Analysis, seed: int) -> np.ndarray:
    """Random relevance with the same causal support as ``analysis.rows`` (baseline)."""
    rng = np.random.default_rng(seed)
    out = np.zeros_like(analysis.rows)
    for r, t in enumerate(analysis.targets):
        out[r, :t] = rng.standard_normal(t).astype(out.dtype)
    return out


def coarse_features(analysis: Analysis) -> np.ndarray:
    """LRP4RAG-style response-level features from the token rows, ignoring fragments.

    Per target row: max and mean relevance over context tokens, the share of positive relevance
    on context, query and response tokens. Returned: the mean and max of each over the rows
    (10 numbers). The rows here cover the substantive response tokens only (LRP4RAG uses all).
    """
    feats = []
    for r, t in enumerate(analysis.targets):
        row = analysis.rows[r, :t].astype(np.float64)
        sec = analysis.sections[:t]
        ctx = row[sec == Section.CONTEXT]
        pos = np.clip(row, 0, None)
        total = pos.sum() or 1.0
        feats.append(
            [
                ctx.max() if ctx.size else 0.0,
                ctx.mean() if ctx.size else 0.0,
                pos[sec == Section.CONTEXT].sum() / total,
                pos[sec == Section.QUERY].sum() / total,
                pos[sec == Section.RESPONSE].sum() / total,
            ]
        )
    if not feats:
        return np.zeros(10)
    f = np.asarray(feats)
    return np.concatenate([f.mean(axis=0), f.max(axis=0)])
