"""Method specs → detectors: the one place ``veritrail eval --method kind:key=value`` is read.

A spec is ``kind[:key=value[,key=value...]]``; `build_method` looks the kind up among the
registered factories and returns a `Detector` (`detectors.base`). Shipped kinds:

* ``veritrail`` (``q=``, ``evidence=``, ``term_check=``, ``claims_per_prompt=``) — `detectors.veritrail.VeriTrailDetector`
  with the LM steps;
* ``oracle`` (``q=``) — `detectors.veritrail.OracleDetector`, the loop replaying the gold labels;
* ``rag`` (``k=15``, ``embedder=``, ``term_check=``) — `detectors.baselines.RagDetector`;
* ``direct`` (``budget=``, ``seed=``, ``term_check=``) — `detectors.baselines.DirectDetector`;
* ``g2l`` — `detectors.g2l.G2LDetector` against the root nodes;
* ``nli`` (``model=PATH``, ``chunk=350``, ``threshold=0.5``, ``batch=8``) —
  `detectors.nli.NLIChunkDetector`;
* ``sirg`` (``classifier=DIR`` required, ``model=smollm2``, ``method=attnlrp``, ``k=15``,
  ``selection=top_k``, ``tau=0``, ``max_targets=``, ``cache=DIR``) —
  `detectors.sirg.detector.SirgDetector` (needs the ``sirg`` extra);
* ``earliest-stage`` (``coverage=0.8``) — `detectors.stage_baseline.EarliestStageDetector`, the
  model-free stage baseline of ``veritrail eval injected:DIR``.

``term_check=on|off`` (``veritrail``, ``rag``, ``direct``) turns the key-term check
(`method.keyterms`) on or off for that method; without it the method's default for the model
decides (`keyterms.on_by_default`: on for the embedded `local/` models), the same rule for the
three methods.

New kinds are added with `register_method(kind, factory)`; a factory gets the parsed spec and the
run's shared settings (`BuildContext`) and returns any object with `name` and `detect`. Every
registered kind runs in ``veritrail eval --method`` and in ``veritrail detect --method`` (one
text against its references), except those that need gold labels (the oracle) in ``detect``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ..lm.model import Model
from ..method.config import VerifyConfig
from .base import Detector

if TYPE_CHECKING:  # numpy comes with extras only: `veritrail detect` must load on the core install
    from ..dag import Dag
    from .embeddings import Embedder
    from .g2l.references import Reference

_DEFAULT = VerifyConfig()


@dataclass(frozen=True, slots=True)
class MethodSpec:
    """A method as named on the command line: ``kind`` plus ``key=value`` options.

    Examples: ``veritrail:q=1``, ``rag:k=15``, ``direct:budget=100000``, ``oracle``, ``g2l``,
    ``nli:model=/models/deberta-mnli,chunk=350``.
    """

    kind: str
    options: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, text: str) -> MethodSpec:
        """Parse ``kind[:key=value[,key=value...]]``."""
        kind, _, rest = text.strip().partition(":")
        opts: list[tuple[str, str]] = []
        for part in filter(None, (p.strip() for p in rest.split(","))):
            k, eq, v = part.partition("=")
            if not eq or not k:
                raise ValueError(f"method option {part!r} in {text!r} is not key=value")
            opts.append((k.strip(), v.strip()))
        return cls(kind.strip().lower(), tuple(opts))

    def get(self, key: str, default: str | None = None) -> str | None:
        """An option's value."""
        return dict(self.options).get(key, default)


@dataclass(frozen=True, slots=True)
class BuildContext:
    """What method factories may use: the model (None for oracle-only runs) and shared settings."""

    model: Model | None
    base_config: VerifyConfig
    samples: int = _DEFAULT.samples
    threshold: int = _DEFAULT.threshold
    embedder: Callable[[str], Embedder] | None = None
    default_embedder: str = "minilm-onnx"
    token_budget: int | None = None
    seed: int = 0
    references: Callable[[Dag], Sequence[str | Reference]] | None = None
    """How G2LDetect shows a DAG's sources to the model (None: its root nodes labelled by id;
    ``veritrail detect --text --refs`` labels them by file name)."""


MethodFactory = Callable[[MethodSpec, BuildContext], Detector]


