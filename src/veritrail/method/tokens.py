"""Token estimates used for limits and dry-run estimates (no tokenizer download needed).

About four characters per token for alphabetic text, the usual rule of thumb for BPE
vocabularies, and one token per CJK character (Chinese, Japanese kana and kanji, Korean Hangul,
CJK punctuation and full-width forms): at four characters per token a Chinese page would be
counted at a quarter of its size, and token limits would not be safe. Measured on the texts of
tests/fixtures/multilingual and 50 WiCE articles (figures in docs/method.md, "Segmentation"),
a multilingual tokenizer (Qwen2.5) needs about 0.7 tokens per CJK character, so one per
character is on the safe side for it; an English-centred byte-level vocabulary (SmolLM2) needs
about 1.9, which no character-count rule can know without the tokenizer. German is estimated
26% under Qwen2.5's count (not changed: only CJK was measured far off). Text without CJK
characters is estimated exactly as before (the estimate sizes evidence batches, and English
batches must not move). The provider's reported counts are what accounting uses.
"""

from __future__ import annotations

import re

# Same ranges as `veritrail.method.segment`: CJK ideographs, kana, Hangul, CJK punctuation, full width.
_CJK = re.compile(
    "[\u2e80-\u2fdf\u3000-\u30ff\u3100-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    "\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]"
)


def estimate_tokens(text: str) -> int:
    """Approximate token count of `text`: one per CJK character, one per 4 other characters."""
    if text.isascii():  # C-speed shortcut for the common case
        return (len(text) + 3) // 4
    cjk = len(_CJK.findall(text))
    return cjk + (len(text) - cjk + 3) // 4
