"""G2LDetect, the global-to-local detector (SPEC §6; Cheng et al., AAAI 2025).

1. **Tree** (`g2l_tree` prompt, strict JSON schema): the model turns the text to check into a
   hierarchy — the central subject at the root, main topics as branches, specific facts as
   leaves. The reply is parsed leniently (`parse_tree` also reads nested-object and list shapes);
   an unreadable or out-of-bounds tree is re-asked by `Model.generate_json` within the model's
   re-ask bound and then recorded as `G2LStatus.TREE_FAILED`, never raised.
2. **Paths** (`tree_paths`): every root-to-leaf path is one local detail carrying its own
   context; there is exactly one path per leaf, so every leaf is covered.
3. **Check** (`g2l_check` prompt): each path is checked against the reference documents
   (`supported` true/false with a reason). References larger than `G2LConfig.reference_tokens`
   are split into chunks that fit (by sentence, as the verification loop batches nodes); a path
   is supported when **any** chunk supports it. Chunks are tried in order and the first support
   ends the path's checks. This errs toward "supported" only if one chunk alone backs the path;
   a path whose support is spread over two chunks can be missed (a false alarm), which is the
   price of fitting long references into a small context. When everything fits (the default for
   short references) the path is checked against all documents at once.
4. **AND aggregation** (`aggregate`): the text passes only if every path is supported. A path
   whose replies could not be read counts as unknown: any unsupported path makes the text fail;
   otherwise an unknown path makes it `UNDETERMINED`.

`g2l_detect` checks a text against documents; `g2l_claim` checks one claim against documents or a
DAG's roots; `G2LDetector` runs it behind the package's `Detector` protocol (`detectors.base`),
which `veritrail eval --method g2l` and `veritrail detect` use.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from ..dag import Dag
from ..fencing import fence
from ..lm.base import GenerateConfig
from ..lm.model import Model, claim_scope
from ..method.prompting import load_prompt
from ..method.segment import SentenceIndex, split_sentences
from ..method.tokens import estimate_tokens
from ..records import Claim, Verdict
from .base import Detection, claim_cost, error_text, root_ids

if TYPE_CHECKING:
    from ..eval.datasets import GoldClaim

TREE_STEP = "g2l_tree"
CHECK_STEP = "g2l_check"
REPORT_FORMAT = "veritrail-g2l-report"
REPORT_VERSION = 1

TREE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"tree": {"$ref": "#/$defs/node"}},
    "required": ["tree"],
    "additionalProperties": False,
    "$defs": {
        "node": {
            "type": "object",
            "properties": {
                "text": {"type": "string"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
            },
            "required": ["text", "children"],
            "additionalProperties": False,
        }
    },
}

CHECK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"reason": {"type": "string"}, "supported": {"type": "boolean"}},
    "required": ["reason", "supported"],
    "additionalProperties": False,
}


class G2LStatus(StrEnum):
    """Outcome of one detection."""

    PASSED = "passed"  # every path supported
    FAILED = "failed"  # at least one path not supported
    UNDETERMINED = "undetermined"  # no path failed, but some could not be checked
    TREE_FAILED = "tree_failed"  # no usable tree after the bounded re-asks


@dataclass(frozen=True, slots=True)
class G2LConfig:
    """Settings of G2LDetect.

    `reference_tokens`: token budget (`veritrail.method.tokens.estimate_tokens`) for the reference text
    of one check prompt; set it to the model's context window minus room for the instructions,
    the path and the reply. `max_depth` / `max_nodes` bound what counts as a usable tree (a deeper
    or bigger one is re-asked, then recorded as failed). `max_parallel` bounds concurrent path
    checks. `tree_max_tokens` caps the tree reply.
    """

    reference_tokens: int = 3000
    max_depth: int = 8
    max_nodes: int = 300
    max_parallel: int | None = 8
    tree_max_tokens: int | None = 2048
    check_max_tokens: int | None = 512

    def __post_init__(self) -> None:
        if self.reference_tokens < 1:
            raise ValueError("reference_tokens must be >= 1")
        if self.max_depth < 1 or self.max_nodes < 1:
            raise ValueError("max_depth and max_nodes must be >= 1")
        if self.max_parallel is not None and self.max_parallel < 1:
            raise ValueError("max_parallel must be >= 1 (or None for no bound)")


@dataclass(frozen=True, slots=True)
class TreeNode:
    """One node of the global tree. An empty `text` marks a synthetic root (several top nodes)."""

    text: str
    children: tuple[TreeNode, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """`{"text", "children"}` recursively (the schema's shape)."""
        return {"text": self.text, "children": [c.to_json() for c in self.children]}

    def leaves(self) -> list[TreeNode]:
        """The leaves, in depth-first order."""
        if not self.children:
            return [self]
        return [leaf for c in self.children for leaf in c.leaves()]

    def size(self) -> int:
        """Number of nodes."""
        return 1 + sum(c.size() for c in self.children)

    def depth(self) -> int:
        """Number of levels (a lone root has depth 1)."""
        return 1 + max((c.depth() for c in self.children), default=0)


@dataclass(frozen=True, slots=True)
class Reference:
    """A reference document with the label it is shown under."""

    label: str
    text: str


@dataclass(frozen=True, slots=True)
class PathCheck:
    """The verdict on one root-to-leaf path.

    `supported` is None when no reply could be read; `chunk` is the 0-based reference chunk whose
    answer decided it (the supporting one, or the last one checked).
    """

    index: int
    nodes: tuple[str, ...]
    supported: bool | None
    reason: str
    chunk: int | None
    chunks_checked: int
    error: str | None = None
    raw: str = ""

    @property
    def leaf(self) -> str:
        """The detail the path leads to."""
        return self.nodes[-1]


@dataclass(frozen=True, slots=True)
class G2LResult:
    """Everything one detection produced."""

    status: G2LStatus
    tree: TreeNode | None
    paths: tuple[PathCheck, ...]
    chunks: int
    tree_attempts: int
    tree_error: str | None = None
    tree_raw: str = ""

    @property
    def passed(self) -> bool | None:
        """True / False for a decided text, None when it could not be decided."""
        if self.status is G2LStatus.PASSED:
            return True
        if self.status is G2LStatus.FAILED:
            return False
        return None

    @property
    def failing_paths(self) -> tuple[PathCheck, ...]:
        """Paths the references do not support."""
        return tuple(p for p in self.paths if p.supported is False)

    @property
    def score(self) -> float | None:
        """Share of checked paths that are supported (a soft score; None with nothing checked)."""
        decided = [p for p in self.paths if p.supported is not None]
        if not decided:
            return None
        return sum(1 for p in decided if p.supported) / len(decided)


# -- tree parsing -----------------------------------------------------------------------------

_TEXT_KEYS = ("text", "theme", "name", "label", "title", "topic", "content", "value", "detail")
_CHILD_KEYS = ("children", "branches", "subbranches", "details", "leaves", "items", "nodes")


class TreeError(ValueError):
    """The reply does not hold a usable tree."""


def _scalar(value: Any) -> str | None:
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return None


def _nodes(value: Any, depth: int, limit: int) -> list[TreeNode]:
    if depth > limit:
        raise TreeError(f"tree deeper than {limit} levels")
    s = _scalar(value)
    if s is not None:
        return [TreeNode(s)] if s else []
    if value is None:
        return []
    if isinstance(value, list):
        return [n for item in value for n in _nodes(item, depth, limit)]
    if isinstance(value, Mapping):
        text_key = next((k for k in _TEXT_KEYS if k in value), None)
        if text_key is not None:
            text = _scalar(value[text_key])
            if text is None:
                raise TreeError(f"node field {text_key!r} is not text")
            kids: list[TreeNode] = []
            for k in _CHILD_KEYS:
                if k in value:
                    kids.extend(_nodes(value[k], depth + 1, limit))
            if not text:
                if not kids:
                    return []
                raise TreeError("a node with children has empty text")
            return [TreeNode(text, tuple(kids))]
        # {"subject": {...}, "other subject": [...]}: keys are node texts, values their children.
        return [
            TreeNode(str(k).strip(), tuple(_nodes(v, depth + 1, limit)))
            for k, v in value.items()
            if str(k).strip()
        ]
    raise TreeError(f"unexpected JSON value in tree: {type(value).__name__}")


_PLACEHOLDER = re.compile(r"<[^<>]{1,40}>")


def _texts(node: TreeNode) -> list[str]:
    return [node.text, *(t for c in node.children for t in _texts(c))]


def parse_tree(value: Any, *, max_depth: int = 8, max_nodes: int = 300) -> TreeNode:
    """Read a tree from a decoded reply, leniently; raise `TreeError` when there is none.

    Accepted: `{"tree": node}` or a bare node, where a node is `{"text": ..., "children": [...]}`
    (a few synonyms of both keys are read too), a plain string (a leaf), a list of nodes, or an
    object whose keys are node texts and whose values are their children. `{"tree": "<JSON>"}`
    with the tree serialised inside a string is decoded. Several top-level nodes are placed under
    a synthetic root with empty text (skipped in paths).
    """
    if isinstance(value, Mapping) and "tree" in value:
        value = value["tree"]
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise TreeError("the tree is plain text, not a JSON structure") from None
        if isinstance(value, Mapping) and "tree" in value:
            value = value["tree"]
    tops = _nodes(value, 1, max_depth)
    if not tops:
        raise TreeError("the tree is empty")
    if any(_PLACEHOLDER.fullmatch(t) for n in tops for t in _texts(n)):
        # Weak models copy the shape shown in the prompt verbatim; that is no tree of the text.
        raise TreeError(
            "the tree repeats the format's <placeholders> instead of the text's content"
        )
    root = tops[0] if len(tops) == 1 else TreeNode("", tuple(tops))
    if root.size() > max_nodes:
        raise TreeError(f"tree has {root.size()} nodes, more than {max_nodes}")
    if root.depth() > max_depth:
        raise TreeError(f"tree deeper than {max_depth} levels")
    return root


def tree_paths(root: TreeNode) -> list[tuple[str, ...]]:
    """Every root-to-leaf path as the node texts along it (synthetic empty root left out).

    One path per leaf, in depth-first order, so `len(tree_paths(t)) == len(t.leaves())`.
    """
    out: list[tuple[str, ...]] = []

    def walk(node: TreeNode, prefix: tuple[str, ...]) -> None:
        here = (*prefix, node.text) if node.text else prefix
        if not node.children:
            out.append(here)
            return
        for c in node.children:
            walk(c, here)

    walk(root, ())
    return out


# -- references -------------------------------------------------------------------------------


def as_references(refs: Sequence[str | Reference]) -> list[Reference]:
    """Label plain strings `Document 1`, `Document 2`, …; keep given `Reference`s."""
    return [
        r if isinstance(r, Reference) else Reference(f"Document {i}", r)
        for i, r in enumerate(refs, 1)
    ]


def references_from_dag(dag: Dag) -> list[Reference]:
    """The root nodes of a DAG (sorted by id), labelled by node id."""
    return [Reference(f"node {nid}", dag.node(nid).text) for nid in sorted(dag.roots)]


@dataclass(frozen=True, slots=True)
class _Piece:
    label: str
    text: str


def chunk_references(refs: Sequence[Reference], budget: int) -> list[list[_Piece]]:
    """Pack references, in order, into chunks of at most `budget` estimated tokens.

    A document that does not fit in the room left is split at sentence boundaries and its parts
    are labelled `(part k)`; a single sentence larger than the budget forms a chunk on its own.
    """
    chunks: list[list[_Piece]] = []
    cur: list[_Piece] = []
    used = 0

    def flush() -> None:
        nonlocal cur, used
        if cur:
            chunks.append(cur)
        cur, used = [], 0

    for ref in refs:
        cost = estimate_tokens(ref.text)
        if used + cost > budget and cost <= budget:
            flush()  # a document that fits a chunk of its own is never split
        if used + cost <= budget:
            cur.append(_Piece(ref.label, ref.text))
            used += cost
            continue
        sentences = split_sentences(ref.text) or [ref.text]
        part, buf_cost = 1, 0
        buf: list[str] = []
        for s in sentences:
            c = estimate_tokens(s) + 1
            if buf and used + buf_cost + c > budget:
                cur.append(_Piece(f"{ref.label} (part {part})", " ".join(buf)))
                part += 1
                buf, buf_cost = [], 0
                flush()
            elif not buf and used + c > budget and cur:
                flush()
            buf.append(s)
            buf_cost += c
        if buf:
            label = f"{ref.label} (part {part})" if part > 1 else ref.label
            cur.append(_Piece(label, " ".join(buf)))
            used += buf_cost
    flush()
    return chunks


def _render_chunk(chunk: Sequence[_Piece]) -> str:
    return "\n\n".join(fence(p.text, p.label) for p in chunk)


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


@dataclass(frozen=True, slots=True)
class TreeOutcome:
    """The tree step: the tree, or None with the error and the last raw reply."""

    tree: TreeNode | None
    attempts: int
    error: str | None = None
    raw: str = ""


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
    chunks = [_render_chunk(c) for c in chunk_references(refs, cfg.reference_tokens)]
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


# -- adapters ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class G2LClaimOutcome:
    """G2LDetect's answer for one claim, in the verifier's vocabulary (for `veritrail eval`)."""

    claim: Claim
    verdict: Verdict | None
    score: float | None
    result: G2LResult


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


class G2LDetector:
    """G2LDetect as a `Detector` (`detectors.base`): each claim's text is checked with
    `g2l_claim` against the DAG's sources, claims concurrently.

    `references` says how the DAG is shown to the model: by default its root nodes, sorted by id
    and labelled ``node <id>`` (`references_from_dag`, as `veritrail eval` and ``veritrail detect
    --dag`` always did); ``veritrail detect --text --refs`` labels them by file name instead.
    Verdict: PASSED → Fully Supported, FAILED → Not Fully Supported, otherwise none; the score is
    the share of supported paths; `Detection.native` is the `G2LResult` (tree and paths).
    """

    kind = "g2l"

    def __init__(
        self,
        model: Model,
        config: G2LConfig | None = None,
        *,
        name: str = "G2LDetect",
        references: Callable[[Dag], Sequence[str | Reference]] = references_from_dag,
    ) -> None:
        self.name = name
        self.model = model
        self.config = config
        self.references = references

    async def detect(
        self,
        dag: Dag,
        claims: Sequence[Claim],
        *,
        sentences: SentenceIndex | None = None,
        gold: Mapping[str, GoldClaim] | None = None,
    ) -> list[Detection]:
        """One G2LDetect run per claim (tree, paths, checks), claims concurrently."""
        refs = list(self.references(dag))
        n_roots = len(root_ids(dag))

        async def one(c: Claim) -> Detection:
            scope = f"{self.name}::{c.id}"
            error: str | None = None
            verdict: Verdict | None = None
            score: float | None = None
            native: Any = None
            with claim_scope(scope):
                try:
                    out = await g2l_claim(self.model, c, refs, self.config)
                    verdict, score, native = out.verdict, out.score, out.result
                except Exception as exc:  # noqa: BLE001 - recorded per claim
                    error, native = error_text(exc), exc
            cost = claim_cost(self.model, scope)
            return Detection(
                method=self.name,
                claim_id=c.id,
                verdict=verdict,
                score=score,
                lm_calls=cost.lm_calls,
                input_tokens=cost.input_tokens,
                output_tokens=cost.output_tokens,
                dollars=cost.dollars,
                nodes_read=n_roots,
                nodes_total=len(dag),
                error=error,
                native=native,
            )

        return list(await asyncio.gather(*(one(c) for c in claims)))


# -- report -----------------------------------------------------------------------------------


def path_to_json(p: PathCheck) -> dict[str, Any]:
    """One path's entry in the report."""
    return {
        "index": p.index,
        "path": list(p.nodes),
        "leaf": p.leaf if p.nodes else "",
        "supported": p.supported,
        "reason": p.reason,
        "chunk": p.chunk,
        "chunks_checked": p.chunks_checked,
        "error": p.error,
        "raw": p.raw,
    }


def g2l_report(
    result: G2LResult,
    *,
    model: str | None = None,
    text: str | None = None,
    sources: Sequence[str] = (),
    usage: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON report of one detection (`"format": "veritrail-g2l-report"`, version 1)."""
    return {
        "format": REPORT_FORMAT,
        "version": REPORT_VERSION,
        "method": "g2l",
        "model": model,
        "status": result.status.value,
        "passed": result.passed,
        "score": result.score,
        "text": text,
        "references": list(sources),
        "reference_chunks": result.chunks,
        "tree": result.tree.to_json() if result.tree else None,
        "tree_attempts": result.tree_attempts,
        "tree_error": result.tree_error,
        "tree_raw": result.tree_raw if result.tree is None else "",
        "paths": [path_to_json(p) for p in result.paths],
        "failing_paths": [p.index for p in result.failing_paths],
        "cost": dict(usage or {}),
    }


__all__ = [
    "CHECK_SCHEMA",
    "CHECK_STEP",
    "REPORT_FORMAT",
    "TREE_SCHEMA",
    "TREE_STEP",
    "G2LClaimOutcome",
    "G2LConfig",
    "G2LDetector",
    "G2LResult",
    "G2LStatus",
    "PathCheck",
    "Reference",
    "TreeError",
    "TreeNode",
    "TreeOutcome",
    "aggregate",
    "as_references",
    "build_tree",
    "check_path",
    "chunk_references",
    "g2l_claim",
    "g2l_detect",
    "g2l_report",
    "parse_tree",
    "references_from_dag",
    "render_path",
    "status_to_verdict",
    "tree_paths",
]
