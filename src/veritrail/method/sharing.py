"""Shared prompts (docs/method.md#shared-prompts): a step-level scheduler that lets the claims of
a run share one prompt when they need the same step over the same input.

Algorithm 1 stays per claim (`loop._verify_one` is unchanged): each claim still asks its
decomposer, selector and judge one question at a time. Underneath, the LM steps hand their
requests to a `Coalescer`, a queue keyed by the shared content of the prompt (the rendered
excerpts of an evidence batch, the rendered verdict evidence, the decomposition instructions).
Requests under one key are sent as one prompt that carries the shared content once and lists the
claims last (c1..cN, ids we assign within the prompt, never the claims' text), so the shared part
is also a prefix that providers' prompt caches can hit.

When a group is sent (`Coalescer.submit`):

- at once when it holds `Sharing.max_claims` requests, or when its claims' text reaches
  `Sharing.max_tokens` (estimated); else
- at the first event-loop tick in which no request joined any queue of this coalescer, and at
  the latest `MAX_WAIT_TICKS` ticks after its first request.

Why the tick rule: claims that run alongside reach the same step in the same tick, or a tick or
two later (a round with several prompts starts them as tasks), and a tick is microseconds where a
model call is hundreds of milliseconds. Waiting for claims that are still in a model call would
add that call's latency to the claims already queued, so the scheduler never waits for anything
but the event loop's next turn; nothing it waits for depends on another claim, so it cannot
deadlock, and the cap bounds the wait when requests keep arriving.

A prompt directory that overrides a step's one-claim template but not its shared one
(`honours_overrides`) makes that step ask per claim: the user's template is the one sent.

The setting reaches the steps through a context variable (`sharing_scope`, set by the loop for each
claim from `VerifyConfig.claims_per_prompt`): without a scope a step asks per claim, as the paper
does. A shared call is sent in the context of the request with the least claim id of its group, so
its cost is counted on that claim (`lm.model.claim_scope`): the run's totals stay exact, the other
claims of the group show no cost for that step, and the charge does not depend on which claim
asked first. (Which claims end up in one group can depend on timing: claims that reach a step in
different turns of the event loop, e.g. after replies that came back at different times, form
different groups; verdicts and evidence do not depend on it, the number of calls may.)
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
from collections.abc import Awaitable, Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from ..fencing import fence
from ..lm.model import current_claim
from .config import VerifyConfig
from .prompting import overridden

Req = TypeVar("Req")
Res = TypeVar("Res")

DEFAULT_MAX_TOKENS = 2_000
"""Estimated tokens of the claims' own text (claims and sub-claims) in one shared prompt: the
shared part is bounded by the method's own limits (`VerifyConfig.evidence_tokens_*`,
`verdict_tokens`); this bounds what the listed claims add to it, and their replies with it."""

CONCISE_MAX_CLAIMS = 1
"""Claims per shared prompt for a model that asks for concise replies (the embedded models): one,
the paper's form. Measured (benchmarks/README.md, "A slower machine"): with 8, the README's quick
start costs 5 calls and 2,983 prompt tokens instead of 20 and 11,501, but the 1.5B model then
calls c2 and c4 Not Fully Supported where the example's verdicts are Fully Supported (c1 FS, c3
NFS kept): it does not read a prompt of several claims reliably. A local server also caps a reply's tokens (1,024 by default,
`lm.local_weights.DEFAULT_MAX_TOKENS`), which bounds how many entries a shared reply could hold."""

UNION_EVIDENCE_TOKENS = 8_000
"""Estimated tokens of verdict evidence one shared verdict prompt may carry when its claims' evidence
differs (the union of their items), unless the run's `VerifyConfig.verdict_tokens` is smaller: a
claim whose items would push the union past it starts the next prompt. One claim's own evidence is
bounded by the method's verdict limit as before, whatever this says."""

UNION_SCAN = 8
"""How many of the last-opened groups of a queue a request without a group of its own input tries
to join (the union of inputs); see `Coalescer.submit`."""

MAX_WAIT_TICKS = 16
"""The most event-loop ticks a group waits for more requests after its first one."""


