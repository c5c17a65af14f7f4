"""Evidence selection (docs/method.md#evidence-selection): batching, prompt-unique ids, id validation, the LM selector.

The engine, not the model, owns ids: every sentence of every excerpt in a prompt gets an integer
id unique within that prompt; whatever the selector returns is checked against those ids (ranges
such as ``5-10`` expanded, anything unknown dropped and recorded), so the evidence trail can only
ever hold sentences that exist.
"""

from __future__ import annotations

import asyncio
import functools
import re
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

from ..dag import Dag
from ..fencing import fence, normalize_line_breaks
from ..records import Claim, IssueKind, SelectionIssue, SentenceRef, Step, Summary
from .config import VerifyConfig
from .prompting import load_prompt
from .segment import SentenceIndex
from .sharing import (
    CONCISE_MAX_CLAIMS,
    Coalescer,
    claim_entry_schema,
    current_sharing,
    entries_by_claim,
    finish_group,
    honours_overrides,
    render_claims,
)
from .steps import (
    EvidenceBatch,
    EvidenceSelector,
    Excerpt,
    ExcerptSentence,
    LMStep,
    RawSelection,
    text_field,
    unreadable_issues,
)
from .subclaims import claim_parts, format_subclaims
from .tokens import estimate_tokens

if TYPE_CHECKING:
    from ..lm.model import Model

_T = TypeVar("_T")
_R = TypeVar("_R")


# The concise reply format's bounds (issue 19): a summary of a few sentences still carries what
# the verdict step needs (who, what, which figure); the note on what is missing is one short
# sentence. The summary was halved to 200 in session 5 and is 400 again: a grammar bound cuts the
# reply where it stands, and on the quick start the embedded model's summary of summary-1 and
# summary-2 for c3 ran out of room at "Scrooge had Marley's name painted on", so the verdict never
# read what summary-2 says and blamed the final output (stage 3) instead of stage 2 (issue 39).
# With 400 it gives the README's c1, c2, c4 Fully Supported and c3 Not Fully Supported at stage 2.
CONCISE_SUMMARY_CHARS = 400
CONCISE_MISSING_CHARS = 100
# ...and of each id list: the embedded model listed 10-21 ids in 6 of 20 replies on the WiCE slice
# (runs of consecutive ids, most of them not evidence; WiCE's gold sets hold 1-3 sentences), each
# id 3-4 generated tokens. A range ("4-9") still counts as one item.
CONCISE_MAX_IDS = 8


def selection_schema(
    n_sentences: int, concise: bool = False, roots_only: bool = False
) -> dict[str, Any]:
    """The reply schema for a prompt of `n_sentences` sentences (one shared object per size:
    the model layer remembers per schema object whether strict mode accepts it; do not mutate).

    `maxItems` bounds the id lists by the prompt's size (a range counts as one item, so the bound
    never excludes a correct reply); grammar-constrained local models otherwise tend to list ids
    until they hit their token cap. `concise` bounds the free-text fields (`steps.text_field`)
    and each id list to `CONCISE_MAX_IDS` items. `concise` with `roots_only` (a prompt of source
    documents only) bounds the summary and the missing note to empty strings: the verdict reads a
    root in full and never its summary (docs/method.md#verdict), so on a small local model those tokens are
    time spent on nothing. The reply keeps its shape, and the ids come first in it, so the
    selection itself is the same as with the full format.
    """
    # `roots_only` means nothing without `concise`: the same key, so the same schema object (the
    # model layer's strict-mode memory is per object; a copy would be probed again).
    return _selection_schema(n_sentences, concise, concise and roots_only)


@functools.lru_cache(maxsize=512)
def _selection_schema(n_sentences: int, concise: bool, roots_only: bool) -> dict[str, Any]:
    bound = min(n_sentences, CONCISE_MAX_IDS) if concise else n_sentences
    summary_chars, missing_chars = (
        (0, 0)
        if roots_only
        else (CONCISE_SUMMARY_CHARS, CONCISE_MISSING_CHARS)
        if concise
        else (None, None)
    )
    ids = {"type": "array", "items": {"type": ["integer", "string"]}, "maxItems": bound}
    return {
        "type": "object",
        "properties": {
            "selected_ids": ids,
            "context_ids": ids,
            "summary": text_field(summary_chars),
            "missing": text_field(missing_chars),
        },
        "required": ["selected_ids", "context_ids", "summary", "missing"],
        "additionalProperties": False,
    }