@dataclass(frozen=True, slots=True)
class _Kind:
    factory: MethodFactory
    uses_model: bool
    needs_gold: bool


_KINDS: dict[str, _Kind] = {}


def register_method(
    kind: str, factory: MethodFactory, *, uses_model: bool = True, needs_gold: bool = False
) -> None:
    """Make `kind` usable as ``--method kind:...`` (later registrations replace earlier ones).

    `uses_model`: the factory reads `BuildContext.model` (a caller without one need not build
    it: ``veritrail detect`` opens the model only for such kinds). `needs_gold`: the detector
    decides from the `gold` labels (the oracle), so it runs only where there are labels
    (``veritrail eval``), not on an unlabelled text (``veritrail detect``).
    """
    _KINDS[kind] = _Kind(factory, uses_model, needs_gold)


def _kind(kind: str) -> _Kind:
    found = _KINDS.get(kind)
    if found is None:
        raise ValueError(f"unknown method {kind!r}; known: {', '.join(sorted(_KINDS))}")
    return found


def uses_model(kind: str) -> bool:
    """Whether detectors of `kind` call the run's model (`register_method`'s `uses_model`)."""
    return _kind(kind).uses_model


def needs_gold(kind: str) -> bool:
    """Whether detectors of `kind` need the gold labels (`register_method`'s `needs_gold`)."""
    return _kind(kind).needs_gold


def _need_model(spec: MethodSpec, ctx: BuildContext) -> Model:
    if ctx.model is None:
        raise ValueError(f"method {spec.kind!r} needs a model (--model)")
    return ctx.model


def _int(spec: MethodSpec, key: str, default: int | None) -> int | None:
    v = spec.get(key)
    return default if v is None else int(v)


_ON = frozenset({"on", "true", "yes", "1"})
_OFF = frozenset({"off", "false", "no", "0"})


def _term_check_option(spec: MethodSpec) -> tuple[bool | None, str]:
    """The ``term_check=`` option (None: not given) and the label suffix that names it."""
    v = spec.get("term_check")
    if v is None:
        return None, ""
    if v.lower() in _ON:
        return True, ", term check on"
    if v.lower() in _OFF:
        return False, ", term check off"
    raise ValueError(f"method option term_check={v!r}: use on or off")


def _veritrail(spec: MethodSpec, ctx: BuildContext) -> Detector:
    from ..method.loop import lm_steps
    from .veritrail import VeriTrailDetector

    model = _need_model(spec, ctx)
    q = _int(spec, "q", ctx.base_config.q) or ctx.base_config.q
    cfg = replace(ctx.base_config, q=q, samples=ctx.samples, threshold=ctx.threshold)
    ev = spec.get("evidence")
    if ev is not None:
        cfg = replace(cfg, evidence_sentences_root=int(ev), evidence_sentences_nonroot=int(ev))
    suffix = f", {ev} sent./prompt" if ev else ""
    term_check, kt_label = _term_check_option(spec)
    if term_check is not None:
        cfg = replace(cfg, term_check=term_check)
    per_prompt = _int(spec, "claims_per_prompt", None)
    if per_prompt is not None:
        if per_prompt < 1:
            raise ValueError("method option claims_per_prompt must be >= 1")
        cfg = replace(cfg, claims_per_prompt=per_prompt)
        suffix += f", {per_prompt} claim{'s' if per_prompt > 1 else ''}/prompt"
    return VeriTrailDetector(f"VeriTrail q={q}{suffix}{kt_label}", lm_steps(model), cfg)


def _oracle(spec: MethodSpec, ctx: BuildContext) -> Detector:
    from .veritrail import OracleDetector

    q = _int(spec, "q", ctx.base_config.q) or ctx.base_config.q
    return OracleDetector(
        f"Oracle (gold) q={q}", replace(ctx.base_config, q=q, samples=1, threshold=1)
    )


def _rag(spec: MethodSpec, ctx: BuildContext) -> Detector:
    from .baselines import RagDetector
    from .embeddings import get_embedder

    k = _int(spec, "k", 15) or 15
    emb_name = spec.get("embedder", ctx.default_embedder) or ctx.default_embedder
    embedder = (ctx.embedder or get_embedder)(emb_name)
    label = f"RAG k={k}" + ("" if emb_name == ctx.default_embedder else f" ({embedder.name})")
    term_check, kt_label = _term_check_option(spec)
    return RagDetector(
        label + kt_label,
        _need_model(spec, ctx),
        embedder,
        k=k,
        samples=ctx.samples,
        threshold=ctx.threshold,
        term_check=term_check,
    )


