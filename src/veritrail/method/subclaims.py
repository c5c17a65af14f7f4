"""Sub-claim decomposition (docs/method.md#sub-claims): a work queue over a one-call decomposer.

Sub-claims are context for evidence selection only; they are never verified on their own. The same
decomposition prompt serves claim extraction's decomposition stage (`decompose_text`).
"""

from __future__ import annotations

import asyncio
import functools
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ..fencing import fence, looks_like_fence_line, normalize_line_breaks
from ..lm.model import Model
from ..records import Claim, SelectionIssue, Step
from .prompting import load_prompt
from .sharing import (
    ALONE_NOTE,
    CONCISE_MAX_CLAIMS,
    Coalescer,
    claim_entry_schema,
    claim_label,
    current_sharing,
    entries_by_claim,
    honours_overrides,
)
from .steps import Decomposer, Decomposition, unreadable_issues
from .tokens import estimate_tokens

_DECOMPOSE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"parts": {"type": "array", "items": {"type": "string"}}},
    "required": ["parts"],
    "additionalProperties": False,
}


class DecompositionError(RuntimeError):
    """The decomposition reply could not be read (raw reply and every try's error attached)."""

    def __init__(self, message: str, raw: str, unreadable: Sequence[str] = ()):
        super().__init__(message)
        self.raw = raw
        self.unreadable = tuple(unreadable)


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().rstrip(".").lower()


# The labels of the decomposition prompt's fences (`decompose_text_parts`), whose marker lines
# a small model may echo back as parts (`_unfenced`).
_STATEMENT, _CONTEXT = "statement", "context"
# (A shared prompt's statements are fenced as "statement c2": the claim id goes with the label.)
_FENCE_ECHO = re.compile(
    rf"(<<<|>>>\s*end)\s*({_STATEMENT}|{_CONTEXT})\b(\s+c\d+\b)?", re.IGNORECASE
)


def _unfenced(part: str) -> str:
    """`part` without the fence lines a model copied from its prompt.

    Small models echo the prompt's framing as parts: ``["<<< statement", "with Bill
    McGlaughlin", ">>> end statement"]`` (12 of 66 decomposition replies of the embedded model on
    the WiCE slice). A fence line is never part of a statement, so such lines are dropped, and
    a part reduced to nothing is no part; left in, "<<< statement" became a sub-claim that every
    verdict had to hold.
    """
    kept = []
    for line in normalize_line_breaks(part).split("\n"):
        # The markers of this prompt's fences, also when a whole statement was echoed on one
        # line: "<<< statement of the program >>> end statement".
        line = _FENCE_ECHO.sub(" ", line).strip()
        if line and not looks_like_fence_line(line):
            kept.append(line)
    return " ".join(kept)


def _parts(value: Any) -> list[str]:
    if isinstance(value, dict):
        value = value.get("parts")
    if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
        raise ValueError('expected {"parts": [strings]}')
    return [u for u in (_unfenced(p) for p in value) if u]


async def decompose_text(model: Model, text: str, context: str = "") -> list[str]:
    """One decomposition call: the parts of `text`, using `context` only to resolve references.

    Raises `DecompositionError` when the reply cannot be read after the model layer's re-asks.
    """
    return list((await decompose_text_parts(model, text, context)).parts)


async def decompose_text_parts(model: Model, text: str, context: str = "") -> Decomposition:
    """`decompose_text`, with the unreadable replies met before a readable one."""
    prompt = load_prompt("decompose")
    block = (
        f"Context (for resolving references only):\n{fence(context, _CONTEXT)}\n\n"
        if context.strip()
        else ""
    )
    messages = prompt.render(context_block=block, statement=fence(text, _STATEMENT))
    res = await model.generate_json(
        messages, schema=_DECOMPOSE_SCHEMA, step=Step.DECOMPOSITION, validate=_parts
    )
    if res.value is None:
        raise DecompositionError(
            f"unreadable decomposition reply: {res.error}", res.raw, res.unreadable
        )
    return Decomposition(tuple(res.value), res.unreadable)


def _shared_schema(n: int) -> dict[str, Any]:
    return claim_entry_schema(n, _DECOMPOSE_SCHEMA["properties"], _DECOMPOSE_SCHEMA["required"])


# One object per size: the model layer remembers per schema object whether strict mode takes it.
_SHARED_SCHEMAS: dict[int, dict[str, Any]] = {}


def shared_decompose_schema(n: int) -> dict[str, Any]:
    """The reply schema of a shared decomposition prompt of `n` statements."""
    got = _SHARED_SCHEMAS.get(n)
    if got is None:
        got = _SHARED_SCHEMAS[n] = _shared_schema(n)
    return got


_Ask = tuple[Claim, str]
_Answer = Decomposition | DecompositionError


