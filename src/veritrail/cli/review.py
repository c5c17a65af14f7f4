"""`veritrail review RUN_DIR CLAIM_ID --verdict V --reason TEXT`: a person's verdict on a claim,
appended to the run directory's reviews.jsonl; the run's reports show it (docs/runs.md)."""

from __future__ import annotations

import json

import click

from ..runs.reviews import VERDICT_WORDS


@click.command("review")
@click.argument("run_dir", type=click.Path(file_okay=False, exists=True))
@click.argument("claim_id")
@click.option(
    "--verdict",
    required=True,
    help=f"{', '.join(VERDICT_WORDS)}, or a verdict as reports spell it ('Fully Supported').",
)
@click.option("--reason", required=True, help="Why (required; kept with the review).")
@click.option("--author", default=None, help="Who [default: the operating system's user].")
@click.option(
    "--stage",
    type=click.IntRange(min=1),
    default=None,
    help="The stage where the unsupported content entered (checked against the run's DAG).",
)
@click.option(
    "--node",
    default=None,
    help="The node it entered at (a node of the run's DAG; of --stage when both are given).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the review as JSON.")
def review(
    run_dir: str,
    claim_id: str,
    verdict: str,
    reason: str,
    author: str | None,
    stage: int | None,
    node: str | None,
    as_json: bool,
) -> None:
    """Review claim CLAIM_ID of the run in RUN_DIR.

    The review (verdict, reason, author, time in UTC) is appended to RUN_DIR/reviews.jsonl,
    which keeps every review; a claim's latest review is its effective one. The run's
    report.json gets the claim's `review` object (the model's verdict stays) and report.html is
    rendered again. A resume, a re-run of the same command and `veritrail runs reindex` keep
    it. --stage and --node correct where the unsupported content entered (the diff and the
    reports use them as the claim's). Exit status: 0, or 2 for an unknown run directory or
    claim, a bad verdict or reason, or a stage or node the run's DAG does not have.
    """
    from ..runs.reviewing import add_review, update_run_reports

    got = add_review(
        run_dir,
        claim_id,
        verdict,
        reason,
        author=author,
        update_reports=False,
        stage=stage,
        node=node,
    )
    update = update_run_reports(run_dir)
    if as_json:
        click.echo(json.dumps(got.to_json(), ensure_ascii=False))
        return
    model = got.model_verdict or "no verdict"
    where = ""
    if got.error_stage is not None:
        where = f", error stage {got.error_stage}" + (
            f", node {', '.join(got.nodes)}" if got.nodes else ""
        )
    from ..display import printable

    click.echo(  # names from outside, escaped: no terminal control reaches the screen
        printable(
            f"{claim_id}: model {model}, reviewed {got.verdict.value}{where} by {got.author} "
            f"({got.time})"
        )
    )
    if update.busy:
        click.echo("the run is in progress: its reports will show the review when it ends")
    elif update.written:
        click.echo("updated " + ", ".join(p.name for p in update.written))
