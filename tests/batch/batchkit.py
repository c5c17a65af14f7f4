"""Shared pieces of the batch tests: small DAGs, claims, a deterministic model, manifests."""

from __future__ import annotations

import json
import threading
from collections import Counter
from pathlib import Path
from typing import Any

# The deterministic model of the resume tests (tests/ is on sys.path through its conftest).
from runkit import fenced, responder
from veritrail.dag import Dag, save_dag
from veritrail.run.store import RESULTS_FILE

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart"


def build_dag(n: int = 8) -> Dag:
    """Chunks → summaries → final output: several iterations and prompts per claim."""
    recs: list[dict[str, object]] = [
        {
            "id": f"r{i}",
            "text": f"Chunk {i} says item {i} costs {i + 1} dollars. It was sold in town {i}.",
        }
        for i in range(n)
    ]
    recs += [
        {
            "id": f"m{j}",
            "text": f"Summary {j}: items {2 * j} and {2 * j + 1} were sold.",
            "sources": [f"r{2 * j}", f"r{2 * j + 1}"],
        }
        for j in range(n // 2)
    ]
    recs.append(
        {
            "id": "t",
            "text": "All items were sold. Item 3 costs 4 dollars. Item 9 was lost.",
            "sources": [f"m{j}" for j in range(n // 2)],
        }
    )
    return Dag.from_records(recs)


def claims(k: int) -> list[str]:
    """`k` claims; the last one ("Item 9 was lost.") is Not Fully Supported."""
    return [f"Item {i % 8} costs {i % 8 + 1} dollars, as listed ({i})." for i in range(k - 1)] + [
        "Item 9 was lost."
    ]


def claim_of(request: dict[str, Any]) -> str:
    """The claim a request is about ("" when it cannot be told)."""
    msgs = request.get("messages") or []
    if not msgs:
        return ""
    user = msgs[-1]["content"]
    return fenced(user, "claim") or fenced(user, "statement")


class HeldResponder:
    """`responder`, except that requests about a claim containing `marker` wait until
    `release()` (so a test decides when those claims can finish; no sleeps)."""

    def __init__(self, marker: str) -> None:
        self.marker = marker
        self.gate = threading.Event()

    def __call__(self, request: dict[str, Any]) -> str:
        if self.marker in claim_of(request):
            self.gate.wait(timeout=120)
        return responder(request)

    def release(self) -> None:
        self.gate.set()


def write_jobs(
    tmp: Path,
    n_jobs: int,
    n_claims: int,
    *,
    oracle: bool = False,
    settings: dict[str, Any] | None = None,
    name: str = "manifest.jsonl",
) -> Path:
    """DAG and claims files for `n_jobs` jobs (job k has `n_claims + k` claims) and a manifest."""
    inputs = tmp / "inputs"
    inputs.mkdir(exist_ok=True)
    lines = []
    for k in range(n_jobs):
        if oracle:
            dag, cl, orc = (
                QUICKSTART / "dag.json",
                QUICKSTART / "claims.json",
                QUICKSTART / "oracle.json",
            )
        else:
            dag = inputs / f"dag{k}.json"
            save_dag(build_dag(8 + 2 * k), dag)
            cl = inputs / f"claims{k}.json"
            cl.write_text(json.dumps(claims(n_claims + k)))
        job: dict[str, Any] = {"id": f"job{k}", "dag": str(dag), "claims": str(cl)}
        job["out"] = f"reports/job{k}.json"
        if oracle:
            job["oracle"] = str(orc)
            job["settings"] = {"q": 1 + k % 3}  # distinct runs of the same inputs
        if settings:
            job["settings"] = {**job.get("settings", {}), **settings}
        lines.append(json.dumps(job))
    path = tmp / name
    path.write_text("\n".join(lines) + "\n")
    return path


def recorded_ids(runs: Path) -> Counter[tuple[str, str]]:
    """(run directory, claim id) → lines in results.jsonl, over every run directory."""
    out: Counter[tuple[str, str]] = Counter()
    for f in runs.glob(f"*/{RESULTS_FILE}"):
        for line in f.read_text().splitlines():
            if line.strip():
                out[(f.parent.name, json.loads(line)["id"])] += 1
    return out