# A node's sentences to batch: (node id, sentence indices, texts) — the whole node (indices a
# range, texts the run's cached tuple: nothing is copied) or a subset (compression reruns).
NodeSentences = tuple[str, Sequence[int], Sequence[str]]


def make_batches(
    items: Iterable[NodeSentences],
    *,
    is_root: bool,
    max_sentences: int,
    max_tokens: int | None = None,
) -> list[EvidenceBatch]:
    """Pack node sentences into prompts of at most `max_sentences` (and `max_tokens`) each.

    Nodes are packed whole while they fit; a node larger than the room left is split by sentence
    across consecutive prompts. Ids are 1-based and unique within each prompt.
    """
    batches: list[EvidenceBatch] = []
    cur: list[Excerpt] = []
    cur_n = 0
    cur_tok = 0

    def close() -> None:
        nonlocal cur, cur_n, cur_tok
        if cur:
            batches.append(EvidenceBatch(tuple(cur)))
        cur, cur_n, cur_tok = [], 0, 0

    for node_id, indices, texts in items:
        n = len(indices)
        if max_tokens is None and cur_n + n <= max_sentences:
            # The common case, a whole node that fits: no slicing, no token counting.
            cur.append(Excerpt(len(cur) + 1, node_id, is_root, cur_n + 1, indices, texts))
            cur_n += n
            continue
        pos = 0
        # Start a fresh prompt if the node would fit whole there but not in the current one.
        if cur and cur_n + n > max_sentences and n <= max_sentences:
            close()
        while pos < n:
            room = max_sentences - cur_n
            end = min(n, pos + room)
            if max_tokens is not None:
                for k in range(pos, end):
                    t = estimate_tokens(texts[k])
                    if cur_tok + t > max_tokens and (k > pos or cur):
                        end = k
                        break
                    cur_tok += t
            if end == pos:
                close()
                continue
            cur.append(
                Excerpt(
                    label=len(cur) + 1,
                    node_id=node_id,
                    is_root=is_root,
                    first_id=cur_n + 1,
                    indices=indices[pos:end],
                    texts=texts[pos:end],
                    ends_node=end == n,
                )
            )
            cur_n += end - pos
            pos = end
            if pos < n:
                close()
    close()
    return batches