def _direct(spec: MethodSpec, ctx: BuildContext) -> Detector:
    from .baselines import DirectDetector

    budget = _int(spec, "budget", ctx.token_budget)
    label = "Direct" + (f" (≤{budget} tok)" if budget else "")
    term_check, kt_label = _term_check_option(spec)
    return DirectDetector(
        label + kt_label,
        _need_model(spec, ctx),
        token_budget=budget,
        seed=_int(spec, "seed", ctx.seed) or 0,
        samples=ctx.samples,
        threshold=ctx.threshold,
        term_check=term_check,
    )


def _g2l(spec: MethodSpec, ctx: BuildContext) -> Detector:
    """``g2l[:reference_tokens=N,max_depth=N,max_nodes=N]``."""
    from .g2l import G2LConfig, G2LDetector

    base = G2LConfig()
    config = G2LConfig(
        reference_tokens=int(spec.get("reference_tokens") or base.reference_tokens),
        max_depth=int(spec.get("max_depth") or base.max_depth),
        max_nodes=int(spec.get("max_nodes") or base.max_nodes),
    )
    if ctx.references is None:
        return G2LDetector(_need_model(spec, ctx), config)
    return G2LDetector(_need_model(spec, ctx), config, references=ctx.references)


def _nli(spec: MethodSpec, ctx: BuildContext) -> Detector:
    from pathlib import Path

    from .nli import NLIChunkDetector, NLIModel

    path = spec.get("model")
    if not path:
        raise ValueError("method 'nli' needs model=PATH (a local Hugging Face model directory)")
    chunk = _int(spec, "chunk", 350) or 350
    threshold = float(spec.get("threshold", "0.5") or 0.5)
    batch = _int(spec, "batch", 8) or 8
    model = NLIModel(path, batch_size=batch)  # NLIModelError (a ValueError) names the problem
    label = f"NLI {Path(path).name} chunk={chunk}" + (
        "" if threshold == 0.5 else f" t={threshold:g}"
    )
    return NLIChunkDetector(label, model, chunk_tokens=chunk, threshold=threshold)


def _earliest_stage(spec: MethodSpec, ctx: BuildContext) -> Detector:
    from .stage_baseline import DEFAULT_COVERAGE, EarliestStageDetector

    coverage = float(spec.get("coverage", str(DEFAULT_COVERAGE)) or DEFAULT_COVERAGE)
    label = "Earliest stage" + ("" if coverage == DEFAULT_COVERAGE else f" coverage={coverage:g}")
    return EarliestStageDetector(label, coverage=coverage)


def _sirg(spec: MethodSpec, ctx: BuildContext) -> Detector:
    try:
        from .sirg.detector import sirg_from_spec

        return sirg_from_spec(dict(spec.options))
    except ImportError as exc:  # torch / transformers / spaCy missing
        raise ValueError(f"method 'sirg' needs the sirg extra ({exc})") from None


register_method("veritrail", _veritrail)
register_method("oracle", _oracle, uses_model=False, needs_gold=True)
register_method("rag", _rag)
register_method("direct", _direct)
register_method("g2l", _g2l)
register_method("nli", _nli, uses_model=False)  # a local NLI model, not the run's model
register_method("sirg", _sirg, uses_model=False)  # its own white-box model (``model=``)
register_method("earliest-stage", _earliest_stage, uses_model=False)  # word coverage, no model


def build_method(spec: MethodSpec | str, ctx: BuildContext) -> Detector:
    """Instantiate a detector from its spec (`ValueError` names a bad spec)."""
    s = MethodSpec.parse(spec) if isinstance(spec, str) else spec
    return _kind(s.kind).factory(s, ctx)


def known_methods() -> list[str]:
    """Registered method kinds."""
    return sorted(_KINDS)


__all__ = [
    "BuildContext",
    "MethodFactory",
    "MethodSpec",
    "build_method",
    "known_methods",
    "needs_gold",
    "register_method",
    "uses_model",
]
