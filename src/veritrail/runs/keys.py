"""The stable key of a claim across runs: its normalised text, and the sources it traces to.

Two runs of one pipeline (before and after an edit) extract claims with other ids and
sometimes other wording of case, spacing or punctuation; `claim_text_key` gives the same key to
texts that differ only so. `claim_sources` gives the root nodes a claim's provenance reaches,
which tell apart two claims with the same text that rest on different sources (the index keeps
both for `veritrail diff`, which decides how duplicates are matched).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

from ..report import ClaimSource, as_claim

_NOT_WORD = re.compile(r"[\W_]+", re.UNICODE)

KEY_LENGTH = 16
"""Hex digits of `claim_text_key` (64 bits: no collision among the claims of any index)."""


def normalize_claim_text(text: str) -> str:
    """`text` as claims are compared: Unicode NFKC, case folded, every run of characters that
    are not letters or digits (spaces, punctuation, symbols) one space, trimmed."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return _NOT_WORD.sub(" ", folded).strip()


def claim_text_key(text: str) -> str:
    """The key of a claim's normalised text (`normalize_claim_text`): hex digits of its sha256."""
    digest = hashlib.sha256(normalize_claim_text(text).encode("utf-8")).hexdigest()
    return digest[:KEY_LENGTH]


def claim_sources(claim: ClaimSource) -> tuple[str, ...]:
    """The root nodes a report claim's provenance paths end at, sorted (none for a claim without
    provenance, e.g. one judged Not Fully Supported)."""
    return tuple(sorted({p[-1] for p in as_claim(claim).provenance if p}))


__all__ = ["KEY_LENGTH", "claim_sources", "claim_text_key", "normalize_claim_text"]
