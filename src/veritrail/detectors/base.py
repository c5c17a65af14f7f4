"""One protocol for every detector (docs/detectors.md) and one result record.

A detector answers, for each claim about a DAG, whether the DAG's sources back it:

    class Detector(Protocol):
        name: str
        async def detect(self, dag, claims, *, sentences=None, gold=None) -> list[Detection]

VeriTrail (`detectors.veritrail`), its gold oracle, the paper's RAG and direct baselines
(`detectors.baselines`), the NLI chunk baseline (`detectors.nli`), G2LDetect
(`detectors.g2l.G2LDetector`) and SIRG (`detectors.sirg.detector.SirgDetector`) all implement it;
`veritrail eval` runs nothing else (`veritrail.eval.runner.run_eval`), and `veritrail detect
--method` (any registered detector) / `veritrail sirg detect` run their detector through it.

Why this signature (read from how each detector was called before):

* **A DAG and claims**, not "a text and sources": the eval runner's unit is an item (one DAG, its
  claims), and VeriTrail needs the DAG's inner nodes. A text checked against sources is the
  smallest DAG — the sources as roots, the text as the terminal node, the text itself as the one
  claim (`text_dag`) — so `veritrail detect --text T --refs D...` and `veritrail sirg detect`
  fit without a second entry point, while a detector that only reads sources (RAG, direct, G2L,
  SIRG, NLI) simply uses the roots.
* **Claims in a batch**, not one at a time: work shared by an item's claims (RAG's root
  embeddings, NLI's chunks, VeriTrail's read plans and claim concurrency) stays inside the
  detector; the result is one `Detection` per claim, in the order of `claims`.
* **async**: every LM-based detector awaits model calls; CPU-bound ones (NLI, SIRG) run their
  work in a thread so the event loop (progress lines, other items) keeps going.
* **Keyword extras the caller may have**: `sentences`, a shared `SentenceIndex` (so every
  detector of an eval sees the same segmentation and segments each node once), and `gold`, the
  labelled claims by claim id. Only the gold oracle reads `gold` (it exists to replay the labels
  as an upper bound); every other detector ignores it, and a caller without labels leaves it out.
* **A `name`**: the row label of the eval tables (``VeriTrail q=3``, ``RAG k=15``), unique per run.

`Detection` is the record eval's predictions are written from (the same fields eval always
wrote): the flat cost fields, the loop's error stages and termination, and `detail`, a small
JSON-ready mapping of what only one detector has (RAG's retrieved roots, direct's subset, NLI's
best chunk), written into eval's predictions file. `native` holds the
detector's own full result object (VeriTrail's `ClaimResult`, G2LDetect's `G2LResult`, SIRG's
`Detection` with its graph) — or, when the claim failed, the exception — for callers that render
it (`veritrail detect` writes its G2L report from it); it is never serialised by eval.

To add a detector: write a class with `name` and `detect` (see docs/detectors.md), and make it
usable as ``veritrail eval --method kind:key=value`` with
`veritrail.detectors.registry.register_method`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..dag import Dag, Node
from ..records import Claim, ErrorStageStatus, GoldClaim, SentenceKey, StepCost, Verdict

if TYPE_CHECKING:
    from ..lm.model import Model
    from ..method.segment import SentenceIndex


@dataclass(frozen=True, slots=True)
class Detection:
    """One detector's answer for one claim, with what the eval metrics need.

    `verdict` is None when the claim could not be decided (`error` then usually says why);
    `score` is a soft P(Fully Supported) when the detector has one (AUROC uses it).
    """

    method: str
    """The detector's `name`."""
    claim_id: str
    """The id of the claim answered (in `veritrail eval`: the dataset-wide claim key)."""
    verdict: Verdict | None
    score: float | None = None
    evidence: frozenset[SentenceKey] | None = None
    """Root sentences the detector used as evidence; None when it does not select any."""
    lm_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    dollars: float = 0.0
    nodes_read: int = 0
    nodes_total: int = 0
    error_stages: tuple[int, ...] = ()
    error_stage_status: ErrorStageStatus | None = None
    termination: str | None = None
    error: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    """Small, JSON-ready facts only this detector has (written into eval's predictions)."""
    native: Any = field(default=None, compare=False, repr=False)
    """The detector's own result object, or the exception when the claim failed (not written)."""

    @property
    def nodes_read_share(self) -> float:
        """Share of the DAG's nodes the detector read for this claim."""
        return self.nodes_read / self.nodes_total if self.nodes_total else 0.0