@dataclass(frozen=True, slots=True)
class Sharing:
    """How many claims may share one prompt (1: the paper's one claim per prompt)."""

    max_claims: int = 1
    max_tokens: int = DEFAULT_MAX_TOKENS
    evidence_tokens: int = UNION_EVIDENCE_TOKENS
    """The bound on the verdict evidence a shared verdict prompt carries (`UNION_EVIDENCE_TOKENS`)."""
    excerpt_limits: tuple[tuple[int, int | None], tuple[int, int | None]] = ((40, None), (40, None))
    """The method's bound on one evidence prompt, (sentences, tokens), for roots then non-roots
    (`VerifyConfig.evidence_sentences_*`, `evidence_tokens_*`): a shared evidence prompt carrying the
    union of its claims' excerpts stays within it."""

    def excerpt_limit(self, is_root: bool) -> tuple[int, int | None]:
        """The (sentences, tokens) bound on an evidence prompt over roots or non-roots."""
        return self.excerpt_limits[0 if is_root else 1]

    @property
    def on(self) -> bool:
        """Whether prompts are shared at all."""
        return self.max_claims > 1


_PER_CLAIM = Sharing()
_sharing: contextvars.ContextVar[Sharing] = contextvars.ContextVar(
    "veritrail_sharing", default=_PER_CLAIM
)


@contextlib.contextmanager
def sharing_scope(
    max_claims: int, config: VerifyConfig | None = None, max_tokens: int = DEFAULT_MAX_TOKENS
) -> Iterator[None]:
    """Let the LM steps called inside this block (and its tasks) share prompts with up to
    `max_claims` claims in all, within the run's prompt limits (`config`: its verdict limit lowers
    the bound on a shared verdict prompt's evidence; its evidence limits bound a shared evidence
    prompt)."""
    cfg = config or VerifyConfig()
    union = min(cfg.verdict_tokens or UNION_EVIDENCE_TOKENS, UNION_EVIDENCE_TOKENS)
    limits = (
        (cfg.evidence_sentences_root, cfg.evidence_tokens_root),
        (cfg.evidence_sentences_nonroot, cfg.evidence_tokens_nonroot),
    )
    token = _sharing.set(Sharing(max(1, max_claims), max_tokens, max(1, union), limits))
    try:
        yield
    finally:
        _sharing.reset(token)


def current_sharing() -> Sharing:
    """The sharing the current claim asked for (`sharing_scope`; per claim when none)."""
    return _sharing.get()


def honours_overrides(single: str, shared: str) -> bool:
    """Whether a step may use its shared template `shared`: not when the run's prompt directory
    overrides the one-claim template `single` but not `shared`, so that a user's edited prompt is
    the one sent (the step then asks per claim)."""
    return overridden(shared) or not overridden(single)


def claim_label(k: int) -> str:
    """The prompt-local id of the k-th claim (0-based) of a shared prompt: c1, c2, ..."""
    return f"c{k + 1}"


def claim_index(value: object, n: int) -> int | None:
    """The 0-based position a reply's claim id names (``c3``, ``C3``, ``3``), or None when it names
    none of the `n` claims of the prompt."""
    if isinstance(value, bool):
        return None
    text = str(value).strip().lower().removeprefix("c")
    if not text.isdigit():
        return None
    k = int(text) - 1
    return k if 0 <= k < n else None


def render_claims(
    claims: Sequence[tuple[str, str | None]],
    reads: Sequence[Sequence[int]] | None = None,
    what: str = "",
) -> str:
    """The claims of a shared prompt, each fenced under its prompt id: (text, sub-claims as a
    numbered list, or None for a prompt without sub-claims). `reads`, one per claim, are the
    numbers of the `what` (excerpts, evidence items) it reads, written after its blocks; one line
    after all claims when every claim reads the same ones."""
    same = reads is not None and len({tuple(r) for r in reads}) == 1
    blocks = []
    for k, (text, subs) in enumerate(claims):
        label = claim_label(k)
        block = fence(text, f"claim {label}")
        if subs is not None:
            block += "\n" + fence(subs, f"sub-claims {label}")
        if reads is not None and not same:
            block += f"\n{what} for {label}: {_numbers(reads[k])}"
        blocks.append(block)
    if reads is not None and same:
        blocks.append(f"{what} for every claim: {_numbers(reads[0])}")
    return "\n\n".join(blocks)


def _numbers(ns: Sequence[int]) -> str:
    return ", ".join(map(str, ns))


def entries_by_claim(value: object, n: int) -> dict[int, dict[str, object]]:
    """The per-claim entries of a shared reply ``{"claims": [{"claim": "c1", ...}, ...]}`` (or a
    bare list of them), by 0-based claim position; the first entry of a claim wins. Raises
    ValueError when the reply has no such list (the whole reply is unreadable); an entry that is
    not an object or names no claim of the prompt is left out (that claim is asked alone)."""
    if isinstance(value, dict):
        value = value.get("claims")
    if not isinstance(value, list):
        raise ValueError('expected {"claims": [...]}')
    out: dict[int, dict[str, object]] = {}
    for entry in value:
        if not isinstance(entry, dict):
            continue
        k = claim_index(entry.get("claim"), n)
        if k is not None:
            out.setdefault(k, entry)
    return out


