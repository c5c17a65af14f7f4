"""Load + validate cost of `veritrail dag validate` against a bare json.load + topological sort.

    python benchmarks/bench_load.py /tmp/vtb/graphrag.json [--repeat 3]

Each measurement is a fresh subprocess; wall time is measured around the process and peak RSS
comes from `os.wait4` (the child's own ru_maxrss). Runs alternate (baseline, veritrail, …) so a
busy machine hits both alike; the median of `--repeat` runs is reported with the ratios against
the issue-7 target (≤ 3× time, ≤ 4× peak memory).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# The baseline: what any program must at least do to read the file and order the nodes.
BASELINE = r"""
import json, sys
with open(sys.argv[1], "rb") as fh:
    doc = json.load(fh)
nodes = doc["nodes"] if isinstance(doc, dict) else doc
children = {n["id"]: [] for n in nodes}
indeg = {n["id"]: len(n.get("sources", ())) for n in nodes}
for n in nodes:
    for s in n.get("sources", ()):
        children[s].append(n["id"])
order = [k for k, d in indeg.items() if d == 0]
i = 0
while i < len(order):
    for c in children[order[i]]:
        indeg[c] -= 1
        if indeg[c] == 0:
            order.append(c)
    i += 1
assert len(order) == len(nodes)
"""

# Same baseline for JSON Lines (one json.loads per line).
BASELINE_JSONL = BASELINE.replace(
    'with open(sys.argv[1], "rb") as fh:\n    doc = json.load(fh)',
    'with open(sys.argv[1], encoding="utf-8") as fh:\n    doc = [json.loads(l) for l in fh if l.strip()]',
)

PYAPI = "import sys; from veritrail.dag import load_dag; load_dag(sys.argv[1])"

# load_dag() of dag.py as it was at a git revision (its imports are the standard library only).
AT_REV = r"""
import importlib.util, sys
spec = importlib.util.spec_from_file_location("dag_at_rev", sys.argv[2])
mod = importlib.util.module_from_spec(spec)
sys.modules["dag_at_rev"] = mod
spec.loader.exec_module(mod)
mod.load_dag(sys.argv[1])
"""


def veritrail_exe() -> list[str]:
    """The installed console script next to this interpreter (no pyenv shim in the way)."""
    here = Path(sys.executable).parent / "veritrail"
    if here.exists():
        return [str(here)]
    found = shutil.which("veritrail")
    if found is None:
        raise SystemExit("veritrail is not installed (pip install -e .)")
    return [found]


def run(cmd: list[str]) -> tuple[float, float, int]:
    """(wall seconds, peak RSS in MB, exit status) of one subprocess."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.returncode not in (0,):
        print(f"  ! {' '.join(cmd[:3])} … exited {proc.returncode}: {err.strip()[:300]}")
    return wall, usage.ru_maxrss / 1024, proc.returncode


def main(argv: list[str] | None = None) -> None:
    """Command line: see the module docstring."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("file", type=Path)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--python-api", action="store_true", help="also time load_dag() alone")
    ap.add_argument(
        "--compare-ref",
        metavar="REV",
        help="also time load_dag() of src/veritrail/dag.py at this git revision",
    )
    a = ap.parse_args(argv)
    path = str(a.file)
    base_src = BASELINE_JSONL if path.endswith((".jsonl", ".ndjson")) else BASELINE
    cases: dict[str, list[str]] = {
        "baseline json+toposort": [sys.executable, "-c", base_src, path],
        "veritrail dag validate": [*veritrail_exe(), "dag", "validate", path],
    }
    if a.python_api:
        cases["python load_dag()"] = [sys.executable, "-c", PYAPI, path]
    if a.compare_ref:
        old = Path(tempfile.mkdtemp()) / "dag_at_rev.py"
        repo = Path(__file__).resolve().parents[1]
        src = subprocess.run(
            ["git", "-C", str(repo), "show", f"{a.compare_ref}:src/veritrail/dag.py"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        old.write_text(src, encoding="utf-8")
        cases[f"load_dag() at {a.compare_ref}"] = [sys.executable, "-c", AT_REV, path, str(old)]
    results: dict[str, list[tuple[float, float]]] = {k: [] for k in cases}
    for _ in range(a.repeat):
        for name, cmd in cases.items():
            wall, rss, _ = run(cmd)
            results[name].append((wall, rss))
    size = a.file.stat().st_size / 1e6
    print(f"{a.file} ({size:.1f} MB), median of {a.repeat} runs")
    med = {
        k: (statistics.median(w for w, _ in v), statistics.median(r for _, r in v))
        for k, v in results.items()
    }
    bw, br = med["baseline json+toposort"]
    for name, (w, r) in med.items():
        print(f"  {name:<24} {w:6.2f} s  {r:7.1f} MB   ×{w / bw:4.2f} time  ×{r / br:4.2f} memory")
    vw, vr = med["veritrail dag validate"]
    ok = vw <= 3 * bw and vr <= 4 * br
    print(f"  target ≤3× time, ≤4× memory: {'MET' if ok else 'NOT MET'}")


if __name__ == "__main__":
    main()
