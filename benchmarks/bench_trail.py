"""Long trails: one claim verified through a chain of N nodes, the whole `veritrail verify` command.

    python benchmarks/bench_trail.py                       # chains of 25,000 and 100,000 nodes
    python benchmarks/bench_trail.py --sizes 2000 8000     # quicker
    python benchmarks/bench_trail.py --html                # also write the HTML report

Each size gets its own chain DAG (`n0` the root → `n1` → … → the terminal `n{N-1}`, one sentence a
node, stages left to the loader), a claims file with one claim, and an oracle file that selects
sentence 0 of every node with every verdict Fully Supported, so the loop takes one iteration per
node and walks the whole chain down to the root; the provenance is one path of N - 1 nodes.

Every run is a separate `veritrail verify --oracle ... --cache off` process (the timing includes
interpreter start, loading, the loop, provenance, report building and writing, and the end-of-run
summary); its wall time and its own peak RSS (`os.wait4`) are printed, then the ratio of the
largest to the smallest size. Files go to a temporary directory that is removed afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CLAIM = "The chain of notes reaches its first entry."


def write_inputs(root: Path, n: int) -> tuple[Path, Path, Path]:
    """The chain DAG, the claims file and the oracle file for a chain of `n` nodes."""
    nodes = [{"id": "n0", "text": "Entry 0 is the first note of the chain."}]
    nodes += [
        {"id": f"n{i}", "text": f"Entry {i} repeats entry {i - 1}.", "sources": [f"n{i - 1}"]}
        for i in range(1, n)
    ]
    dag = root / f"chain{n}.json"
    dag.write_text(json.dumps({"nodes": nodes}), encoding="utf-8")
    claims = root / f"claims{n}.json"
    claims.write_text(json.dumps([{"id": "c1", "text": CLAIM}]), encoding="utf-8")
    oracle = root / f"oracle{n}.json"
    evidence = {f"n{i}": [0] for i in range(n - 1)}
    oracle.write_text(
        json.dumps(
            {"claims": [{"claim": CLAIM, "evidence": evidence, "verdicts": ["Fully Supported"]}]}
        ),
        encoding="utf-8",
    )
    return dag, claims, oracle


def run_one(root: Path, n: int, html: bool, quiet: bool) -> tuple[float, float, dict[str, object]]:
    """(wall seconds, peak RSS in MB, the claim's report entry) of one verify run."""
    dag, claims, oracle = write_inputs(root, n)
    out = root / f"report{n}.json"
    cmd = [
        sys.executable,
        "-c",
        "from veritrail.cli.main import main; main()",
        "verify",
        str(dag),
        "--claims",
        str(claims),
        "--oracle",
        str(oracle),
        "--cache",
        "off",
        "--out",
        str(out),
        "--runs-dir",
        str(root / "runs"),
    ]
    if html:
        cmd += ["--html", str(root / f"report{n}.html")]
    if quiet:
        cmd.append("--quiet")
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=root, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"verify exited {proc.returncode} for N = {n}")
    report = json.loads(out.read_text(encoding="utf-8"))
    claim = report["claims"][0]
    return wall, usage.ru_maxrss / 1024, claim


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[25_000, 100_000])
    ap.add_argument("--html", action="store_true", help="also write the HTML report")
    ap.add_argument("--quiet", action="store_true", help="pass --quiet (no end-of-run summary)")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench_trail_"))
    try:
        times: dict[int, float] = {}
        print(f"{'nodes':>9} {'wall s':>8} {'peak RSS MB':>12} {'iterations':>11} {'path len':>9}")
        for n in args.sizes:
            wall, rss, claim = run_one(root, n, args.html, args.quiet)
            iters = len(claim["iterations"])  # type: ignore[arg-type]
            prov = claim["provenance"]
            plen = len(prov[0]) if prov else 0  # type: ignore[index]
            times[n] = wall
            print(f"{n:>9,} {wall:>8.2f} {rss:>12.0f} {iters:>11,} {plen:>9,}", flush=True)
        lo, hi = min(times), max(times)
        if lo != hi:
            print(
                f"ratio {hi:,} / {lo:,} nodes: {times[hi] / times[lo]:.2f} (linear: {hi / lo:.2f})"
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
