"""The batch's own outputs: `batch-summary.json`, an HTML index of the reports, a table."""

from __future__ import annotations

import dataclasses
import html
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..redaction import redact_obj
from ..report import indented_json

SUMMARY_FORMAT = "veritrail-batch-summary"
SUMMARY_VERSION = 1
SUMMARY_FILE = "batch-summary.json"
INDEX_FILE = "batch-index.html"


@dataclass(frozen=True, slots=True)
class JobOutcome:
    """One job's line of the batch summary."""

    id: str
    status: str
    """"complete" (a report was written) or "incomplete" (claims without a result)."""
    claims: int
    verdicts: dict[str, int]
    errors: int
    missing: int
    unsupported_rate: float | None
    gate_failed: bool
    lm_calls: int
    out: str | None
    html: str | None
    run_dir: str
    failures: tuple[str, ...] = ()
    miscited: int | None = None
    """Claims misattributed or citing a source that does not support them (None: the job did
    not check citations, or wrote no report)."""
    miscited_gate_failed: bool = False
    """The job's `--max-miscited` gate failed (then `gate_failed` is true too)."""


def extraction_calls(run_dir: str | Path) -> int:
    """The model calls a job made extracting its claims (0 when its claims were given), from
    its run directory's `run.json` (`extra.extraction_cost`, where `veritrail verify` keeps them
    too). They count in the job's model calls, as in `verify`'s Cost table and the runs index,
    so the batch's progress line and its final line show one count."""
    from ..runs.files import RunDirError, load_run_json

    try:
        return load_run_json(run_dir).extraction_cost.lm_calls
    except RunDirError:  # no run directory: no calls
        return 0


def summary_document(
    outcomes: Sequence[JobOutcome],
    *,
    manifest: str,
    executor: str,
    exit_code: int,
    wall_seconds: float,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON summary: one entry per job, totals, the exit status of the batch. A job's
    `lm_calls` counts every model call of its run, claim extraction's included (and given
    apart as `extraction_calls`)."""
    verdicts: dict[str, int] = {}
    for o in outcomes:
        for k, v in o.verdicts.items():
            verdicts[k] = verdicts.get(k, 0) + v
    extraction = [extraction_calls(o.run_dir) for o in outcomes]
    jobs = [
        {
            **dataclasses.asdict(o),
            "lm_calls": o.lm_calls + ext,
            "extraction_calls": ext,
            "failures": list(o.failures),
        }
        for o, ext in zip(outcomes, extraction, strict=True)
    ]
    doc: dict[str, Any] = {
        "format": SUMMARY_FORMAT,
        "version": SUMMARY_VERSION,
        "manifest": manifest,
        "executor": executor,
        "exit_code": exit_code,
        "wall_seconds": round(wall_seconds, 3),
        "totals": {
            "jobs": len(outcomes),
            "complete": sum(o.status == "complete" for o in outcomes),
            "claims": sum(o.claims for o in outcomes),
            "verdicts": verdicts,
            "errors": sum(o.errors for o in outcomes),
            "missing": sum(o.missing for o in outcomes),
            "gates_failed": sum(o.gate_failed for o in outcomes),
            "miscited": sum(o.miscited or 0 for o in outcomes),
            "miscited_gates_failed": sum(o.miscited_gate_failed for o in outcomes),
            "lm_calls": sum(j["lm_calls"] for j in jobs),
            "extraction_calls": sum(extraction),
        },
        "jobs": jobs,
    }
    if extra:
        doc.update(extra)
    return redact_obj(doc)  # type: ignore[no-any-return]


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_summary(doc: Mapping[str, Any], path: Path) -> None:
    """Write `batch-summary.json` (atomically)."""
    _write_atomic(path, indented_json(doc))


def _pct(rate: float | None) -> str:
    return "-" if rate is None else f"{rate:.0%}"


def _gate(job: Mapping[str, Any]) -> str:
    """A job's gate cell: FAILED, and which gate when it was `--max-miscited`."""
    if not job["gate_failed"]:
        return ""
    return "FAILED (miscited)" if job.get("miscited_gate_failed") else "FAILED"


