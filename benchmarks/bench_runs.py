"""The index of runs at the issue's size: 1,000 runs of 50 claims (benchmarks/README.md,
"Promises").

    python benchmarks/bench_runs.py                 # SQLite
    python benchmarks/bench_runs.py --postgres      # and a PostgreSQL server (tests/pgkit.py)

The run directories are written by tests/runsynth.py with the real writers (`RunStore`,
`build_report`). Timed: the list page's query (`RunIndex.list_runs` of every run, goal
<= 200 ms) and what a list page does before it (`refresh` with nothing changed: a `stat` of each
run's files), one run's claims (`run_claims`), and `reindex` at two sizes 4x apart (linear: a
ratio near 4; tests/test_scale_guards.py guards it in CI at a smaller size).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from runsynth import write_run
from veritrail.runs import open_index


def median_ms(work: Callable[[], object], reps: int) -> float:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        work()
        times.append(time.perf_counter() - t0)
    return 1000 * statistics.median(times)


def timed(work: Callable[[], object]) -> tuple[float, float]:
    c0, w0 = time.process_time(), time.perf_counter()
    work()
    return time.process_time() - c0, time.perf_counter() - w0


def make_runs(root: Path, n: int, claims: int) -> None:
    t0 = time.perf_counter()
    root.mkdir(parents=True)
    base = time.time() - n * 3600
    for i in range(n):
        write_run(
            root,
            f"{('summary', 'qa', 'graph')[i % 3]}-{i:012x}",
            claims=claims,
            seed=i,
            created=base + i * 3600,
            model=("openai/gpt-4o-mini", "local/qwen")[i % 2],
            dag_name=("summary", "qa", "graph")[i % 3],
        )
    print(f"wrote {n:,} runs x {claims} claims in {time.perf_counter() - t0:.1f} s", flush=True)


def bench(label: str, small: Path, large: Path, n_small: int, n_large: int, db: str | None) -> None:
    print(f"\n[{label}]")
    cpu = []
    for root, n in ((small, n_small), (large, n_large)):
        with open_index(root, db) as index:
            index.reindex()  # warm: the files in the page cache, the tables created
            c, w = timed(index.reindex)
            cpu.append(c)
            print(f"reindex {n:>6,} runs: {w:6.2f} s wall, {c:6.2f} s CPU", flush=True)
    print(f"reindex CPU ratio ({n_large // n_small}x the runs): {cpu[1] / max(cpu[0], 1e-3):.2f}")
    with open_index(large, db) as index:
        rows = index.list_runs()
        assert len(rows) == n_large
        one = rows[0].id
        print(f"list_runs ({n_large:,} runs), median: {median_ms(index.list_runs, 21):7.1f} ms")
        print(
            f"list_runs, 50 a page, median:    {median_ms(lambda: index.list_runs(limit=50), 21):7.1f} ms"
        )
        print(f"refresh, nothing changed, median: {median_ms(index.refresh, 11):7.1f} ms")
        page = median_ms(lambda: (index.refresh(), index.list_runs()), 11)
        print(f"list page (refresh + list_runs): {page:7.1f} ms")
        print(
            f"run_claims (one run), median:     {median_ms(lambda: index.run_claims(one), 21):7.1f} ms"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--claims", type=int, default=50)
    ap.add_argument("--postgres", action="store_true", help="also on a PostgreSQL server")
    args = ap.parse_args()
    n_small = args.runs // 4
    with tempfile.TemporaryDirectory(prefix="bench_runs_") as tmp:
        large = Path(tmp) / "runs"
        make_runs(large, args.runs, args.claims)
        small = Path(tmp) / "small" / "runs"
        small.mkdir(parents=True)
        for d in sorted(p for p in large.iterdir() if p.is_dir())[:n_small]:
            shutil.copytree(d, small / d.name)
        bench("SQLite", small, large, n_small, args.runs, None)
        if args.postgres:
            from pgkit import start_postgres

            server = start_postgres()
            try:
                bench("PostgreSQL", small, large, n_small, args.runs, server.url())
            finally:
                server.stop()


if __name__ == "__main__":
    main()
