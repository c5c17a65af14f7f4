"""The bootstrap confidence interval of `veritrail diff`: how much the unsupported share moved.

A run's unsupported share is the share of its claims whose verdict is Not Fully Supported (every
claim counts, errored ones included: the `--max-unsupported` rule of `veritrail.outcome`). The
difference B − A is estimated with a percentile bootstrap that keeps the pairing of the diff:

- a matched claim is one pair (its verdict in A, its verdict in B), resampled as a whole, so what
  the two runs share does not count twice as noise;
- a claim found in one run only is resampled among that run's unmatched claims.

Because a claim is only "unsupported or not", a resample of n pairs is a draw from a multinomial
over the four (A, B) outcomes, and a resample of unmatched claims a binomial draw. Drawing those
counts directly (exact inversion from the mode, `random.Random` with a fixed seed) costs
O(√n) per resample instead of O(n): 2,000 resamples of 5,000 claims take milliseconds, without
numpy, and the same inputs and seed give the same interval on every platform.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

DEFAULT_RESAMPLES = 2000
"""Bootstrap resamples (`--resamples`)."""

DEFAULT_SEED = 0
"""Seed of the bootstrap's `random.Random` (`--seed`)."""

CONFIDENCE = 0.95


@dataclass(frozen=True)
class Outcomes:
    """The counts the interval needs. `pairs[i][j]`: matched claims unsupported in A (i = 1) or
    not (i = 0) and in B (j = 1) or not (j = 0); `only_a`/`only_b`: unmatched claims of one run
    and how many of them are unsupported."""

    pairs: tuple[tuple[int, int], tuple[int, int]]
    only_a: int
    only_a_unsupported: int
    only_b: int
    only_b_unsupported: int

    @property
    def total_a(self) -> int:
        """Claims of run A."""
        return sum(self.pairs[0]) + sum(self.pairs[1]) + self.only_a

    @property
    def total_b(self) -> int:
        """Claims of run B."""
        return sum(self.pairs[0]) + sum(self.pairs[1]) + self.only_b

    def shares(self) -> tuple[float | None, float | None]:
        """The unsupported share of A and of B (None for a run with no claims)."""
        (_, p01), (p10, p11) = self.pairs
        a = (p10 + p11 + self.only_a_unsupported) / self.total_a if self.total_a else None
        b = (p01 + p11 + self.only_b_unsupported) / self.total_b if self.total_b else None
        return a, b


@dataclass(frozen=True)
class ShareDifference:
    """Unsupported shares of both runs and the bootstrap interval of B − A."""

    share_a: float | None
    share_b: float | None
    difference: float | None
    low: float | None
    high: float | None
    confidence: float
    resamples: int
    seed: int

    def to_json(self) -> dict[str, object]:
        """The `share` object of the diff document."""
        return {
            "a": _round(self.share_a),
            "b": _round(self.share_b),
            "difference": _round(self.difference),
            "ci_low": _round(self.low),
            "ci_high": _round(self.high),
            "confidence": self.confidence,
            "resamples": self.resamples,
            "seed": self.seed,
            "method": "percentile bootstrap; matched claims resampled as pairs, "
            "unmatched claims within their own run",
        }


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 6)


def binomial(rng: random.Random, n: int, p: float) -> int:
    """One Binomial(n, p) draw by exact inversion, searching outward from the mode.

    Each outcome k is returned with probability C(n,k) p^k (1-p)^(n-k): the unit interval is cut
    into the outcomes' probabilities in the order mode, mode+1, mode-1, mode+2, ... and the
    uniform draw picks one. Expected steps grow as √(n p (1-p)).
    """
    if n <= 0 or p <= 0.0:
        return 0
    if p >= 1.0:
        return n
    q = 1.0 - p
    mode = min(n, int((n + 1) * p))
    log_pm = (
        math.lgamma(n + 1)
        - math.lgamma(mode + 1)
        - math.lgamma(n - mode + 1)
        + mode * math.log(p)
        + (n - mode) * math.log(q)
    )
    pm = math.exp(log_pm)
    u = rng.random() - pm
    if u <= 0.0:
        return mode
    ratio = p / q
    lo = hi = mode
    p_lo = p_hi = pm
    while lo > 0 or hi < n:
        if hi < n:
            p_hi *= (n - hi) / (hi + 1) * ratio
            hi += 1
            u -= p_hi
            if u <= 0.0:
                return hi
        if lo > 0:
            p_lo *= lo / ((n - lo + 1) * ratio)
            lo -= 1
            u -= p_lo
            if u <= 0.0:
                return lo
    return mode  # rounding left a sliver of the interval unassigned: give it to the mode


def multinomial(rng: random.Random, n: int, counts: Sequence[int]) -> list[int]:
    """One draw of n items over categories in proportion to `counts` (sequential binomials)."""
    out: list[int] = []
    left_n, left_w = n, sum(counts)
    for c in counts[:-1]:
        k = binomial(rng, left_n, c / left_w) if left_w else 0
        out.append(k)
        left_n -= k
        left_w -= c
    out.append(left_n)
    return out


def _percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between order statistics (numpy's default method)."""
    pos = q * (len(sorted_values) - 1)
    i = math.floor(pos)
    j = min(i + 1, len(sorted_values) - 1)
    return sorted_values[i] + (sorted_values[j] - sorted_values[i]) * (pos - i)


def share_difference(
    outcomes: Outcomes,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = CONFIDENCE,
) -> ShareDifference:
    """The two shares, B − A, and its percentile bootstrap interval (see the module docstring)."""
    share_a, share_b = outcomes.shares()
    if share_a is None or share_b is None or resamples <= 0:
        diff = None if share_a is None or share_b is None else share_b - share_a
        return ShareDifference(
            share_a, share_b, diff, None, None, confidence, max(resamples, 0), seed
        )
    rng = random.Random(seed)
    (p00, p01), (p10, p11) = outcomes.pairs
    n_pairs = p00 + p01 + p10 + p11
    ta, tb = outcomes.total_a, outcomes.total_b
    pa = outcomes.only_a_unsupported / outcomes.only_a if outcomes.only_a else 0.0
    pb = outcomes.only_b_unsupported / outcomes.only_b if outcomes.only_b else 0.0
    draws: list[float] = []
    for _ in range(resamples):
        _, m01, m10, m11 = multinomial(rng, n_pairs, (p00, p01, p10, p11))
        ka = binomial(rng, outcomes.only_a, pa)
        kb = binomial(rng, outcomes.only_b, pb)
        draws.append((m01 + m11 + kb) / tb - (m10 + m11 + ka) / ta)
    draws.sort()
    tail = (1.0 - confidence) / 2.0
    return ShareDifference(
        share_a,
        share_b,
        share_b - share_a,
        _percentile(draws, tail),
        _percentile(draws, 1.0 - tail),
        confidence,
        resamples,
        seed,
    )


__all__ = [
    "CONFIDENCE",
    "DEFAULT_RESAMPLES",
    "DEFAULT_SEED",
    "Outcomes",
    "ShareDifference",
    "binomial",
    "multinomial",
    "share_difference",
]
