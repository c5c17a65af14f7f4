"""`veritrail diff A B`: what changed between two runs, claim by claim
(docs/runs.md#comparing-two-runs-veritrail-diff).

**Matching.** A claim's key is its text normalised as the runs index normalises it
(`keys.normalize_claim_text`: Unicode NFKC, case-folded, every run of characters that are not
letters or digits, whitespace and punctuation alike, made one space). The verdict and the trail are what the diff compares, so they cannot be part of the key: a claim
whose evidence moved must still meet itself. When several claims of a run share a key (the same
sentence stated twice in a final output), the claims of A and B with that key are paired by the
sources they trace to (the root nodes of their provenance paths and of their evidence, most
shared first) and, between equals, in natural claim-id order (`c2` before `c10`); what is left
over is reported as added (only in B) or removed (only in A). Each report has one final output
(the DAG's terminal node), so it is shown but never matched on: two runs whose terminal ids
differ are compared by claim text alone.

**What counts.** A claim is *unsupported* when its verdict is Not Fully Supported; the verdict
is the reviewed one when the claim has a review (report version 2's per-claim `review`), else
the model's. *Newly unsupported*: unsupported in B and not in A, or unsupported and only in B.
*Resolved*: unsupported in A and, matched, not in B. *Flipped*: matched with another verdict
(errors included). For each newly unsupported claim the diff gives B's error stages and the
nodes blamed for them (the non-root evidence nodes of the last Fully Supported iteration; the
final output when no iteration was Fully Supported: docs/method.md#provenance-and-error-stages).
*Evidence changed*: the sentences (`node#index`) selected as evidence in any iteration differ.
*Trail moved*: matched, the same verdict, and another error stage or blamed node (where the
unsupported content entered moved, though the verdict did not: issue 43). A review that sets the
stage and node (`veritrail review --stage N --node ID`) overrides them as it overrides the verdict.
*Citation changed*: matched, and the citation status (report version 4's `claims[].citation.kind`,
`--citations`) differs. *Newly miscited*: `misattributed` or `cited_not_supporting` in B and not
in A, or miscited and only in B (docs/citations.md); a side that did not check citations has no
status, so nothing is newly miscited against it.

The document `diff_document` builds is `"format": "veritrail-diff"`, version 3
(`schemas/diff.schema.json`); version 2 added `trail_moved` per change and `counts.trail_moved`,
version 3 each claim's `citation`, each change's `citation_changed` and `newly_miscited`, and
`counts.citation_changed` and `counts.newly_miscited`.
"""

from __future__ import annotations

import contextlib
import gc
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InputProblem
from ..records import CitationStatus, ErrorStageStatus, Verdict
from ..report import (
    ClaimSource,
    ReportContractError,
    ReportSource,
    RunDoc,
    as_claim,
    as_report,
    blamed_nodes,
    dag_roots,
)
from .diffstats import DEFAULT_RESAMPLES, DEFAULT_SEED, Outcomes, ShareDifference, share_difference
from .keys import normalize_claim_text

DIFF_FORMAT = "veritrail-diff"
DIFF_VERSION = 3
"""2 added each change's `trail_moved` and `counts.trail_moved`; 3 each claim's `citation`, each
change's `citation_changed` and `newly_miscited`, and their counts (docs/runs.md)."""

UNSUPPORTED = Verdict.NOT_FULLY_SUPPORTED.value

_PAIR_BY_SOURCES_LIMIT = 2500
"""Duplicates of one key are paired by shared sources while |A dups| x |B dups| stays under
this; beyond it (thousands of identical claims) in claim-id order only, to stay linear."""


class DiffInputError(InputProblem, ValueError):
    """A side of the diff is not a run directory with a report or a report file."""


def claim_key(text: str) -> str:
    """The matching key of a claim's text: the runs index's normalised text (so a claim the
    view lists and the claim the diff matches are one), see the module docstring."""
    return normalize_claim_text(text)


