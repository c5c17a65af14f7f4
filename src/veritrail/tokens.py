"""Token estimates used for limits and dry-run estimates (no tokenizer download needed).

About four characters of English per token, the usual rule of thumb for BPE vocabularies; the
provider's reported counts are what accounting uses.
"""

from __future__ import annotations


def estimate_tokens(text: str) -> int:
    """Approximate token count of `text`."""
    return (len(text) + 3) // 4