def claim_entry_schema(
    n: int, fields: dict[str, object], required: Sequence[str]
) -> dict[str, object]:
    """The reply schema of a shared prompt of `n` claims: one list of entries, each the claim's
    id first (so the model names the claim before it answers for it) then `fields`. The entry's
    schema is written once, whatever `n`, which keeps the schema short."""
    entry = {
        "type": "object",
        "properties": {
            "claim": {"type": "string", "enum": [claim_label(k) for k in range(n)]},
            **fields,
        },
        "required": ["claim", *required],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {"claims": {"type": "array", "items": entry, "minItems": n, "maxItems": n}},
        "required": ["claims"],
        "additionalProperties": False,
    }


ALONE_NOTE = "shared reply had no readable entry for this claim; asked alone"
"""The note (an `unparseable_reply` issue on the claim) when a shared reply left a claim out."""


class _Outcome(Protocol):
    """A step's answer for one claim (`RawSelection`, `VerdictOutcome`): a dataclass that lists
    the unreadable replies met on the way."""

    __dataclass_fields__: ClassVar[dict[str, Any]]

    @property
    def unreadable(self) -> tuple[str, ...]: ...


Out = TypeVar("Out", bound=_Outcome)


async def finish_group(
    entries: Mapping[int, Any] | None,
    n: int,
    read: Callable[[int, Any], Out],
    alone: Callable[[int], Awaitable[Out]],
    unreadable: tuple[str, ...],
) -> list[Out]:
    """The answers for the `n` claims of a shared prompt, in order: each claim's entry of the
    reply read by `read(k, entry)` (a `ValueError` means unreadable), and a claim left out or unreadable
    asked alone (`alone(k)`), its answer carrying the shared reply's unreadable replies and
    `ALONE_NOTE`: a missing answer is never read as an empty one."""
    out: list[Out | None] = [None] * n
    for k, entry in (entries or {}).items():
        try:
            out[k] = read(k, entry)
        except ValueError:
            continue
    missing = [k for k in range(n) if out[k] is None]
    if missing:
        again = await asyncio.gather(*(alone(k) for k in missing))
        for k, got in zip(missing, again, strict=True):
            out[k] = dataclasses.replace(got, unreadable=(*unreadable, ALONE_NOTE, *got.unreadable))
    return [o for o in out if o is not None]


@dataclass
class _Group(Generic[Req, Res]):
    context: contextvars.Context
    claim: str
    """The claim charged for the group's call: the least claim id among its requests, so the
    charge does not depend on which claim happened to ask first."""
    requests: list[Req] = field(default_factory=list)
    waiters: list[asyncio.Future[Res]] = field(default_factory=list)
    tokens: int = 0
    ticks: int = 0
    exact: Hashable = None
    """The shared input of the request that opened the group (`Coalescer.submit`'s `exact`)."""
    task: asyncio.Task[None] | None = None
    """The group's call, once sent."""


RunGroup = Callable[[Sequence[Req]], Awaitable[Sequence[Res]]]


