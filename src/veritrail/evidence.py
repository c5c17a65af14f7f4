"""Evidence selection (SPEC §4.2): batching, prompt-unique ids, id validation, the LM selector.

The engine, not the model, owns ids: every sentence of every excerpt in a prompt gets an integer
id unique within that prompt; whatever the selector returns is checked against those ids (ranges
such as ``5-10`` expanded, anything unknown dropped and recorded), so the evidence trail can only
ever hold sentences that exist.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .config import VerifyConfig
from .dag import Dag
from .prompting import fence, load_prompt
from .records import Claim, SelectionIssue, SentenceRef, Summary
from .segment import SentenceIndex
from .steps import EvidenceBatch, EvidenceSelector, Excerpt, ExcerptSentence, LMStep, RawSelection
from .subclaims import format_subclaims
from .tokens import estimate_tokens

STEP = "evidence_selection"


def selection_schema(n_sentences: int) -> dict[str, Any]:
    """The reply schema for a prompt of `n_sentences` sentences.

    `maxItems` bounds the id lists by the prompt's size (a range counts as one item, so the bound
    never excludes a correct reply); grammar-constrained local models otherwise tend to list ids
    until they hit their token cap.
    """
    ids = {"type": "array", "items": {"type": ["integer", "string"]}, "maxItems": n_sentences}
    return {
        "type": "object",
        "properties": {
            "selected_ids": ids,
            "context_ids": ids,
            "summary": {"type": "string"},
            "missing": {"type": "string"},
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
        pos = 0
        n = len(indices)
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


def render_excerpts(batch: EvidenceBatch) -> str:
    """The excerpts of a prompt: one fenced block per excerpt, each sentence prefixed by its id."""
    blocks = []
    for e in batch.excerpts:
        body = "\n".join(f"[{e.first_id + k}] {t}" for k, t in enumerate(e.texts))
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


class LMEvidenceSelector(LMStep):
    """The default selector: one model call per batch."""

    async def select(
        self, claim: Claim, subclaims: Sequence[str], batch: EvidenceBatch, *, sample: int = 0
    ) -> RawSelection:
        """Ask the model for the ids of evidence sentences in `batch`."""
        messages = load_prompt("evidence").render(
            excerpts=render_excerpts(batch),
            claim=fence(claim.text, "claim"),
            subclaims=fence(format_subclaims(subclaims), "sub-claims"),
        )
        cfg = self.sample_config(sample)
        res = await self.model.generate_json(
            messages,
            schema=selection_schema(batch.size),
            step=STEP,
            validate=_selection,
            config=cfg,
        )
        if res.value is None:
            return RawSelection((), "", error=res.error or "unreadable reply", raw=res.raw)
        ids, summary = res.value
        return RawSelection(tuple(ids), summary, raw=res.raw)


class SelectionFailed(RuntimeError):
    """A selector reply could not be read; the claim cannot be verified faithfully."""


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


async def select_over(
    dag: Dag,
    items_root: Sequence[NodeSentences],
    items_nonroot: Sequence[NodeSentences],
    claim: Claim,
    subclaims: Sequence[str],
    selector: EvidenceSelector,
    config: VerifyConfig,
) -> RoundEvidence:
    """Batch the given node sentences, run all prompts concurrently, validate and merge."""
    batches = make_batches(
        items_root,
        is_root=True,
        max_sentences=config.evidence_sentences_root,
        max_tokens=config.evidence_tokens_root,
    ) + make_batches(
        items_nonroot,
        is_root=False,
        max_sentences=config.evidence_sentences_nonroot,
        max_tokens=config.evidence_tokens_nonroot,
    )
    results = await asyncio.gather(
        *(_select_batch(b, claim, subclaims, selector, config) for b in batches)
    )

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
    order = sorted(with_ev, key=lambda n: (-dag.stage(n), n))
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


async def _select_batch(
    batch: EvidenceBatch,
    claim: Claim,
    subclaims: Sequence[str],
    selector: EvidenceSelector,
    config: VerifyConfig,
) -> tuple[
    list[tuple[Excerpt, ExcerptSentence]], list[Summary], list[str], list[SelectionIssue], bool
]:
    if config.samples == 1:
        raws = [await selector.select(claim, subclaims, batch)]
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
        if raw.error is not None:
            raise SelectionFailed(
                f"evidence selection reply unreadable: {raw.error}; raw reply: {raw.raw[:2000]!r}"
            )
        picked, drop = validate_ids(raw.ids, batch)
        picks.append(picked)
        votes.update(s.prompt_id for _, s in picked)
        dropped.extend(drop)
        issues.extend(SelectionIssue("unknown_id", d) for d in drop)
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
