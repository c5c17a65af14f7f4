"""The CI scale guards' workloads (tests/test_scale_guards.py) at full size: CPU and wall time at
two sizes 4x apart, and their ratio (linear 4, quadratic 16).

    python benchmarks/bench_scale.py                      # every workload at 10x its CI size
    python benchmarks/bench_scale.py --scale 25 --only "load_dag of a DAG file"

The workloads are imported from the test module, so the benchmark and its CI guard time the same
code; the guard runs each at its small size and 4x that, this script at `--scale` times both.
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from test_scale_guards import WORKLOADS


def timed(work: object) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one run, collector on as in a real run."""
    gc.collect()
    c0, w0 = time.process_time(), time.perf_counter()
    work()  # type: ignore[operator]
    return time.process_time() - c0, time.perf_counter() - w0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=int, default=10, help="times the CI guard's sizes (10)")
    ap.add_argument("--only", action="append", choices=list(WORKLOADS))
    args = ap.parse_args()
    print(f"{'workload':<55} {'n':>9} {'CPU s':>8} {'wall s':>8}")
    with tempfile.TemporaryDirectory(prefix="bench_scale_") as tmp:
        for name in args.only or list(WORKLOADS):
            make, small, _ = WORKLOADS[name]
            cpu: list[float] = []
            for n in (small * args.scale, small * args.scale * 4):
                c, w = timed(make(n, Path(tmp)))
                cpu.append(c)
                print(f"{name:<55} {n:>9,} {c:>8.2f} {w:>8.2f}", flush=True)
            print(f"{'':<55} {'ratio':>9} {cpu[1] / max(cpu[0], 1e-3):>8.2f}", flush=True)


if __name__ == "__main__":
    main()
