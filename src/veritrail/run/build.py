"""The model and the steps of a run: built in one place for verify, resume, check, the API and
both executors of `veritrail batch` (`build_steps`; the model by `run.model_spec.ModelSpec`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..redaction import redact
from .settings import Settings, step_specs
from .spec import Job, JobInputError

if TYPE_CHECKING:
    from ..lm.model import Model
    from ..method.steps import Steps


def build_model(job: Job) -> Model:
    """The job's model, as the settings describe it (cache, concurrency, endpoint, prices):
    `ModelSpec.build`, the one place a model is built."""
    from .model_spec import ModelSpec

    return ModelSpec.from_settings(job.settings, job.model_name).build(
        concurrency=job.settings.concurrency
    )


ORACLE_ALONE = "it cannot be combined with --decomposer, --selector or --judge"


def check_oracle_alone(
    settings: Settings, oracle: bool, *, name: str = "--oracle", steps: str = ORACLE_ALONE
) -> None:
    """An oracle answers every step, so a plugged step beside it is a usage conflict
    (`JobInputError`, exit 2): `verify` and `batch` refuse it alike. `name` names the oracle
    and `steps` the plugged steps in the message (`verify`'s flags, a manifest's settings)."""
    plugged = step_specs(settings)
    if oracle and plugged:
        given = ", ".join(f"{k} {v}" for k, v in plugged.items())
        raise JobInputError(f"{name} answers every step: {steps} ({given})")


def build_steps(
    model: Model | None,
    plugins: Mapping[str, str],
    *,
    sample_temperature: float,
    oracle: Steps | None = None,
) -> Steps:
    """The steps a run verifies with: `oracle`'s when given (no plugged step may go with it),
    else the LM steps over `model` with the steps `plugins` names (kind -> spec) in their place,
    each checked while it runs (`plugins.plugged_steps`).

    The one place steps are built for a run: `veritrail verify` and `resume` (`run_job`) and
    both executors of `veritrail batch` (the local one and each Ray shard), so a plugged step is
    applied wherever a claim is verified. Raises `JobInputError` (exit 2), before any model
    call, for a spec that cannot be loaded.
    """
    if oracle is not None:
        if plugins:
            raise JobInputError(f"an oracle answers every step: {ORACLE_ALONE}")
        return oracle
    from ..method.loop import lm_steps

    if model is None:
        raise JobInputError("the LM steps need a model (none is configured)")
    steps = lm_steps(model, sample_temperature=sample_temperature)
    if plugins:
        from .plugins import plugged_steps

        try:  # before any model call: a bad spec is exit 2 with its reason
            steps = plugged_steps(steps, plugins, model=model)
        except ValueError as exc:
            raise JobInputError(redact(str(exc))) from None
    return steps


def job_steps(job: Job, model: Model | None) -> Steps:
    """The steps `job` verifies with over `model` (None: the job's oracle answers), by
    `build_steps`: the one call of verify, resume, the API, the local batch executor and the
    driver's up-front check of a batch's jobs (a Ray shard builds them from its `ShardSpec`).
    The oracle is the job's checked document when it has one (a batch's jobs), else its file."""
    oracle: Steps | None = None
    if job.oracle_path is not None or job.oracle_doc is not None:
        from ..method.oracle import Oracle, OracleError

        check_oracle_alone(job.settings, True)
        try:
            if job.oracle_doc is not None:
                oracle = Oracle.from_dict(job.oracle_doc).steps()
            else:
                assert job.oracle_path is not None
                oracle = Oracle.from_file(job.oracle_path).steps()
        except OracleError as exc:
            raise JobInputError(str(exc)) from None
    return build_steps(
        model,
        step_specs(job.settings),
        sample_temperature=job.settings.sample_temperature,
        oracle=oracle,
    )
