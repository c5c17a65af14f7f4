"""Settings of the verification loop (SPEC §4). Defaults follow the paper where it gives one."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class VerifyConfig:
    """Loop settings. Limits of `None` mean "no limit of that kind"."""

    q: int = 3
    """Stop after this many consecutive Not Fully Supported verdicts (paper: 1 and 3)."""
    max_decomposition_calls: int = 20
    evidence_sentences_root: int = 40
    evidence_sentences_nonroot: int = 40
    evidence_tokens_root: int | None = None
    evidence_tokens_nonroot: int | None = None
    verdict_sentences: int | None = 200
    """Verdict input limit in sentences, applied when no root node's full text is included."""
    verdict_tokens: int | None = None
    """Verdict input limit in tokens, applied always (set it to the model's context window)."""
    max_compression_reruns: int = 3
    samples: int = 1
    """Soft prediction (SPEC §4.6): samples per evidence and verdict call; 1 = hard prediction."""
    threshold: int = 1
    """Soft prediction: votes needed for a sentence to count as evidence / a verdict to win."""
    sample_temperature: float = 0.2

    def __post_init__(self) -> None:
        if self.q < 1:
            raise ValueError("q must be >= 1")
        if self.evidence_sentences_root < 1 or self.evidence_sentences_nonroot < 1:
            raise ValueError("evidence sentence limits must be >= 1")
        if not 1 <= self.threshold <= self.samples:
            raise ValueError("threshold must be between 1 and samples")
        if self.max_compression_reruns < 0 or self.max_decomposition_calls < 0:
            raise ValueError("rerun and call limits must be >= 0")
