"""Settings of the verification loop (docs/method.md). Defaults follow the paper where it gives one."""

from __future__ import annotations

from dataclasses import dataclass, replace


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
    """Soft prediction (docs/method.md#soft-prediction): samples per evidence and verdict call; 1 = hard prediction."""
    threshold: int = 1
    """Soft prediction: votes needed for a sentence to count as evidence / a verdict to win."""
    sample_temperature: float = 0.2
    term_check: bool | None = None
    """The key-term check (`method.keyterms`, not in the paper): a Fully Supported verdict on a
    claim that names a number or a capitalised term no source document contains becomes Not Fully
    Supported. None: as the judge's model asks (on for the embedded `local/` models only)."""
    claims_per_prompt: int = 8
    """Shared prompts (docs/method.md#shared-prompts, not in the paper): at most this many claims
    whose decomposition, evidence or verdict step has the same shared input (the same excerpts,
    the same verdict evidence) are asked in one prompt. 1 = the paper's one claim per prompt.
    Soft prediction (`samples` > 1) always asks per claim."""

    def __post_init__(self) -> None:
        if self.q < 1:
            raise ValueError("q must be >= 1")
        if self.evidence_sentences_root < 1 or self.evidence_sentences_nonroot < 1:
            raise ValueError("evidence sentence limits must be >= 1")
        if not 1 <= self.threshold <= self.samples:
            raise ValueError("threshold must be between 1 and samples")
        if self.claims_per_prompt < 1:
            raise ValueError("claims_per_prompt must be >= 1")
        if self.max_compression_reruns < 0 or self.max_decomposition_calls < 0:
            raise ValueError("rerun and call limits must be >= 0")


def fit_to_context(config: VerifyConfig, context_window: int | None) -> VerifyConfig:
    """Fill unset token limits from a model's context window (e.g. the embedded model's 8,192).

    The verdict prompt must fit in one call (docs/method.md#verdict), so with no explicit `verdict_tokens` a
    model with a known window gets one: the window less room for the instructions, the claim and
    the reply (an eighth of the window, at least 2,048 tokens). Evidence prompts get the same cap
    unless their own limits are set. Explicit limits are never changed.
    """
    if not context_window:
        return config
    room = max(256, context_window - max(2048, context_window // 8))
    return replace(
        config,
        verdict_tokens=config.verdict_tokens if config.verdict_tokens is not None else room,
        evidence_tokens_root=config.evidence_tokens_root
        if config.evidence_tokens_root is not None
        else room,
        evidence_tokens_nonroot=(
            config.evidence_tokens_nonroot if config.evidence_tokens_nonroot is not None else room
        ),
    )


def model_context_window(provider: object) -> int | None:
    """The context window a provider declares (`context_window` or llama.cpp's `n_ctx`), if any."""
    for attr in ("context_window", "n_ctx"):
        value = getattr(provider, attr, None)
        if isinstance(value, int) and value > 0:
            return value
    return None
