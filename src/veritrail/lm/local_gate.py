"""The embedded model's prefix gate: no two parallel slots computing the same prompt prefix.

With parallel slots (`LocalProvider.parallel` > 1), `PrefixGate` holds back a request whose
prompt shares most of itself (≥ `PREFIX_SHARE` and ≥ `PREFIX_MIN_CHARS` characters) with one in
flight until that one is answered, instead of computing the same prefix on another slot.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence

from .base import Message

PREFIX_MIN_CHARS = 2000
PREFIX_SHARE = 0.5
"""`PrefixGate` holds a request back when it shares at least `PREFIX_MIN_CHARS` characters and
`PREFIX_SHARE` of its prompt with one in flight: a shared system prompt alone (~500 tokens) is
cheaper to recompute than to wait for, a shared batch of excerpts is not."""


def prompt_text(messages: Sequence[Message]) -> str:
    """The text the gate compares: what the server tokenizes, in order (role markers differ
    between roles, so they count)."""
    return "".join(f"\x00{m.role}\x00{m.content}" for m in messages)


def _common_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix: a binary search over slice comparisons, which run
    in C (prompts are tens of kilobytes; a character loop in Python would be slower)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


class PrefixGate:
    """Holds back a request whose prompt mostly repeats one in flight until that one finishes.

    llama.cpp reuses a prompt prefix only inside the slot that computed it (measured: two
    requests sent together after a third had computed their shared prefix got 438 and 0 cached
    tokens, with or without a unified KV cache). With parallel slots, two claims asking about the
    same excerpts at the same moment would each compute the excerpts on their own slot; waiting
    for the first lets the second reuse them (llama.cpp sends a request to the idle slot holding
    the most similar prompt), so the shared prefix is computed once. Requests that share little
    (different excerpts, or only the system prompt) pass at once. All state lives on the event
    loop's thread: no locking.
    """

    def __init__(self, min_chars: int = PREFIX_MIN_CHARS, share: float = PREFIX_SHARE) -> None:
        self.min_chars = min_chars
        self.share = share
        self._inflight: dict[int, tuple[str, asyncio.Event]] = {}
        self._next = 0
        self.waits = 0
        """Requests that waited for another (for tests and benchmarks)."""

    def blocker(self, prompt: str) -> asyncio.Event | None:
        """The completion event of an in-flight request this prompt should wait for, if any."""
        need = max(self.min_chars, self.share * len(prompt))
        for other, done in self._inflight.values():
            if _common_prefix(prompt, other) >= need:
                return done
        return None

    @contextlib.asynccontextmanager
    async def hold(self, prompt: str) -> AsyncIterator[None]:
        """Wait while a request sharing most of `prompt` is in flight, then count as in flight."""
        waited = False
        while (event := self.blocker(prompt)) is not None:
            waited = True
            await event.wait()
        self.waits += int(waited)
        key = self._next
        self._next += 1
        done = asyncio.Event()
        self._inflight[key] = (prompt, done)
        try:
            yield
        finally:
            del self._inflight[key]
            done.set()


__all__ = ["PREFIX_MIN_CHARS", "PREFIX_SHARE", "PrefixGate", "prompt_text"]
