"""G2LDetect itself: the tree request, one check per root-to-leaf path, AND over the paths.

`build_tree` asks for the tree of a text (`g2l_tree` prompt, `TREE_SCHEMA`), `check_path` checks
one path against the reference chunks in order (`g2l_check` prompt, `CHECK_SCHEMA`), `aggregate`
is the AND rule; `g2l_detect` runs the three on a text and its references, and `g2l_claim` on one
claim (its text against documents or a DAG's roots), in the verifier's vocabulary.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...dag import Dag
from ...fencing import fence
from ...lm.base import GenerateConfig
from ...lm.model import Model
from ...method.prompting import load_prompt
from ...records import Claim, Verdict
from .records import G2LClaimOutcome, G2LConfig, G2LResult, G2LStatus, PathCheck, TreeOutcome
from .references import (
    Reference,
    as_references,
    chunk_references,
    references_from_dag,
    render_chunk,
)
from .tree import TREE_SCHEMA, parse_tree, tree_paths

TREE_STEP = "g2l_tree"
CHECK_STEP = "g2l_check"

CHECK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"reason": {"type": "string"}, "supported": {"type": "boolean"}},
    "required": ["reason", "supported"],
    "additionalProperties": False,
}


def render_path(nodes: Sequence[str]) -> str:
    """A path as numbered lines, general to specific, fenced as one statement."""
    lines = [f"{i}. {t}" for i, t in enumerate(nodes, 1)]
    return fence("\n".join(lines), "statement")


# -- model calls ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Check:
    supported: bool
    reason: str


def _read_check(value: Any) -> _Check:
    if not isinstance(value, Mapping):
        raise TypeError("expected a JSON object")
    sup = value.get("supported")
    if isinstance(sup, str) and sup.strip().lower() in ("true", "false"):
        sup = sup.strip().lower() == "true"
    if not isinstance(sup, bool):
        raise TypeError("'supported' must be true or false")
    reason = value.get("reason", "")
    return _Check(sup, reason.strip() if isinstance(reason, str) else "")


async def build_tree(model: Model, text: str, config: G2LConfig | None = None) -> TreeOutcome:
    """Ask for the tree of `text`, re-asking within the model's bound when it cannot be read."""
    cfg = config or G2LConfig()
    res = await model.generate_json(
        load_prompt("g2l_tree").render(text=fence(text, "text")),
        schema=TREE_SCHEMA,
        step=TREE_STEP,
        validate=lambda v: parse_tree(v, max_depth=cfg.max_depth, max_nodes=cfg.max_nodes),
        config=GenerateConfig(schema_name="g2l_tree", max_tokens=cfg.tree_max_tokens),
    )
    return TreeOutcome(res.value, res.attempts, res.error, res.raw)


async def check_path(
    model: Model,
    index: int,
    nodes: tuple[str, ...],
    chunks: Sequence[str],
    config: G2LConfig | None = None,
) -> PathCheck:
    """Check one path against the rendered reference chunks, in order, until one supports it.

    Supported as soon as a chunk supports it; unsupported when every chunk answered "no";
    undecided (None) when no chunk supported it and at least one reply could not be read.
    """
    cfg = config or G2LConfig()
    prompt = load_prompt("g2l_check")
    rendered = render_path(nodes)
    errors: list[str] = []
    raw = ""
    no_reason: tuple[int, str] | None = None
    for ci, chunk_text in enumerate(chunks):
        res = await model.generate_json(
            prompt.render(references=chunk_text, path=rendered),
            schema=CHECK_SCHEMA,
            step=CHECK_STEP,
            validate=_read_check,
            config=GenerateConfig(schema_name="g2l_check", max_tokens=cfg.check_max_tokens),
        )
        if res.value is None:
            errors.append(f"chunk {ci}: {res.error}")
            raw = res.raw
        elif res.value.supported:
            return PathCheck(index, nodes, True, res.value.reason, ci, ci + 1)
        elif no_reason is None:
            no_reason = (ci, res.value.reason)
    if not chunks:
        return PathCheck(index, nodes, None, "", None, 0, "no reference text to check against")
    chunk: int | None = no_reason[0] if no_reason else None
    reason = no_reason[1] if no_reason else ""
    if errors:
        return PathCheck(index, nodes, None, reason, chunk, len(chunks), "; ".join(errors), raw)
    return PathCheck(index, nodes, False, reason, chunk, len(chunks))


def aggregate(paths: Sequence[PathCheck]) -> G2LStatus:
    """AND over the paths: FAILED if any path is unsupported, else UNDETERMINED if any is unknown."""
    if any(p.supported is False for p in paths):
        return G2LStatus.FAILED
    if not paths or any(p.supported is None for p in paths):
        return G2LStatus.UNDETERMINED
    return G2LStatus.PASSED


async def g2l_detect(
    model: Model,
    text: str,
    references: Sequence[str | Reference],
    config: G2LConfig | None = None,
) -> G2LResult:
    """Run G2LDetect on `text` against `references` (plain strings or labelled `Reference`s)."""
    cfg = config or G2LConfig()
    refs = as_references(references)
    chunks = [render_chunk(c) for c in chunk_references(refs, cfg.reference_tokens)]
    built = await build_tree(model, text, cfg)
    if built.tree is None:
        return G2LResult(
            G2LStatus.TREE_FAILED,
            None,
            (),
            len(chunks),
            built.attempts,
            tree_error=built.error,
            tree_raw=built.raw,
        )
    paths = tree_paths(built.tree)
    sem = asyncio.Semaphore(cfg.max_parallel) if cfg.max_parallel else None

    async def one(i: int, nodes: tuple[str, ...]) -> PathCheck:
        if sem is None:
            return await check_path(model, i, nodes, chunks, cfg)
        async with sem:
            return await check_path(model, i, nodes, chunks, cfg)

    checks = await asyncio.gather(*(one(i, p) for i, p in enumerate(paths)))
    return G2LResult(aggregate(checks), built.tree, tuple(checks), len(chunks), built.attempts)


# -- per claim --------------------------------------------------------------------------------


def status_to_verdict(status: G2LStatus) -> Verdict | None:
    """PASSED → Fully Supported, FAILED → Not Fully Supported, anything else → None (no verdict)."""
    if status is G2LStatus.PASSED:
        return Verdict.FULLY_SUPPORTED
    if status is G2LStatus.FAILED:
        return Verdict.NOT_FULLY_SUPPORTED
    return None


async def g2l_claim(
    model: Model,
    claim: Claim,
    references: Sequence[str | Reference] | Dag,
    config: G2LConfig | None = None,
) -> G2LClaimOutcome:
    """Check one claim with G2LDetect: the claim text is the text to check.

    `references` are documents, or a DAG whose root nodes are used. The soft score is the share of
    supported paths (`G2LResult.score`).
    """
    refs = references_from_dag(references) if isinstance(references, Dag) else references
    result = await g2l_detect(model, claim.text, refs, config)
    return G2LClaimOutcome(claim, status_to_verdict(result.status), result.score, result)


__all__ = [
    "CHECK_SCHEMA",
    "CHECK_STEP",
    "TREE_STEP",
    "aggregate",
    "build_tree",
    "check_path",
    "g2l_claim",
    "g2l_detect",
    "render_path",
    "status_to_verdict",
]
