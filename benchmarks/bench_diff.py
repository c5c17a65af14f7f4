"""`veritrail diff` of two 5,000-claim runs: the promise is ≤ 2 s (benchmarks/README.md).

    python benchmarks/bench_diff.py                  # 5,000 claims a run, 3 repetitions
    python benchmarks/bench_diff.py --claims 20000 --repeat 1
    python benchmarks/bench_diff.py --view          # also `veritrail view`'s list page

`--view`: the list page of `veritrail view` over an index of 1,000 runs of 50 claims
(tests/runsynth.py, as benchmarks/bench_runs.py writes them): the server's time for `GET /`
(refresh, query, the trend chart of every run, the page), through Starlette's TestClient; the
issue's goal is <= 200 ms.

The two reports come from `tests/test_scale_guards.py:diff_reports` (the CI guard's workload,
`test_grows_linearly[veritrail diff of two runs]`): every claim with two iterations of evidence
and a provenance path; in B 5% of verdicts flipped, 10% of claims with other evidence, 1%
reworded, 2% sharing a text. Timed: the whole command as a user runs it, a fresh
`veritrail diff A.json B.json --json --html --max-new-unsupported 0` process (interpreter start
and imports included), and the same work in-process, split into its parts.
"""

from __future__ import annotations

import argparse
import io
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from rich.console import Console

from test_scale_guards import diff_reports
from veritrail.report import indented_json
from veritrail.runs.diff import compare, diff_document, load_side
from veritrail.runs.diffhtml import render_diff_html
from veritrail.runs.difftable import diff_tables

ENTRY = "from veritrail.cli.main import main; main()"
"""What the `veritrail` console script runs."""


def parts(a: Path, b: Path) -> dict[str, float]:
    """Wall seconds of each part of the diff, in-process."""
    out: dict[str, float] = {}
    t = time.perf_counter()
    sa, sb = load_side(a, label="A"), load_side(b, label="B")
    out["read both reports"] = time.perf_counter() - t
    t = time.perf_counter()
    d = compare(sa, sb)
    out["match + bootstrap (2,000)"] = time.perf_counter() - t
    t = time.perf_counter()
    doc = diff_document(d, max_new_unsupported=0)
    indented_json(doc)
    out["JSON document"] = time.perf_counter() - t
    t = time.perf_counter()
    render_diff_html(doc)
    out["HTML page"] = time.perf_counter() - t
    t = time.perf_counter()
    Console(width=160, file=io.StringIO()).print(diff_tables(d))
    out["terminal tables"] = time.perf_counter() - t
    out["total in-process"] = sum(out.values())
    return out


def list_page(runs: int, claims: int, repeat: int) -> None:
    """Server time of the view's list page over an index of `runs` runs of `claims` claims."""
    from starlette.testclient import TestClient

    from runsynth import write_run
    from veritrail.runs.index import open_index
    from veritrail.runs.view.app import create_app
    from veritrail.runs.view.safety import Guard

    with tempfile.TemporaryDirectory(prefix="bench_view_") as tmp:
        root = Path(tmp) / "runs"
        root.mkdir()
        base = time.time() - runs * 3600
        dags = ("summary", "qa", "graph")
        for i in range(runs):
            write_run(
                root,
                f"{dags[i % 3]}-{i:012x}",
                claims=claims,
                seed=i,
                created=base + i * 3600,
                model=("openai/gpt-4o-mini", "local/qwen")[i % 2],
                dag_name=dags[i % 3],
            )
        with open_index(root) as index:
            index.refresh()

            def client() -> TestClient:
                app = create_app(index, Guard.create(None))
                return TestClient(app, base_url="http://127.0.0.1")

            warm = client()
            assert warm.get("/").status_code == 200  # templates compiled
            cases = (
                # A new app refreshes the index on its first list page (then every 2 s).
                ("list page, index refreshed", lambda: client().get("/")),
                ("list page, reload", lambda: warm.get("/")),
                ("list page, one DAG, reload", lambda: warm.get("/?dag=qa")),
            )
            for label, get in cases:
                times = []
                for _ in range(repeat):
                    t = time.perf_counter()
                    r = get()
                    times.append(time.perf_counter() - t)
                    assert r.status_code == 200
                print(
                    f"  {label:<28} {1000 * statistics.median(times):7.1f} ms median, "
                    f"{1000 * min(times):.1f} ms best of {repeat} ({runs:,} runs x {claims})"
                )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--claims", type=int, default=5000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--view", action="store_true", help="also time the view's list page")
    args = ap.parse_args()
    if args.view:
        list_page(1000, 50, max(args.repeat, 5))
    with tempfile.TemporaryDirectory(prefix="bench_diff_") as tmp:
        a, b = Path(tmp) / "a.json", Path(tmp) / "b.json"
        ra, rb = diff_reports(args.claims)
        a.write_text(indented_json(ra), encoding="utf-8")
        b.write_text(indented_json(rb), encoding="utf-8")
        mb = (a.stat().st_size + b.stat().st_size) / 1e6
        print(f"{args.claims:,} claims a run; reports {mb:.1f} MB together")
        runs = [parts(a, b) for _ in range(args.repeat)]
        for key in runs[0]:
            print(f"  {key:<28} {min(r[key] for r in runs):7.3f} s (best of {args.repeat})")
        walls = []
        for _ in range(args.repeat):
            cmd = [sys.executable, "-c", ENTRY, "diff", str(a), str(b), "-q"]
            cmd += ["--json", f"{tmp}/d.json", "--html", f"{tmp}/d.html"]
            cmd += ["--max-new-unsupported", "0"]
            t = time.perf_counter()
            res = subprocess.run(cmd, capture_output=True, text=True, check=False)
            walls.append(time.perf_counter() - t)
            assert res.returncode == 1, res.stderr  # B has newly unsupported claims
        print(
            f"  {'veritrail diff (process)':<28} {min(walls):7.3f} s best, "
            f"{statistics.median(walls):.3f} s median of {args.repeat}"
        )


if __name__ == "__main__":
    main()