def detection_to_json(p: Detection) -> dict[str, Any]:
    """One detection as JSON (evidence as sorted [node, sentence] pairs; `native` left out): a
    prediction in `veritrail eval`'s results.json, the ``detection`` of `veritrail detect`'s
    report."""
    return {
        "method": p.method,
        "claim": p.claim_id,
        "verdict": p.verdict.value if p.verdict else None,
        "score": p.score,
        "evidence": sorted([list(k) for k in p.evidence]) if p.evidence is not None else None,
        "lm_calls": p.lm_calls,
        "input_tokens": p.input_tokens,
        "output_tokens": p.output_tokens,
        "dollars": p.dollars,
        "nodes_read": p.nodes_read,
        "nodes_total": p.nodes_total,
        "error_stages": list(p.error_stages),
        "error_stage_status": p.error_stage_status.value if p.error_stage_status else None,
        "termination": p.termination,
        "error": p.error,
        "detail": p.detail,
    }


@runtime_checkable
class Detector(Protocol):
    """A hallucination detector: per claim about a DAG, a `Detection` (see the module docstring)."""

    name: str
    """The detector's label in tables and reports (unique among the detectors of one run)."""

    async def detect(
        self,
        dag: Dag,
        claims: Sequence[Claim],
        *,
        sentences: SentenceIndex | None = None,
        gold: Mapping[str, GoldClaim] | None = None,
    ) -> list[Detection]:
        """One detection per claim, in the order of `claims`.

        `sentences` is a segmentation of `dag` shared with other detectors (build one when
        None); `gold` holds labelled claims by claim id, for the gold oracle only. A failure on
        one claim is recorded in its detection (`error`, `verdict` None), not raised.
        """
        ...


# -- helpers shared by the shipped detectors ---------------------------------------------------


def root_ids(dag: Dag) -> list[str]:
    """Root node ids in DAG order."""
    return [n.id for n in dag if not n.sources]


def root_sentence_keys(sentences: SentenceIndex, node_ids: Sequence[str]) -> frozenset[SentenceKey]:
    """Every sentence of the given (root) nodes, as evidence keys."""
    return frozenset((nid, i) for nid in node_ids for i in range(len(sentences.sentences(nid))))


def claim_cost(model: Model, scope: str) -> StepCost:
    """The cost of every call made under `claim_scope(scope)`."""
    out = StepCost()
    for c in model.usage.for_claim(scope).values():
        out = out + c
    return out


def error_text(exc: BaseException) -> str:
    """How a claim's failure is recorded in `Detection.error`."""
    return f"{type(exc).__name__}: {exc}"


def check_detections(
    detector: Detector, claims: Sequence[Claim], out: Sequence[Detection]
) -> list[Detection]:
    """`out` as a list, after checking it holds one detection per claim, in order."""
    got = [d.claim_id for d in out]
    want = [c.id for c in claims]
    if got != want:
        raise RuntimeError(
            f"detector {detector.name!r} answered claims {got[:5]} for {want[:5]} "
            f"({len(got)} detections for {len(want)} claims)"
        )
    return list(out)


TEXT_ID = "text"
"""Node id (and claim id) of the checked text in a `text_dag`."""


def text_dag(text: str, sources: Sequence[str], *, source_ids: Sequence[str] = ()) -> Dag:
    """The smallest DAG of "a text checked against sources": the sources as root nodes (in the
    given order, ids `source_ids` or ``source-1``, ``source-2``, …) and `text` as the terminal
    node ``text`` whose sources they are. Check the whole text with ``[text_claim(text)]``.

    Built without validation on purpose: the commands that use it (`veritrail detect --text`,
    `veritrail sirg detect`) have always accepted any text files, empty ones included.
    """
    if not sources:
        raise ValueError("a text is checked against at least one source")
    ids = list(source_ids) or [f"source-{i}" for i in range(1, len(sources) + 1)]
    if len(ids) != len(sources) or len(set(ids)) != len(ids) or TEXT_ID in ids:
        raise ValueError("source_ids must be unique, one per source, and not 'text'")
    nodes = {nid: Node(nid, t, (), 1) for nid, t in zip(ids, sources, strict=True)}
    nodes[TEXT_ID] = Node(TEXT_ID, text, tuple(ids), 2)
    return Dag(nodes, TEXT_ID)


def text_claim(text: str) -> Claim:
    """The whole text of a `text_dag` as the one claim to check."""
    return Claim(TEXT_ID, text)


__all__ = [
    "TEXT_ID",
    "Detection",
    "Detector",
    "check_detections",
    "claim_cost",
    "detection_to_json",
    "error_text",
    "root_ids",
    "root_sentence_keys",
    "text_claim",
    "text_dag",
]