class Coalescer(Generic[Req, Res]):
    """A queue of step requests keyed by their shared content; each group is answered by one
    call of `run` (a list of results in the order of the requests). One per step object; it
    follows the running event loop (a step reused across `asyncio.run` calls starts afresh)."""

    def __init__(self, run: RunGroup[Req, Res]) -> None:
        self._run = run
        self._groups: dict[Hashable, list[_Group[Req, Res]]] = {}
        self._exact: dict[tuple[Hashable, Hashable], _Group[Req, Res]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tick_pending = False
        self._arrived = False
        self._tasks: set[asyncio.Task[None]] = set()

    async def submit(
        self,
        key: Hashable,
        request: Req,
        tokens: int | Callable[[Sequence[Req]], int],
        limits: Sharing,
        joins: Callable[[Sequence[Req]], bool] | None = None,
        exact: Hashable = None,
    ) -> Res:
        """Queue `request` under `key` and wait for its result (or the group call's error).

        `tokens`: what the request adds to a group's estimated size, or a function of the group's
        requests giving it (a shared prompt over the union of its claims' inputs counts only what
        the group does not carry yet). `joins`: whether the request may join a group holding
        those requests (a shared evidence prompt stays within the method's prompt limits). The
        request joins the open group of its key it adds least to (the one that already carries
        its input, when one does), or opens a new one. `exact` names the request's shared input
        (the rendered excerpts): a group opened by a request with the same input is found at once;
        otherwise only the `UNION_SCAN` groups opened last are tried, which bounds the work per
        request in a wide round of hundreds of prompts."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._loop, self._groups, self._tick_pending = loop, {}, False
            self._exact = {}
        groups = self._groups.setdefault(key, [])
        best: tuple[_Group[Req, Res], int] | None = None
        same = self._exact.get((key, exact)) if exact is not None else None
        for g in ([same] if same is not None else []) + groups[-UNION_SCAN:]:
            add = tokens(g.requests) if callable(tokens) else tokens
            if g.tokens + add > limits.max_tokens:
                continue  # this claim would push it over the bound
            if joins is not None and not joins(g.requests):
                continue
            if best is None or add < best[1]:
                best = (g, add)
        claim = current_claim() or ""
        if best is None:
            group = _Group[Req, Res](contextvars.copy_context(), claim, exact=exact)
            added = tokens(()) if callable(tokens) else tokens
            groups.append(group)
            if exact is not None:
                self._exact[(key, exact)] = group
        else:
            group, added = best
            if claim < group.claim:
                group.context, group.claim = contextvars.copy_context(), claim
        fut: asyncio.Future[Res] = loop.create_future()
        fut.add_done_callback(lambda _f: self._abandoned(key, group))
        group.requests.append(request)
        group.waiters.append(fut)
        group.tokens += added
        self._arrived = True
        if len(group.requests) >= limits.max_claims or group.tokens >= limits.max_tokens:
            self._flush(key, group)
        elif not self._tick_pending:
            self._tick_pending = True
            loop.call_soon(self._tick)
        return await fut

    def _tick(self) -> None:
        self._tick_pending = False
        arrived, self._arrived = self._arrived, False
        for key, groups in list(self._groups.items()):
            for group in list(groups):
                group.ticks += 1
                if not arrived or group.ticks >= MAX_WAIT_TICKS:
                    self._flush(key, group)
        if self._groups:
            self._tick_pending = True
            asyncio.get_running_loop().call_soon(self._tick)

    def _flush(self, key: Hashable, group: _Group[Req, Res]) -> None:
        groups = self._groups[key]
        groups.remove(group)
        if not groups:
            del self._groups[key]
        if self._exact.get((key, group.exact)) is group:
            del self._exact[(key, group.exact)]
        loop = asyncio.get_running_loop()
        # In the context of the group's least claim id: that claim is charged for the call.
        task = loop.create_task(self._answer(group), context=group.context)
        group.task = task
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _abandoned(self, key: Hashable, group: _Group[Req, Res]) -> None:
        """When every claim of a group was cancelled while it waited (a deadline, Ctrl-C), the
        group's call is no one's: a queued group is dropped, a sent one cancelled, so no call
        outlives the claims that asked for it."""
        if not all(f.cancelled() for f in group.waiters):
            return
        if group.task is not None:
            group.task.cancel()
        elif group in self._groups.get(key, ()):
            self._groups[key].remove(group)
            if not self._groups[key]:
                del self._groups[key]
            if self._exact.get((key, group.exact)) is group:
                del self._exact[(key, group.exact)]

    def in_flight(self) -> list[asyncio.Task[None]]:
        """The group calls sent and not finished yet."""
        return [t for t in self._tasks if not t.done()]

    async def _answer(self, group: _Group[Req, Res]) -> None:
        try:
            results = await self._run(group.requests)
        except BaseException as exc:  # handed to every waiting claim, then re-raised if fatal
            for fut in group.waiters:
                if not fut.done():
                    if isinstance(exc, asyncio.CancelledError):
                        fut.cancel()
                    else:
                        fut.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        for fut, res in zip(group.waiters, results, strict=True):
            if not fut.done():  # a claim cancelled while it waited
                fut.set_result(res)


async def cancel_in_flight(steps: Iterable[object]) -> None:
    """Cancel and await the shared-prompt calls still in flight of these LM steps (those with a
    `shared_prompts` queue; others are skipped): what an embedder that stops the claims at a
    deadline calls, so that nothing the steps started outlives it."""
    pending: list[asyncio.Task[None]] = []
    for step in steps:
        queue = getattr(step, "shared_prompts", None)
        if isinstance(queue, Coalescer):
            pending.extend(queue.in_flight())
    for t in pending:
        t.cancel()
    if pending:
        await asyncio.gather(*pending, return_exceptions=True)
