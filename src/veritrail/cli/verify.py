"""`veritrail verify`: the main job. DAG (+ claims) in, report out."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import NoReturn

import click

from ..claims import ClaimsFileError, load_claims
from ..config import VerifyConfig
from ..dag import DagValidationError, load_dag
from ..report import write_report


def fail(message: str, code: int = 2) -> NoReturn:
    """Print an input error and exit (status 2 = bad input)."""
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


@click.command()
@click.argument("dag_path", type=click.Path(dir_okay=False))
@click.option("--claims", "claims_path", type=click.Path(dir_okay=False), help="Claims JSON file.")
@click.option(
    "--oracle",
    "oracle_path",
    type=click.Path(dir_okay=False),
    help="Answer every step from this oracle file instead of a model.",
)
@click.option(
    "--model",
    "model_name",
    default=None,
    help="provider/model, e.g. openai/gpt-4o or local/qwen2.5-coder-1.5b.",
)
@click.option(
    "-q",
    "--q",
    "q",
    type=int,
    default=3,
    show_default=True,
    help="Consecutive Not Fully Supported verdicts that stop a claim.",
)
@click.option(
    "--out", "out_path", default="report.json", show_default=True, type=click.Path(dir_okay=False)
)
@click.option(
    "--evidence-sentences",
    type=int,
    default=None,
    help="Sentences per evidence prompt (root and non-root).",
)
@click.option("--evidence-sentences-root", type=int, default=None)
@click.option("--evidence-sentences-nonroot", type=int, default=None)
@click.option("--evidence-tokens-root", type=int, default=None)
@click.option("--evidence-tokens-nonroot", type=int, default=None)
@click.option("--verdict-sentences", type=int, default=200, show_default=True)
@click.option("--verdict-tokens", type=int, default=None)
@click.option("--max-compression-reruns", type=int, default=3, show_default=True)
@click.option(
    "--samples", type=int, default=1, show_default=True, help="Soft prediction: samples per call."
)
@click.option(
    "--threshold", type=int, default=1, show_default=True, help="Soft prediction: votes needed."
)
def verify(
    dag_path: str,
    claims_path: str | None,
    oracle_path: str | None,
    model_name: str | None,
    q: int,
    out_path: str,
    evidence_sentences: int | None,
    evidence_sentences_root: int | None,
    evidence_sentences_nonroot: int | None,
    evidence_tokens_root: int | None,
    evidence_tokens_nonroot: int | None,
    verdict_sentences: int,
    verdict_tokens: int | None,
    max_compression_reruns: int,
    samples: int,
    threshold: int,
) -> None:
    """Verify the claims of DAG_PATH's final output and write a report with the evidence trail."""
    from ..oracle import Oracle, OracleError
    from ..runner import run_verification

    try:
        dag = load_dag(dag_path)
    except DagValidationError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"{dag_path}: {exc}")
    try:
        config = VerifyConfig(
            q=q,
            evidence_sentences_root=evidence_sentences_root or evidence_sentences or 40,
            evidence_sentences_nonroot=evidence_sentences_nonroot or evidence_sentences or 40,
            evidence_tokens_root=evidence_tokens_root,
            evidence_tokens_nonroot=evidence_tokens_nonroot,
            verdict_sentences=verdict_sentences,
            verdict_tokens=verdict_tokens,
            max_compression_reruns=max_compression_reruns,
            samples=samples,
            threshold=threshold,
        )
    except ValueError as exc:
        fail(str(exc))
    if claims_path is None:
        fail("--claims is required until claim extraction is wired in")
    try:
        claims = load_claims(claims_path)
    except ClaimsFileError as exc:
        fail(str(exc))
    if oracle_path is not None:
        try:
            steps = Oracle.from_file(oracle_path).steps()
        except OracleError as exc:
            fail(str(exc))
        _, report = asyncio.run(
            run_verification(dag, claims, config, steps=steps, dag_path=dag_path)
        )
    else:
        from ..lm.registry import get_model

        model = get_model(model_name)

        async def go() -> dict[str, object]:
            try:
                _, rep = await run_verification(dag, claims, config, model=model, dag_path=dag_path)
                return rep
            finally:
                await model.aclose()

        report = asyncio.run(go())
    write_report(report, out_path)
    s = report["summary"]
    counts = ", ".join(f"{k}: {v}" for k, v in s["verdicts"].items() if v)
    click.echo(f"{s['claims']} claims verified ({counts}); report written to {Path(out_path)}")
