"""`veritrail inject`: plant hallucinations at known stages of a DAG (docs/inject.md)."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("inject")
@click.argument("dag_path", metavar="DAG")
@click.option("--n", "n", type=int, default=8, show_default=True, help="Variants to write.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of every choice.")
@click.option(
    "--kinds",
    multiple=True,
    help="fabricated, entity-swap, number, negation, wrong-citation, dropped-citation "
    "(repeatable or comma-separated; default all; the citation kinds only when the final output "
    "carries citation markers).",
)
@click.option(
    "--stages",
    multiple=True,
    help="Stages to inject into (repeatable or comma-separated; default every non-root stage).",
)
@click.option(
    "--max-untouched",
    type=int,
    default=None,
    help="At most this many untouched final-output claims per variant (default all).",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    required=True,
    help="Directory to write (absent or empty): injected.json, clean/, v001/, ...",
)
def inject(
    dag_path: str,
    n: int,
    seed: int,
    kinds: tuple[str, ...],
    stages: tuple[str, ...],
    max_untouched: int | None,
    out_dir: str,
) -> None:
    """Write N copies of DAG, each with one hallucination planted in one node of a chosen stage
    and carried down to the final output, with claims and gold labels (stage and node).

    Model-free and deterministic: the same DAG, options and seed give byte-identical files.
    Evaluate detectors on them with `veritrail eval injected:DIR`.
    """
    from ..dag import load_dag
    from ..inject import InjectError, make_variants, parse_kinds, write_injection

    try:
        stage_list = [int(s) for v in stages for s in v.split(",") if s.strip()]
    except ValueError:
        raise InjectError(f"--stages takes stage numbers, got {' '.join(stages)!r}") from None
    dag = load_dag(dag_path)
    inj = make_variants(
        dag,
        n=n,
        seed=seed,
        kinds=parse_kinds(kinds),
        stages=stage_list or None,
        max_untouched=max_untouched,
    )
    manifest = write_injection(inj, out_dir, source_name=Path(dag_path).name)
    skipped = (
        "; not applicable: " + ", ".join(f"{k.value} at stage {s}" for k, s in inj.skipped)
        if inj.skipped
        else ""
    )
    if inj.not_applicable:
        skipped += "; left out: " + ", ".join(f"{k.value} ({why})" for k, why in inj.not_applicable)
    click.echo(
        f"{len(inj.variants)} variant(s) of {Path(dag_path).name} written to {out_dir} "
        f"(manifest {manifest.name}){skipped}"
    )
