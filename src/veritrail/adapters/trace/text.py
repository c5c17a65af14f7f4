"""Text primitives of the trace importer: the normal form that makes texts identical, containment
on word boundaries, and the words and word pairs texts are indexed and prefiltered by."""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections.abc import Sequence

_WS = re.compile(r"\s+")


def normalize(text: str) -> str:
    """NFKC and every whitespace run as one space, stripped: the key of identical texts."""
    return _WS.sub(" ", unicodedata.normalize("NFKC", text)).strip()


def occurrences(hay: str, needle: str) -> list[tuple[int, int]]:
    """Occurrences of `needle` in `hay` that start and end on word boundaries."""
    out: list[tuple[int, int]] = []
    if not needle:
        return out
    i = hay.find(needle)
    while i >= 0:
        j = i + len(needle)
        left = i == 0 or not (hay[i - 1].isalnum() and needle[0].isalnum())
        right = j == len(hay) or not (hay[j].isalnum() and needle[-1].isalnum())
        if left and right:
            out.append((i, j))
        i = hay.find(needle, i + 1)
    return out


def inside(a: int, b: int, c: int, d: int, loose: bool) -> bool:
    """Whether [a, b) lies in [c, d); a fuzzy alignment may spill over by a few characters, so
    `loose` accepts one that is at least 80% inside."""
    if a >= c and b <= d:
        return True
    return loose and b > a and (min(b, d) - max(a, c)) >= 0.8 * (b - a)


def word_count(text: str) -> int:
    """How many words (``\\w+`` runs) `text` holds."""
    return len(re.findall(r"\w+", text))


def preview(text: str, n: int = 60) -> str:
    """`text` normalised and cut to `n` characters, for messages and `--explain`."""
    s = normalize(text)
    return s if len(s) <= n else s[: n - 1] + "…"


WORD = re.compile(r"[^\W_]+")
"""Words for the prefilter: runs of the characters `str.isalnum` accepts, the same notion of a
word boundary `occurrences` uses, so a contained text's words are always words of the input."""


def word_pairs(words: Sequence[str]) -> set[str]:
    """Consecutive word pairs ("a b") of a word sequence; a single word stands for itself."""
    if len(words) < 2:
        return set(words)
    return {f"{a} {b}" for a, b in itertools.pairwise(words)}


def lookup_keys(text: str) -> set[str]:
    """What `text` can be looked up by: its words and its consecutive word pairs."""
    words = WORD.findall(text)
    return set(words) | word_pairs(words)


__all__ = [
    "WORD",
    "inside",
    "lookup_keys",
    "normalize",
    "occurrences",
    "preview",
    "word_count",
    "word_pairs",
]
