"""How the trace importer matches texts: `MatchSettings` and its defaults (docs/adapters.md,
"Traces")."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_THRESHOLD = 90.0
"""Default fuzzy-match score (see docs/adapters.md for how it was chosen)."""


@dataclass(frozen=True, slots=True)
class MatchSettings:
    """How texts are matched into generation inputs."""

    threshold: float = DEFAULT_THRESHOLD
    """Minimum rapidfuzz ``partial_ratio`` (0–100) for a sentence to count as present."""
    min_fuzzy_words: int = 4
    """Sentences shorter than this are never fuzzy-matched (too easy to find by chance)."""
    min_root_words: int = 2
    """Chain-input leaves with fewer words are not roots (ids, flags, one-word parameters)."""
    fuzzy: bool = True
    """False: containment only."""
    prefilter: bool = True
    """Rule out, by their distinctive words, the node × generation pairs that cannot match and
    the sentences too altered to reach the threshold (`Matcher`; docs/adapters.md, "Speed").
    False (``--no-prefilter``) compares everything."""

    def __post_init__(self) -> None:
        if not 0 < self.threshold <= 100:
            raise ValueError("threshold must be in (0, 100]")
        if self.min_fuzzy_words < 1 or self.min_root_words < 1:
            raise ValueError("word minimums must be >= 1")


__all__ = ["DEFAULT_THRESHOLD", "MatchSettings"]
