"""Rebuilding the job of an existing run directory (`veritrail resume`), checked against its
run.json: the same inputs, the same fingerprint.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..redaction import MASK
from .fingerprint import file_sha256, result_config, run_fingerprint
from .inputs import check_outputs, check_run_dir, html_target, input_paths, load_job_dag
from .settings import (
    SETTING_NAMES,
    Settings,
)
from .spec import Job, JobInputError
from .store import RUN_FILE, RunStore, RunStoreError

if TYPE_CHECKING:
    pass


def job_from_run_dir(
    run_dir: str,
    *,
    out_path: str | None,
    html: str | None,
    overrides: Mapping[str, Any] | None = None,
) -> Job:
    """Rebuild the job of an existing run directory (for `veritrail resume`).

    `overrides` are settings given to `resume` itself (`--max-unsupported`, `--base-url`); they
    change how the run is finished, never what it computes (the fingerprint is checked).
    """
    try:
        store = RunStore.open(run_dir)
    except RunStoreError as exc:
        raise JobInputError(str(exc)) from None
    info = store.info
    dag_path = info.dag_path
    if not Path(dag_path).is_file():
        raise JobInputError(f"the run's DAG file {dag_path} is gone")
    dag_sha = file_sha256(dag_path)
    if dag_sha != info.dag_sha256:
        raise JobInputError(
            f"the run's DAG file {dag_path} changed since the run started (content hash differs)"
        )
    known = {k: v for k, v in info.config.items() if k in SETTING_NAMES}
    known.update(overrides or {})
    try:
        settings = Settings(**known)
    except (TypeError, ValueError) as exc:
        raise JobInputError(f"{run_dir}: unreadable settings in {RUN_FILE}: {exc}") from None
    stored_url = settings.base_url
    if stored_url and MASK + "@" in stored_url and not (overrides or {}).get("base_url"):
        # run.json keeps the base URL without its user and password; they are needed again.
        raise JobInputError(
            f"the run's base URL {stored_url} had credentials, which are never stored; "
            "give it again with --base-url (or VERITRAIL_BASE_URL)"
        )
    oracle_path = info.extra.get("oracle_path")
    claims_from_file = info.extra.get("claims_given", True)
    claims = store.claims
    fp = run_fingerprint(
        dag_sha256=dag_sha,
        claims=claims if claims_from_file else None,
        model=info.model,
        config=result_config(settings, oracle_path),
    )
    if fp != info.fingerprint:
        raise JobInputError(
            f"{run_dir}: the run's inputs changed (oracle file or settings no longer match "
            "run.json); start a new run instead"
        )
    out = Path(out_path or info.extra.get("out_path") or Path(run_dir) / "report.json")
    stored_html = info.extra.get("html_path")
    html_path = html_target(html, out) or (Path(stored_html) if stored_html else None)
    inputs = input_paths(dag_path, info.claims_path, oracle_path, None, settings)
    outs = [(f, p) for f, p in (("--out", out), ("--html", html_path)) if p is not None]
    # A run made before this check may keep its DAG among the files finishing it writes.
    check_run_dir(Path(run_dir), inputs, outs, new_run=False, label="the run directory")
    check_outputs(out, html_path, inputs)
    # The report names the DAG as the original command did, so a resumed report equals an
    # uninterrupted one.
    return Job(
        dag=load_job_dag(dag_path),
        dag_path=str(info.extra.get("dag_path_given") or dag_path),
        dag_sha256=dag_sha,
        claims=claims,
        claims_path=info.claims_path,
        oracle_path=oracle_path,
        settings=settings,
        model_name=info.model,
        fingerprint=info.fingerprint,
        run_dir=Path(run_dir),
        out_path=out,
        html_path=html_path,
        inputs=inputs,
    )