class LMDecomposer:
    """The default decomposer: `decompose_text` through a model; when the run shares prompts
    (`sharing`), the statements of several claims that are decomposed at about the same time go
    in one prompt (the instructions once, the statements last)."""

    def __init__(self, model: Model) -> None:
        self.model = model
        self.shared_prompts: Coalescer[_Ask, _Answer] = Coalescer(self._decompose_group)

    async def decompose(self, claim: Claim, text: str) -> Decomposition:
        """Parts of `text` (one call), with any unreadable replies met on the way."""
        sharing = current_sharing()
        if not sharing.on or not honours_overrides("decompose", "decompose_shared"):
            return await decompose_text_parts(self.model, text)
        if getattr(self.model, "concise_replies", False):
            sharing = replace(sharing, max_claims=min(sharing.max_claims, CONCISE_MAX_CLAIMS))
        # Every decomposition shares the instructions: one queue.
        got = await self.shared_prompts.submit(
            "decompose", (claim, text), estimate_tokens(text), sharing
        )
        if isinstance(got, DecompositionError):
            raise got
        return got

    async def _alone(self, text: str) -> _Answer:
        try:
            return await decompose_text_parts(self.model, text)
        except DecompositionError as exc:
            return exc

    async def _decompose_group(self, asks: Sequence[_Ask]) -> list[_Answer]:
        """One prompt for the statements of `asks`. A statement the reply leaves out, or whose
        entry cannot be read, is decomposed alone (`decompose_text_parts`)."""
        if len(asks) == 1:
            return [await self._alone(asks[0][1])]
        n = len(asks)
        statements = "\n\n".join(
            fence(text, f"{_STATEMENT} {claim_label(k)}") for k, (_, text) in enumerate(asks)
        )
        messages = load_prompt("decompose_shared").render(statements=statements)
        res = await self.model.generate_json(
            messages,
            schema=shared_decompose_schema(n),
            step=Step.DECOMPOSITION,
            validate=functools.partial(entries_by_claim, n=n),
        )
        out: list[_Answer | None] = [None] * n
        for k, entry in (res.value or {}).items():
            try:
                parts = _parts(entry)
            except ValueError:
                continue
            out[k] = Decomposition(tuple(parts), res.unreadable)
        alone = [k for k in range(n) if out[k] is None]
        if alone:
            again = await asyncio.gather(*(self._alone(asks[k][1]) for k in alone))
            for k, got in zip(alone, again, strict=True):
                notes = (*res.unreadable, ALONE_NOTE, *got.unreadable)
                out[k] = (
                    DecompositionError(str(got), got.raw, notes)
                    if isinstance(got, DecompositionError)
                    else Decomposition(got.parts, notes)
                )
        return [o for o in out if o is not None]


async def decompose_claim(
    decomposer: Decomposer,
    claim: Claim,
    max_calls: int = 20,
    *,
    issues: list[SelectionIssue] | None = None,
) -> tuple[str, ...]:
    """Run the work queue: items that split are pushed back; single parts are final.

    Items already processed (case/space-insensitive) are skipped; at most `max_calls` calls are made,
    after which items still queued are kept as they are. Unreadable replies (from a decomposer
    that returns a `Decomposition`, or attached to a `DecompositionError`) are appended to
    `issues` as `unparseable_reply` issues, in call order.
    """
    queue: list[str] = [claim.text]
    seen: set[str] = set()
    final: dict[str, str] = {}
    calls = 0
    while queue and calls < max_calls:
        item = queue.pop(0)
        key = _norm(item)
        if key in seen:
            continue
        seen.add(key)
        try:
            got = await decomposer.decompose(claim, item)
        except DecompositionError as exc:
            if issues is not None:
                issues.extend(unreadable_issues(Step.DECOMPOSITION, exc.unreadable))
            raise
        if isinstance(got, Decomposition):
            if issues is not None:
                issues.extend(unreadable_issues(Step.DECOMPOSITION, got.unreadable))
            got = got.parts
        parts = list(dict.fromkeys(p for p in got if p.strip()))
        calls += 1
        if len(parts) <= 1:
            final.setdefault(key, parts[0] if parts else item)
        else:
            queue.extend(p for p in parts if _norm(p) not in seen)
    for item in queue:
        final.setdefault(_norm(item), item)
    return tuple(final.values())


def format_subclaims(subclaims: Sequence[str]) -> str:
    """Sub-claims as a numbered list for prompts."""
    return "\n".join(f"{i}. {s}" for i, s in enumerate(subclaims, 1)) or "(none)"


def claim_parts(text: str, subclaims: Sequence[str]) -> tuple[str, str | None]:
    """A claim and its sub-claims for `render_claims`: no sub-claims block when the only
    sub-claim is the claim itself (a claim of one assertion), which would repeat it word for word."""
    if [s.strip() for s in subclaims] == [text.strip()]:
        return text, None
    return text, format_subclaims(subclaims)