_BREAKS = re.compile("[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
_RANGE = re.compile(r"^\s*(\d+)\s*(?:-|–|—|to|\.\.)\s*(\d+)\s*$")
_SINGLE = re.compile(r"^\s*(?:s|id|sentence)?\s*#?\s*(\d+)\s*$", re.IGNORECASE)


def validate_ids(
    raw_ids: Iterable[str | int], batch: EvidenceBatch
) -> tuple[list[tuple[Excerpt, ExcerptSentence]], list[str]]:
    """Map returned ids to the sentences of `batch`.

    Returns (selected, dropped): selected in prompt-id order without duplicates; dropped holds the
    textual form of every id (or id inside a range) that was not assigned in this prompt.
    """
    n = batch.size  # prompt ids are 1..n without gaps
    chosen: set[int] = set()
    dropped: list[str] = []
    for raw in raw_ids:
        if isinstance(raw, bool):
            dropped.append(str(raw))
            continue
        if isinstance(raw, int):
            (chosen.add(raw) if 1 <= raw <= n else dropped.append(str(raw)))
            continue
        s = str(raw)
        m = _RANGE.match(s)
        if m:
            lo, hi = sorted((int(m.group(1)), int(m.group(2))))
            known = range(max(lo, 1), min(hi, n) + 1)
            chosen.update(known)
            n_unknown = (hi - lo + 1) - len(known)
            if n_unknown:
                dropped.append(f"{s} ({n_unknown} unassigned)")
            continue
        m = _SINGLE.match(s)
        if m and 1 <= int(m.group(1)) <= n:
            chosen.add(int(m.group(1)))
        else:
            dropped.append(s)
    located = (batch.locate(i) for i in sorted(chosen))
    return [loc for loc in located if loc is not None], dropped


def _one_line(text: str) -> str:
    return " ".join(normalize_line_breaks(text).split("\n")) if _BREAKS.search(text) else text


def render_excerpts(batch: EvidenceBatch) -> str:
    """The excerpts of a prompt: one fenced block per excerpt, each sentence on one line prefixed
    by its id (line breaks inside a sentence become spaces, so no sentence can start a line that
    looks like another sentence's id)."""
    blocks = []
    for e in batch.excerpts:
        body = "\n".join(f"[{e.first_id + k}] {_one_line(t)}" for k, t in enumerate(e.texts))
        blocks.append(fence(body, f"excerpt {e.label}"))
    return "\n\n".join(blocks)


def _selection(value: Any) -> tuple[list[str | int], str]:
    if not isinstance(value, dict):
        raise ValueError("expected a JSON object")
    ids: list[str | int] = []
    for key in ("selected_ids", "context_ids"):
        got = value.get(key, [])
        if isinstance(got, (int, str)):
            got = [got]
        if not isinstance(got, list):
            raise ValueError(f"{key} must be a list")
        ids.extend(x for x in got if isinstance(x, (int, str)))
    summary = value.get("summary", "")
    missing = value.get("missing", "")
    text = str(summary).strip()
    if str(missing).strip() and str(missing).strip().upper() not in ("N/A", "NONE"):
        text = f"{text}\nMissing or unclear: {str(missing).strip()}" if text else ""
    return ids, text


@dataclass(frozen=True, slots=True)
class _EvidenceAsk:
    """One claim's request for one batch, with the batch's excerpts rendered once."""

    claim: Claim
    subclaims: Sequence[str]
    batch: EvidenceBatch
    excerpts: str
    tokens: int = 0
    """Estimated tokens of the claim and its sub-claims."""


def _excerpt_key(e: Excerpt) -> tuple[str, tuple[int, ...], tuple[str, ...]]:
    # The text too: claims of different DAGs (an evaluation runs many at once through the same
    # steps) may read nodes of the same id that say different things.
    return e.node_id, tuple(e.indices), tuple(e.texts)


@dataclass(frozen=True, slots=True)
class UnionBatch:
    """The excerpts of several claims' batches in one prompt (each distinct excerpt once, in order
    of first appearance, renumbered), and for each claim the labels of its own excerpts and the
    map from the union's prompt ids to its own batch's."""

    batch: EvidenceBatch
    labels: tuple[tuple[int, ...], ...]
    own_ids: tuple[Mapping[int, int], ...]


def union_batch(batches: Sequence[EvidenceBatch]) -> UnionBatch:
    """The union of `batches` (see `UnionBatch`)."""
    placed: dict[tuple[str, tuple[int, ...], tuple[str, ...]], Excerpt] = {}
    next_id = 1
    for b in batches:
        for e in b.excerpts:
            k = _excerpt_key(e)
            if k not in placed:
                placed[k] = replace(e, label=len(placed) + 1, first_id=next_id)
                next_id += len(e)
    labels, own_ids = [], []
    for b in batches:
        mine = [placed[_excerpt_key(e)] for e in b.excerpts]
        labels.append(tuple(u.label for u in mine))
        own_ids.append(
            {
                u.first_id + k: e.first_id + k
                for u, e in zip(mine, b.excerpts, strict=True)
                for k in range(len(e))
            }
        )
    return UnionBatch(EvidenceBatch(tuple(placed.values())), tuple(labels), tuple(own_ids))


def to_own_ids(
    raw_ids: Sequence[str | int], union: EvidenceBatch, own: Mapping[int, int]
) -> tuple[str | int, ...]:
    """A shared reply's ids for one claim (prompt ids of the union, ranges allowed) as ids of the
    claim's own batch; an id outside the claim's own excerpts is kept in a form that names it and
    that `validate_ids` drops (an `unknown_id` issue of that claim), as for an invented id."""
    picked, dropped = validate_ids(raw_ids, union)
    out: list[str | int] = []
    for _, sent in picked:
        mine = own.get(sent.prompt_id)
        out.append(mine if mine is not None else f"{sent.prompt_id} (another claim's excerpt)")
    return (*out, *dropped)


def shared_selection_schema(
    n_sentences: int, n_claims: int, concise: bool = False, roots_only: bool = False
) -> dict[str, Any]:
    """The reply schema of a shared evidence prompt (docs/method.md#shared-prompts): one entry per
    claim, each the claim's id and the fields of `selection_schema` with the same bounds."""
    return _shared_selection_schema(n_sentences, n_claims, concise, concise and roots_only)


@functools.lru_cache(maxsize=512)
def _shared_selection_schema(
    n_sentences: int, n_claims: int, concise: bool, roots_only: bool
) -> dict[str, Any]:
    one = _selection_schema(n_sentences, concise, roots_only)
    return claim_entry_schema(n_claims, one["properties"], one["required"])


class LMEvidenceSelector(LMStep):
    """The default selector: one model call per batch, for one claim or, when the run shares
    prompts (`sharing`), for every claim that asks for the same batch at about the same time."""

    def __init__(
        self, model: Model, temperature: float = 0.0, sample_temperature: float = 0.2
    ) -> None:
        super().__init__(model, temperature, sample_temperature)
        self.shared_prompts: Coalescer[_EvidenceAsk, RawSelection] = Coalescer(self._select_group)

    async def select(
        self, claim: Claim, subclaims: Sequence[str], batch: EvidenceBatch, *, sample: int = 0
    ) -> RawSelection:
        """Ask the model for the ids of evidence sentences in `batch`."""
        excerpts = render_excerpts(batch)
        sharing = current_sharing()
        tokens = estimate_tokens(claim.text) + sum(estimate_tokens(s) for s in subclaims)
        ask = _EvidenceAsk(claim, subclaims, batch, excerpts, tokens)
        # Soft prediction's samples stay per claim: each is a call of its own by design.
        if sample != 0 or not sharing.on or not honours_overrides("evidence", "evidence_shared"):
            return await self._select_alone(ask, sample)
        if self.concise:
            sharing = replace(sharing, max_claims=min(sharing.max_claims, CONCISE_MAX_CLAIMS))
        is_root = all(e.is_root for e in batch.excerpts)
        max_sentences, max_tokens = sharing.excerpt_limit(is_root)
        mine = {_excerpt_key(e): e for e in batch.excerpts}

        def missing(group: Sequence[_EvidenceAsk]) -> list[Excerpt]:
            held = {_excerpt_key(e) for a in group for e in a.batch.excerpts}
            return [e for k, e in mine.items() if k not in held]

        def added(group: Sequence[_EvidenceAsk]) -> int:
            # The claim, and the excerpts the group does not carry yet.
            return tokens + sum(estimate_tokens(t) for e in missing(group) for t in e.texts)

        def joins(group: Sequence[_EvidenceAsk]) -> bool:
            # The union of the group's excerpts and this claim's stays within the method's bound
            # on one evidence prompt (the paper's 40 sentences by default).
            new = missing(group)
            if not new:
                return True
            held = {_excerpt_key(e): e for a in group for e in a.batch.excerpts}
            n = sum(len(e) for e in held.values()) + sum(len(e) for e in new)
            if n > max_sentences:
                return False
            if max_tokens is None:
                return True
            every = [*held.values(), *new]
            return sum(estimate_tokens(t) for e in every for t in e.texts) <= max_tokens

        # One queue per kind of node read: claims reading the same excerpts share a prompt, and
        # claims reading different ones too (the union of their excerpts, each claim told which
        # are its own), within the method's bound on one prompt.
        bound = replace(sharing, max_tokens=sharing.max_tokens + (max_tokens or 10**9))
        return await self.shared_prompts.submit(
            ("evidence", is_root), ask, added, bound, joins, exact=excerpts
        )

    async def _select_alone(self, ask: _EvidenceAsk, sample: int = 0) -> RawSelection:
        """The paper's prompt: one claim over one batch."""
        messages = load_prompt("evidence").render(
            excerpts=ask.excerpts,
            claim=fence(ask.claim.text, "claim"),
            subclaims=fence(format_subclaims(ask.subclaims), "sub-claims"),
        )
        batch = ask.batch
        res = await self.model.generate_json(
            messages,
            schema=selection_schema(
                batch.size, self.concise, all(e.is_root for e in batch.excerpts)
            ),
            step=Step.EVIDENCE_SELECTION,
            validate=_selection,
            config=self.sample_config(sample),
        )
        if res.value is None:
            return RawSelection(
                (),
                "",
                error=res.error or "unreadable reply",
                raw=res.raw,
                unreadable=res.unreadable,
            )
        ids, summary = res.value
        return RawSelection(tuple(ids), summary, raw=res.raw, unreadable=res.unreadable)

    async def _select_group(self, asks: Sequence[_EvidenceAsk]) -> list[RawSelection]:
        """One prompt for the claims of `asks`: the union of their excerpts once, then the
        claims, each naming its own excerpts. Each claim's ids are mapped back to its own batch
        (`to_own_ids`) and validated later, per claim, as for a prompt of its own
        (`validate_ids`): an id in another claim's excerpt is dropped like an invented one. A
        claim the reply leaves out, or gives an unreadable entry, is asked alone: a missing answer
        is never read as "nothing selected"."""
        if len(asks) == 1:
            return [await self._select_alone(asks[0])]
        n = len(asks)
        union = union_batch([a.batch for a in asks])
        messages = load_prompt("evidence_shared").render(
            excerpts=render_excerpts(union.batch),
            claims=render_claims(
                [claim_parts(a.claim.text, a.subclaims) for a in asks], union.labels, "Excerpts"
            ),
        )
        res = await self.model.generate_json(
            messages,
            schema=shared_selection_schema(
                union.batch.size, n, self.concise, all(e.is_root for e in union.batch.excerpts)
            ),
            step=Step.EVIDENCE_SELECTION,
            validate=functools.partial(entries_by_claim, n=n),
            config=self.sample_config(0),
        )

        def read(k: int, entry: Any) -> RawSelection:
            ids, summary = _selection(entry)
            own = to_own_ids(ids, union.batch, union.own_ids[k])
            return RawSelection(own, summary, raw=res.raw, unreadable=res.unreadable)

        return await finish_group(
            res.value, n, read, lambda k: self._select_alone(asks[k]), res.unreadable
        )


class SelectionFailed(RuntimeError):
    """A selector reply could not be read; the claim cannot be verified faithfully.

    `issues` are the `unparseable_reply` issues of that call's tries, for the claim's record.
    """

    def __init__(self, message: str, issues: Sequence[SelectionIssue] = ()) -> None:
        super().__init__(message)
        self.issues = tuple(issues)


@dataclass(frozen=True, slots=True)
class RoundEvidence:
    """The validated result of evidence selection over a set of nodes (one round or a rerun)."""

    evidence: tuple[SentenceRef, ...]
    summaries: tuple[Summary, ...]
    nodes_with_evidence: tuple[str, ...]
    dropped_ids: tuple[str, ...]
    issues: tuple[SelectionIssue, ...]
    qualified: bool = True
    """False in soft mode when samples selected sentences but none reached the threshold."""


def batch_items(
    items_root: Iterable[NodeSentences],
    items_nonroot: Iterable[NodeSentences],
    config: VerifyConfig,
) -> tuple[EvidenceBatch, ...]:
    """The prompts of a round: roots and non-roots batched separately (roots first)."""
    return tuple(
        make_batches(
            items_root,
            is_root=True,
            max_sentences=config.evidence_sentences_root,
            max_tokens=config.evidence_tokens_root,
        )
        + make_batches(
            items_nonroot,
            is_root=False,
            max_sentences=config.evidence_sentences_nonroot,
            max_tokens=config.evidence_tokens_nonroot,
        )
    )


async def select_over(
    dag: Dag,
    batches: Sequence[EvidenceBatch],
    claim: Claim,
    subclaims: Sequence[str],
    selector: EvidenceSelector,
    config: VerifyConfig,
) -> RoundEvidence:
    """Run all prompts of a round concurrently, validate and merge.

    At most `selector.concurrency` prompts (the model's own limit, when the selector has one) are
    in progress at once: a widening round at GraphRAG scale has hundreds of prompts, and a
    task per prompt that only waits on the model's semaphore costs engine time and memory.
    """

    async def one(b: EvidenceBatch) -> _BatchResult:
        return await _select_batch(b, claim, subclaims, selector, config)

    limit = getattr(selector, "concurrency", None)
    results = await run_bounded(one, batches, limit if isinstance(limit, int) else None)

    evidence: list[SentenceRef] = []
    summaries: list[Summary] = []
    dropped: list[str] = []
    issues: list[SelectionIssue] = []
    with_ev: dict[str, None] = {}
    any_votes = False
    for picked, summary_items, drop, iss, voted in results:
        any_votes = any_votes or voted
        for e, s in picked:
            evidence.append(SentenceRef(e.node_id, s.sentence_index, s.text))
            with_ev.setdefault(e.node_id)
        summaries.extend(summary_items)
        dropped.extend(drop)
        issues.extend(iss)
    # Node order follows the DAG's stage (later first) then id, so reports are stable.
    order = dag.read_order(with_ev)
    rank = {n: i for i, n in enumerate(order)}
    evidence.sort(key=lambda r: (rank[r.node_id], r.sentence_index))
    return RoundEvidence(
        tuple(dict.fromkeys(evidence)),
        tuple(summaries),
        tuple(order),
        tuple(dropped),
        tuple(issues),
        qualified=bool(evidence) or not any_votes,
    )


_BatchResult = tuple[
    Sequence[tuple[Excerpt, ExcerptSentence]],
    Sequence[Summary],
    Sequence[str],
    Sequence[SelectionIssue],
    bool,
]
_NOTHING_SELECTED: _BatchResult = ((), (), (), (), False)


async def run_bounded(
    fn: Callable[[_T], Awaitable[_R]], items: Sequence[_T], limit: int | None
) -> list[_R]:
    """`[await fn(x) for x in items]`, at most `limit` at a time (None: all at once).

    Results keep the order of `items`. The first exception stops workers from starting new
    items and is raised once the ones in progress finish.
    """
    if len(items) == 1:
        # One prompt (every round of a narrow trail): no task and no gather to schedule.
        return [await fn(items[0])]
    if limit is None or limit >= len(items):
        return list(await asyncio.gather(*[fn(x) for x in items]))
    results: list[_R | None] = [None] * len(items)
    todo = iter(enumerate(items))  # shared: each worker takes the next item when it is free
    failed: list[BaseException] = []

    async def worker() -> None:
        for i, x in todo:
            if failed:
                return
            try:
                results[i] = await fn(x)
            except Exception as exc:  # noqa: BLE001 - re-raised below, after the others stop
                failed.append(exc)
                return

    await asyncio.gather(*[worker() for _ in range(max(1, limit))])
    if failed:
        raise failed[0]
    return results  # type: ignore[return-value]  # every slot was filled


async def _select_batch(
    batch: EvidenceBatch,
    claim: Claim,
    subclaims: Sequence[str],
    selector: EvidenceSelector,
    config: VerifyConfig,
) -> _BatchResult:
    if config.samples == 1:
        raws = [await selector.select(claim, subclaims, batch)]
        if not raws[0].ids and raws[0].error is None and not raws[0].unreadable:
            return _NOTHING_SELECTED  # most prompts of a wide round select nothing (shared)
    else:
        raws = list(
            await asyncio.gather(
                *(selector.select(claim, subclaims, batch, sample=k) for k in range(config.samples))
            )
        )
    dropped: list[str] = []
    issues: list[SelectionIssue] = []
    votes: Counter[int] = Counter()
    picks: list[list[tuple[Excerpt, ExcerptSentence]]] = []
    for raw in raws:
        # Every unreadable reply is recorded, also when a re-ask made it good.
        issues.extend(unreadable_issues(Step.EVIDENCE_SELECTION, raw.unreadable))
    for raw in raws:
        if raw.error is not None:
            raise SelectionFailed(
                f"evidence selection reply unreadable: {raw.error}; raw reply: {raw.raw[:2000]!r}",
                issues,
            )
        picked, drop = validate_ids(raw.ids, batch)
        picks.append(picked)
        votes.update(s.prompt_id for _, s in picked)
        dropped.extend(drop)
        issues.extend(SelectionIssue(IssueKind.UNKNOWN_ID, d) for d in drop)
    keep = {pid for pid, n in votes.items() if n >= config.threshold}
    by_id = {s.prompt_id: (e, s) for picked in picks for e, s in picked}
    picked_final = [by_id[i] for i in sorted(keep)]
    nodes = list(dict.fromkeys(e.node_id for e, _ in picked_final))
    summaries: list[Summary] = []
    if nodes:
        # The summary of the first sample that selected qualifying sentences describes them.
        for raw, picked in zip(raws, picks, strict=True):
            if not any(s.prompt_id in keep for _, s in picked):
                continue
            if raw.node_summaries:
                summaries.extend(
                    Summary((nid,), txt) for nid, txt in raw.node_summaries if nid in nodes
                )
            elif raw.summary.strip():
                summaries.append(Summary(tuple(nodes), raw.summary.strip()))
            break
    return picked_final, summaries, dropped, issues, bool(votes)


def node_items(sentences: SentenceIndex, node_ids: Iterable[str]) -> list[NodeSentences]:
    """Full-node items for batching."""
    out: list[NodeSentences] = []
    for nid in node_ids:
        texts = sentences.sentences(nid)
        out.append((nid, range(len(texts)), texts))
    return out
