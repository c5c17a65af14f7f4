"""The per-run context: what every claim of one verification run shares.

One `RunContext` is made per run (`RunContext.create`, called by `loop.verify_claims`) and passed
down to every claim and step of that run: the DAG, the sentence index (each node segmented once
per run), the run's read plans (`plans.ReadPlans`), the steps, the method's settings, and the
models whose usage ledgers hold the run's costs. Nothing of a run lives in module state, so two
runs in one process (two `veritrail batch` jobs, an evaluation's methods) never share plans, and
the costs come from the steps' own models without the caller naming the model a second time.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

from ..dag import Dag
from ..lm.model import Model
from ..records import StepCost
from .config import VerifyConfig
from .keyterms import SourceVocabulary
from .keyterms import enabled as keyterms_enabled
from .plans import ReadPlans
from .segment import SentenceIndex
from .steps import Steps


@dataclass(frozen=True, slots=True)
class RunContext:
    """What one run shares between its claims. Frozen; only `plans` (a cache) and the models'
    ledgers fill up as the run goes."""

    dag: Dag
    sentences: SentenceIndex
    steps: Steps
    config: VerifyConfig
    plans: ReadPlans
    models: tuple[Model, ...] = ()
    """The models whose usage ledgers hold the run's costs (and whose fatal endpoint error stops
    the run): `Steps.ledger_models()` unless the caller named one."""
    term_vocabulary: SourceVocabulary | None = None
    """The sources' vocabulary when the key-term check runs (`method.keyterms`), else None."""

    @classmethod
    def create(
        cls,
        dag: Dag,
        steps: Steps,
        config: VerifyConfig,
        *,
        sentences: SentenceIndex | None = None,
        model: Model | None = None,
    ) -> RunContext:
        """The context of a new run. `sentences` defaults to a fresh index of `dag`; `model`
        (deprecated, see `loop.verify_claims`) replaces the steps' models as the source of costs.
        """
        index = sentences if sentences is not None else SentenceIndex(dag)
        if model is not None:
            # Before issue 15 the loop could only find costs through this second naming of the
            # model; leaving it out silently dropped them. The steps know their models now.
            warnings.warn(
                "model= is deprecated: the costs come from the steps' models "
                "(lm_steps(model) records its model); drop the argument",
                DeprecationWarning,
                stacklevel=4,
            )
        models = (model,) if model is not None else steps.ledger_models()
        judge_model = getattr(steps.judge, "model", None)
        # Once per run, like the sentence index (a batch's shards and an evaluation's claims are
        # runs of their own; the roots are read once each).
        on = keyterms_enabled(config.term_check, judge_model)
        vocab = SourceVocabulary.of_dag(dag) if on else None
        return cls(dag, index, steps, config, ReadPlans(dag, index, config), models, vocab)

    def claim_cost(self, claim_id: str) -> dict[str, StepCost]:
        """Cost per step of one claim, summed over the run's models (empty for steps without a
        model, e.g. the oracle)."""
        if len(self.models) == 1:
            return self.models[0].usage.for_claim(claim_id)
        out: dict[str, StepCost] = {}
        for m in self.models:
            for step, cost in m.usage.for_claim(claim_id).items():
                prev = out.get(step)
                out[step] = cost if prev is None else prev + cost
        return out

    def fatal_cause(self) -> str | None:
        """Why no further claim can be verified (a model's fatal endpoint error: bad key, unknown
        model; `Model.fatal`), or None."""
        for m in self.models:
            fatal = m.fatal
            if fatal is not None:
                return f"{type(fatal).__name__}: {fatal.cause}"
        return None