_DIGITS = re.compile(r"(\d+)")


def natural_key(claim_id: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key that puts `c2` before `c10`."""
    return tuple(
        (0, int(part)) if part.isdigit() else (1, part) for part in _DIGITS.split(claim_id) if part
    )


@dataclass(frozen=True)
class ClaimView:
    """One claim of one run, as the diff sees it."""

    id: str
    text: str
    key: str
    verdict: str | None
    """The verdict that counts: the review's when there is one, else the model's (None: error)."""
    model_verdict: str | None
    reviewed: bool
    error_stages: tuple[int, ...]
    error_stage_status: str
    entered_at: tuple[str, ...]
    """The nodes blamed for the error stages (empty unless the stages were identified)."""
    evidence: frozenset[str]
    """`node#sentence` of every evidence sentence of every iteration."""
    sources: frozenset[str]
    """Root nodes the claim traces to (provenance ends and root evidence)."""
    citation: str | None = None
    """The citation status (`--citations`); None when the run did not check citations or the
    claim has no verdict."""
    cited_nodes: tuple[str, ...] = ()
    supporting_nodes: tuple[str, ...] = ()

    @property
    def unsupported(self) -> bool:
        """Not Fully Supported (after review)."""
        return self.verdict == UNSUPPORTED

    @property
    def miscited(self) -> bool:
        """Misattributed, or cites a source that does not support it."""
        return self.citation is not None and CitationStatus(self.citation).miscited

    def citation_json(self) -> dict[str, Any] | None:
        """The claim's citation in the diff document (None: not checked)."""
        if self.citation is None:
            return None
        return {
            "kind": self.citation,
            "cited_nodes": list(self.cited_nodes),
            "supporting_nodes": list(self.supporting_nodes),
        }

    def to_json(self) -> dict[str, Any]:
        """The claim in the diff document."""
        return {
            "id": self.id,
            "text": self.text,
            "verdict": self.verdict,
            "model_verdict": self.model_verdict,
            "reviewed": self.reviewed,
            "error_stages": list(self.error_stages),
            "error_stage_status": self.error_stage_status,
            "entered_at": list(self.entered_at),
            "citation": self.citation_json(),
        }


@dataclass(frozen=True)
class Side:
    """One run of the diff: where it came from and its claims."""

    label: str
    path: str
    model: str
    terminal: str
    max_stage: int
    run: RunDoc
    claims: tuple[ClaimView, ...]
    run_id: str | None = None
    """The run directory's name (the runs index's run id), when known."""

    @property
    def unsupported(self) -> int:
        """Claims whose verdict is Not Fully Supported."""
        return sum(1 for c in self.claims if c.unsupported)

    def to_json(self) -> dict[str, Any]:
        """The side in the diff document."""
        n = len(self.claims)
        return {
            "label": self.label,
            "path": self.path,
            "model": self.model,
            "terminal": self.terminal,
            "run_id": self.run_id,
            "started": self.run.started,
            "claims": n,
            "unsupported": self.unsupported,
            "unsupported_share": round(self.unsupported / n, 6) if n else None,
        }


@dataclass(frozen=True)
class Pair:
    """A claim of A and its match in B; one of them is None for a claim of one run only."""

    key: str
    a: ClaimView | None
    b: ClaimView | None

    @property
    def status(self) -> str:
        """`matched`, `added` (only in B) or `removed` (only in A)."""
        return "matched" if self.a and self.b else ("added" if self.b else "removed")

    @property
    def newly_unsupported(self) -> bool:
        """Unsupported in B and not in A (or not in A at all)."""
        return self.b is not None and self.b.unsupported and not (self.a and self.a.unsupported)

    @property
    def resolved(self) -> bool:
        """Unsupported in A, matched and not unsupported in B."""
        return (
            self.a is not None and self.b is not None and self.a.unsupported
        ) and not self.b.unsupported

    @property
    def flipped(self) -> bool:
        """Matched with a different verdict (an error counts as a verdict of its own)."""
        return self.a is not None and self.b is not None and self.a.verdict != self.b.verdict

    @property
    def evidence_added(self) -> list[str]:
        """Evidence sentences of B that A did not select (matched claims only)."""
        if self.a is None or self.b is None:
            return []
        return sorted(self.b.evidence - self.a.evidence, key=natural_key)

    @property
    def evidence_removed(self) -> list[str]:
        """Evidence sentences of A that B did not select (matched claims only)."""
        if self.a is None or self.b is None:
            return []
        return sorted(self.a.evidence - self.b.evidence, key=natural_key)

    @property
    def trail_moved(self) -> bool:
        """Matched, the same verdict, another error stage or blamed node."""
        return (
            self.a is not None
            and self.b is not None
            and self.a.verdict == self.b.verdict
            and (
                self.a.error_stages != self.b.error_stages or self.a.entered_at != self.b.entered_at
            )
        )

    @property
    def citation_changed(self) -> bool:
        """Matched, and both runs gave a citation status, another one."""
        return (
            self.a is not None
            and self.b is not None
            and self.a.citation is not None
            and self.b.citation is not None
            and self.a.citation != self.b.citation
        )

    @property
    def newly_miscited(self) -> bool:
        """Miscited in B and not in A (a matched A claim with a status, or no A claim)."""
        if self.b is None or not self.b.miscited:
            return False
        return self.a is None or (self.a.citation is not None and not self.a.miscited)

    @property
    def changed(self) -> bool:
        """Anything to report: unmatched, flipped, other evidence, a moved trail, another
        citation status."""
        if self.a is None or self.b is None:
            return True
        return (
            self.flipped
            or self.a.evidence != self.b.evidence
            or self.trail_moved
            or self.citation_changed
        )

    def to_json(self) -> dict[str, Any]:
        """One entry of the diff document's `changes`."""
        return {
            "key": self.key,
            "status": self.status,
            "a": self.a.to_json() if self.a else None,
            "b": self.b.to_json() if self.b else None,
            "flipped": self.flipped,
            "newly_unsupported": self.newly_unsupported,
            "resolved": self.resolved,
            "trail_moved": self.trail_moved,
            "citation_changed": self.citation_changed,
            "newly_miscited": self.newly_miscited,
            "evidence_added": self.evidence_added,
            "evidence_removed": self.evidence_removed,
        }


@dataclass(frozen=True)
class Diff:
    """Two runs compared (`compare`)."""

    a: Side
    b: Side
    pairs: tuple[Pair, ...]
    duplicate_keys: int
    share: ShareDifference

    @property
    def newly_unsupported(self) -> list[Pair]:
        """Claims that became unsupported, B's order."""
        return [p for p in self.pairs if p.newly_unsupported]

    @property
    def resolved(self) -> list[Pair]:
        """Claims unsupported in A and no longer in B."""
        return [p for p in self.pairs if p.resolved]

    @property
    def flipped(self) -> list[Pair]:
        """Matched claims whose verdict changed."""
        return [p for p in self.pairs if p.flipped]

    @property
    def evidence_changed(self) -> list[Pair]:
        """Matched claims whose evidence sentences changed."""
        return [p for p in self.pairs if p.a and p.b and p.a.evidence != p.b.evidence]

    @property
    def trail_moved(self) -> list[Pair]:
        """Matched claims with the same verdict whose error stage or blamed node changed."""
        return [p for p in self.pairs if p.trail_moved]

    @property
    def citation_changed(self) -> list[Pair]:
        """Matched claims whose citation status changed."""
        return [p for p in self.pairs if p.citation_changed]

    @property
    def newly_miscited(self) -> list[Pair]:
        """Claims that became miscited, B's order."""
        return [p for p in self.pairs if p.newly_miscited]

    def count(self, status: str) -> int:
        """Pairs of a status (`matched`, `added`, `removed`)."""
        return sum(1 for p in self.pairs if p.status == status)

    def stages(self) -> dict[str, int]:
        """Newly unsupported claims per stage where they entered ("not identifiable" apart)."""
        out: dict[str, int] = {}
        for p in self.newly_unsupported:
            assert p.b is not None
            names = [str(s) for s in p.b.error_stages] or ["not identifiable"]
            for name in names:
                out[name] = out.get(name, 0) + 1
        return dict(sorted(out.items(), key=lambda kv: natural_key(kv[0])))


def gate_failed(diff: Diff, max_new_unsupported: int | None) -> bool:
    """The `--max-new-unsupported N` gate: more than N newly unsupported claims."""
    return max_new_unsupported is not None and len(diff.newly_unsupported) > max_new_unsupported


# -- reading a side -------------------------------------------------------------------------------


def claim_view(
    claim: ClaimSource, roots: set[str], terminal: str, *, use_reviews: bool = True
) -> ClaimView:
    """One report claim as the diff sees it. A claim's `review` (report version 2) overrides its
    verdict when `use_reviews`."""
    c = as_claim(claim)
    model_verdict = c.verdict.value if c.verdict is not None else None
    review = c.review if use_reviews else None
    verdict = review.verdict.value if review is not None else model_verdict
    evidence: set[str] = set()
    sources: set[str] = set()
    for it in c.iterations:
        for e in it.evidence:
            evidence.add(f"{e.node_id}#{e.sentence_index}")
            if e.node_id in roots:
                sources.add(e.node_id)
    sources.update(p[-1] for p in c.provenance if p)
    ct = c.citation
    stages = tuple(c.error_stages)
    status = c.error_stage_status.value
    entered = blamed_nodes(c, roots, terminal)
    if review is not None and review.error_stage is not None:
        # A person set where the content entered (`veritrail review --stage --node`).
        stages = (review.error_stage,)
        status = ErrorStageStatus.IDENTIFIED.value
        entered = tuple(review.nodes)
    return ClaimView(
        id=c.id,
        text=c.text,
        key=claim_key(c.text),
        verdict=verdict,
        model_verdict=model_verdict,
        reviewed=review is not None,
        error_stages=stages,
        error_stage_status=status,
        entered_at=entered,
        evidence=frozenset(evidence),
        sources=frozenset(sources),
        citation=ct.kind.value if ct is not None and ct.kind is not None else None,
        cited_nodes=tuple(ct.cited_nodes) if ct is not None else (),
        supporting_nodes=tuple(ct.supporting_nodes) if ct is not None else (),
    )


def side_from_report(
    report: ReportSource,
    *,
    label: str,
    path: str = "",
    use_reviews: bool = True,
    run_id: str | None = None,
) -> Side:
    """A side from a report (any version this veritrail reads)."""
    try:
        doc = as_report(report)
    except ReportContractError as exc:
        raise DiffInputError(f"{path or label}: {exc}") from None
    roots = dag_roots(doc.dag)
    terminal = doc.dag.terminal
    views = tuple(claim_view(c, roots, terminal, use_reviews=use_reviews) for c in doc.claims)
    run_dir = doc.run.run_dir
    return Side(
        label=label,
        path=path,
        model=doc.model,
        terminal=terminal,
        max_stage=doc.dag.max_stage or 0,
        run=doc.run,
        claims=views,
        run_id=run_id or (Path(run_dir).name if run_dir else None),
    )


def report_path_of(path: str | Path) -> Path:
    """The report file of a diff argument: a report file itself, or a run directory's
    report.json."""
    p = Path(path)
    if p.is_dir():
        rep = p / "report.json"
        if not rep.is_file():
            raise DiffInputError(
                f"{p}: no report.json in this directory (an unfinished run: "
                f"`veritrail resume {p}` finishes it)"
            )
        return rep
    if not p.exists():
        raise DiffInputError(f"{p}: no such run directory or report file")
    return p


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """The garbage collector off for a while (nested uses leave it off until the outermost
    ends)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def read_report(path: str | Path) -> dict[str, Any]:
    """A report file, as `report.read_report` reads it, faster for what the diff keeps.

    The file passes the input rules of every file (`textio`: UTF-8, a BOM dropped, strict JSON,
    no lone surrogate) but not the nesting-depth walk over the whole document: the diff reads
    fixed fields of each claim and copies none of the rest, and the walk was half the time of
    reading a large report. Anything but a report of a version this veritrail reads goes through
    `read_report`, whose checks and messages decide."""
    from ..report import ReportFormatError, is_readable_report, read_report
    from ..textio import InputError, parse_json, read_input_text

    try:
        text = read_input_text(path, "report")
        with _collector_paused():  # its passes over the growing heap cost as much as the parse
            doc = parse_json(text, path, "report", max_depth=None)
    except InputError as exc:
        raise ReportFormatError(str(exc)) from None
    if is_readable_report(doc):
        return doc  # type: ignore[no-any-return]
    return read_report(path)


def load_side(path: str | Path, *, label: str, use_reviews: bool = True) -> Side:
    """Read one side of the diff: a run directory (its report.json, with the reviews the run
    directory holds) or a report file."""
    from ..report import load_report_doc

    rep_path = report_path_of(path)
    with _collector_paused():  # many small objects, none of them garbage
        report = load_report_doc(rep_path)  # validated once, in one pass over the text
        if use_reviews and Path(path).is_dir():
            from .reviewing import doc_with_reviews

            # The run directory's reviews.jsonl is the truth; report.json may predate a review.
            report = doc_with_reviews(report, Path(path))
        run_id = Path(path).resolve().name if Path(path).is_dir() else None
        return side_from_report(
            report, label=label, path=str(path), use_reviews=use_reviews, run_id=run_id
        )


# -- matching -------------------------------------------------------------------------------------


def _group(claims: Iterable[ClaimView]) -> dict[str, list[ClaimView]]:
    groups: dict[str, list[ClaimView]] = {}
    for c in claims:
        groups.setdefault(c.key, []).append(c)
    for group in groups.values():
        if len(group) > 1:
            group.sort(key=lambda c: natural_key(c.id))
    return groups


def _pair_duplicates(
    key: str, a_list: Sequence[ClaimView], b_list: Sequence[ClaimView]
) -> list[Pair]:
    """Pairs of one key with several claims on a side (see the module docstring)."""
    pairs: list[Pair] = []
    if len(a_list) * len(b_list) <= _PAIR_BY_SOURCES_LIMIT:
        free = list(b_list)
        for a in a_list:
            if not free:
                pairs.append(Pair(key, a, None))
                continue
            # Most shared sources first; `max` keeps the first of equals: claim-id order.
            best = max(free, key=lambda b: _overlap(a.sources, b.sources))
            free.remove(best)
            pairs.append(Pair(key, a, best))
        pairs.extend(Pair(key, None, b) for b in free)
    else:
        n = min(len(a_list), len(b_list))
        pairs.extend(Pair(key, a, b) for a, b in zip(a_list[:n], b_list[:n], strict=True))
        pairs.extend(Pair(key, a, None) for a in a_list[n:])
        pairs.extend(Pair(key, None, b) for b in b_list[n:])
    return pairs


def _overlap(x: frozenset[str], y: frozenset[str]) -> float:
    union = len(x | y)
    return len(x & y) / union if union else 0.0


def match(a: Side, b: Side) -> tuple[list[Pair], int]:
    """Every claim of both runs in pairs (B's claim order, then A's unmatched claims), and how
    many keys had several claims on a side."""
    ga, gb = _group(a.claims), _group(b.claims)
    by_b_id: dict[str, Pair] = {}
    only_a: list[Pair] = []
    duplicates = 0
    for key in ga.keys() | gb.keys():
        a_list, b_list = ga.get(key, []), gb.get(key, [])
        if len(a_list) <= 1 and len(b_list) <= 1:
            found = [Pair(key, a_list[0] if a_list else None, b_list[0] if b_list else None)]
        else:
            duplicates += 1
            found = _pair_duplicates(key, a_list, b_list)
        for p in found:
            if p.b is not None:
                by_b_id[p.b.id] = p
            else:
                only_a.append(p)
    ordered = [by_b_id[c.id] for c in b.claims if c.id in by_b_id]
    a_order = {c.id: i for i, c in enumerate(a.claims)}
    only_a.sort(key=lambda p: a_order[p.a.id] if p.a else 0)
    return ordered + only_a, duplicates


def outcomes(pairs: Iterable[Pair]) -> Outcomes:
    """The unsupported counts the bootstrap needs."""
    table = [[0, 0], [0, 0]]
    only_a = only_a_u = only_b = only_b_u = 0
    for p in pairs:
        if p.a is not None and p.b is not None:
            table[int(p.a.unsupported)][int(p.b.unsupported)] += 1
        elif p.a is not None:
            only_a += 1
            only_a_u += p.a.unsupported
        elif p.b is not None:
            only_b += 1
            only_b_u += p.b.unsupported
    return Outcomes(
        ((table[0][0], table[0][1]), (table[1][0], table[1][1])), only_a, only_a_u, only_b, only_b_u
    )


def compare(
    a: Side, b: Side, *, resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED
) -> Diff:
    """Match the claims of two runs and measure what changed."""
    pairs, duplicates = match(a, b)
    share = share_difference(outcomes(pairs), resamples=resamples, seed=seed)
    return Diff(a, b, tuple(pairs), duplicates, share)


def diff_paths(
    path_a: str | Path,
    path_b: str | Path,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    use_reviews: bool = True,
) -> Diff:
    """`compare` two run directories or report files."""
    a = load_side(path_a, label="A", use_reviews=use_reviews)
    b = load_side(path_b, label="B", use_reviews=use_reviews)
    return compare(a, b, resamples=resamples, seed=seed)


def diff_document(diff: Diff, *, max_new_unsupported: int | None = None) -> dict[str, Any]:
    """The versioned JSON document of a diff (`schemas/diff.schema.json`)."""
    newly = diff.newly_unsupported
    return {
        "format": DIFF_FORMAT,
        "version": DIFF_VERSION,
        "a": diff.a.to_json(),
        "b": diff.b.to_json(),
        "matching": {
            "key": "claim text: NFKC, case-folded, runs of non-letters and non-digits one space",
            "matched": diff.count("matched"),
            "added": diff.count("added"),
            "removed": diff.count("removed"),
            "duplicate_keys": diff.duplicate_keys,
            "same_terminal": diff.a.terminal == diff.b.terminal,
        },
        "counts": {
            "newly_unsupported": len(newly),
            "resolved": len(diff.resolved),
            "flipped": len(diff.flipped),
            "evidence_changed": len(diff.evidence_changed),
            "trail_moved": len(diff.trail_moved),
            "citation_changed": len(diff.citation_changed),
            "newly_miscited": len(diff.newly_miscited),
        },
        "share": diff.share.to_json(),
        "stages": diff.stages(),
        "gate": {
            "max_new_unsupported": max_new_unsupported,
            "newly_unsupported": len(newly),
            "failed": gate_failed(diff, max_new_unsupported),
        },
        "changes": [p.to_json() for p in diff.pairs if p.changed],
    }


__all__ = [
    "DIFF_FORMAT",
    "DIFF_VERSION",
    "ClaimView",
    "Diff",
    "DiffInputError",
    "Pair",
    "Side",
    "claim_key",
    "claim_view",
    "compare",
    "diff_document",
    "diff_paths",
    "gate_failed",
    "load_side",
    "match",
    "natural_key",
    "outcomes",
    "read_report",
    "report_path_of",
    "side_from_report",
]