def write_index(doc: Mapping[str, Any], path: Path) -> None:
    """A static HTML page: one row per job, linking its HTML report (else its JSON report)."""
    e = html.escape
    rows = []
    for j in doc["jobs"]:
        target = j.get("html") or j.get("out")
        if target:
            href = os.path.relpath(Path(target).resolve(), path.parent.resolve())
            link = f'<a href="{e(Path(href).as_posix(), quote=True)}">report</a>'
        else:
            link = "incomplete: run the same command again"
        v = j["verdicts"]
        rows.append(
            "<tr>"
            f'<td class="id"><bdi>{e(j["id"])}</bdi></td><td>{e(j["status"])}</td>'
            f"<td>{j['claims']}</td><td>{v.get('Fully Supported', 0)}</td>"
            f"<td>{v.get('Not Fully Supported', 0)}</td><td>{v.get('Inconclusive', 0)}</td>"
            f"<td>{j['errors'] + j['missing']}</td><td>{_pct(j['unsupported_rate'])}</td>"
            f"<td>{e(_gate(j).lower())}</td><td>{link}</td>"
            "</tr>"
        )
    t = doc["totals"]
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>VeriTrail batch</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; }}
table {{ border-collapse: collapse; }}
td, th {{ border: 1px solid #ccc; padding: .3em .6em; }}
/* Only what has no break opportunity (job ids, the manifest path) may wrap anywhere; words in
   the other cells ("incomplete", "Inconclusive") are never split. */
td.id, code {{ overflow-wrap: anywhere; }}
th {{ background: #f3f3f3; }}
td:nth-child(n+3):nth-child(-n+8) {{ text-align: right; }}
</style></head><body>
<h1>VeriTrail batch</h1>
<p>Manifest <code>{e(str(doc["manifest"]))}</code>, executor {e(str(doc["executor"]))},
exit status {doc["exit_code"]}: {t["complete"]} of {t["jobs"]} jobs complete, {t["claims"]} claims,
{t["errors"] + t["missing"]} not verified.</p>
<table><thead><tr><th>job</th><th>status</th><th>claims</th><th>Fully Supported</th>
<th>Not Fully Supported</th><th>Inconclusive</th><th>not verified</th><th>unsupported</th>
<th>gate</th><th>report</th></tr></thead>
<tbody>
{chr(10).join(rows)}
</tbody></table></body></html>
"""
    _write_atomic(path, page)


def summary_table(doc: Mapping[str, Any]) -> str:
    """The plain-text table printed at the end of a batch."""
    lines = [
        f"{'job':<24} {'status':<10} {'claims':>7} {'FS':>6} {'NFS':>6} {'INC':>6} "
        f"{'errors':>7} {'unsup.':>7}  gate"
    ]
    for j in doc["jobs"]:
        v = j["verdicts"]
        lines.append(
            f"{j['id'][:24]:<24} {j['status']:<10} {j['claims']:>7} "
            f"{v.get('Fully Supported', 0):>6} {v.get('Not Fully Supported', 0):>6} "
            f"{v.get('Inconclusive', 0):>6} {j['errors'] + j['missing']:>7} "
            f"{_pct(j['unsupported_rate']):>7}  {_gate(j)}"
        )
    t = doc["totals"]
    ext = int(t.get("extraction_calls", 0))
    calls = f"{t['lm_calls']} model calls" + (f" ({ext} of them claim extraction)" if ext else "")
    cited = [j for j in doc["jobs"] if j.get("miscited") is not None]
    miscited = f", {sum(j['miscited'] for j in cited)} miscited" if cited else ""
    lines.append(
        f"{t['jobs']} jobs ({t['complete']} complete), {t['claims']} claims{miscited}, "
        f"{t['errors'] + t['missing']} not verified, {calls}; exit status {doc['exit_code']}"
    )
    return "\n".join(lines)
