"""Scale guards that cannot flake: CPU time at two sizes, compared as a ratio.

Every scale figure the project states (benchmarks/README.md, "Promises") has a check in the test
suite built on `assert_linear`: the same work at a size `n` and at `4 n`, timed with
`time.process_time` (CPU time of this process, so another process on the machine slows neither
size), best of a few repetitions. Linear work grows 4x between the two sizes and quadratic work
16x; the bound (`LINEAR_BOUND`, 8) sits between them with room on both sides, and constant
overheads only lower the ratio. The full-size figures stay in `benchmarks/`.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

SIZE_RATIO = 4
"""The large size is this many times the small one: linear 4x, quadratic 16x."""

LINEAR_BOUND = 8.0
"""The largest CPU-time ratio accepted between the two sizes (geometric middle of 4 and 16)."""


def cpu_seconds(work: Callable[[], object], *, repeat: int = 3) -> float:
    """The least CPU time (`time.process_time`) of `repeat` runs of `work`, with the garbage
    collector paused while it runs.

    The collector is left out because its full collections come in steps (a pass over every
    live object each time the survivors grow by a quarter), so whether one falls inside the
    small size's run or not moves the ratio by 1.5-2x at these sizes; the benchmarks, run at
    full size, keep its share in their figures.
    """
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        gc.disable()
        try:
            t0 = time.process_time()
            work()
            best = min(best, time.process_time() - t0)
        finally:
            gc.enable()
    return best


def assert_linear(
    what: str,
    make: Callable[[int], Callable[[], object]],
    small: int,
    *,
    repeat: int = 3,
    bound: float = LINEAR_BOUND,
) -> tuple[float, float]:
    """Fail when `what` costs more than `bound` times as much CPU at `SIZE_RATIO * small` as at
    `small`. `make(n)` prepares the inputs of size `n` (not timed) and returns the work to time.
    Returns the two CPU times, for the message of a caller that wants to say more."""
    large = small * SIZE_RATIO
    lo = cpu_seconds(make(small), repeat=repeat)
    hi = cpu_seconds(make(large), repeat=repeat)
    ratio = hi / max(lo, 1e-3)
    print(f"{what}: {lo:.3f} s at {small:,}, {hi:.3f} s at {large:,}, ratio {ratio:.2f}")
    assert ratio <= bound, (
        f"{what}: {hi:.3f} s CPU at {large:,} against {lo:.3f} s at {small:,}: ratio "
        f"{ratio:.1f} (linear {SIZE_RATIO}, quadratic {SIZE_RATIO**2}, bound {bound}); "
        "something grew faster than linearly"
    )
    return lo, hi
