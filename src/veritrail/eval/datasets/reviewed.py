"""Reviewed runs as a dataset: ``veritrail eval reviewed:PATH`` (docs/runs.md).

PATH is one run directory or a runs directory (its run directories, as `veritrail runs` finds
them). Every claim a person reviewed (`veritrail review`) is a labelled claim whose gold label
is its effective (latest) reviewed verdict; the run's DAG (the file named in run.json) is the
item's DAG, so methods can be run on the claims; and the verdict the run's own model gave is
kept in the claim's meta (`MODEL_VERDICT`), for the judge–human agreement of `eval.agreement`.
Claims nobody reviewed are left out.

The run directories are read through `veritrail.runs` (never the run layer).
"""

from __future__ import annotations

from pathlib import Path

from ...records import GoldClaim
from ...runs.files import RunDirError, find_run_dirs, read_run_dir
from .format import DatasetError, EvalDataset, EvalItem

REVIEWED_SOURCE = "reviewed"
"""`EvalDataset.meta["source"]` of a dataset read from reviewed runs."""

MODEL_VERDICT = "model_verdict"
"""The key of `GoldClaim.meta` holding the run's own verdict (None: the claim had none)."""


def reviewed_dataset(path: str | Path) -> EvalDataset:
    """The reviewed claims of the run directories at `path` (`DatasetError` when there is no
    run there, or no reviewed claim)."""
    base = Path(path)
    if not base.is_dir():
        raise DatasetError(f"reviewed:{base}: not a directory (a run directory or runs directory)")
    dirs = find_run_dirs(base)
    if not dirs:
        raise DatasetError(f"reviewed:{base}: no run directory there")
    items: list[EvalItem] = []
    for d in dirs:
        try:
            rec = read_run_dir(d)
        except RunDirError as exc:
            raise DatasetError(f"reviewed:{base}: {exc}") from None
        claims = tuple(
            GoldClaim(
                id=c.claim_id,
                text=c.text,
                label=c.review.latest.verdict,
                sentence_indices=c.sentence_indices,
                meta={
                    MODEL_VERDICT: c.verdict,
                    "reviews": c.review.count,
                    "author": c.review.latest.author,
                },
            )
            for c in rec.claims
            if c.review is not None
        )
        if not claims:
            continue
        item_id = d.name if d == base else d.relative_to(base).as_posix()
        items.append(
            EvalItem(
                id=item_id,
                claims=claims,
                dag_paths=(rec.dag_path,) if rec.dag_path else (),
                meta={"run_dir": str(d), "model": rec.model},
            )
        )
    if not items:
        raise DatasetError(
            f"reviewed:{base}: no reviewed claim in {len(dirs)} run(s); review claims with "
            "`veritrail review RUN_DIR CLAIM_ID --verdict ... --reason ...`"
        )
    return EvalDataset(
        f"reviewed-{base.resolve().name}",
        items,
        {"source": REVIEWED_SOURCE, "runs": len(dirs), "reviewed_runs": len(items)},
    )


__all__ = ["MODEL_VERDICT", "REVIEWED_SOURCE", "reviewed_dataset"]
