"""`assert_supported`: a pytest-style assertion that an answer is supported by its sources.

It runs `veritrail.check` and fails the way `veritrail check --max-unsupported RATE` exits
non-zero: when the share of claims judged Not Fully Supported is above `max_unsupported`
(default 0: every claim must be supported), or when a claim could not be verified. Inconclusive
claims do not fail it (as they do not fail the CLI's gate); `report.inconclusive` lists them.

Which model judged is never left unsaid (issue 43): the failure message starts with the model and,
for the embedded model or a demonstration model, its label ("demonstration, not a judge"); and
when the verdicts come from one of those, a `NotAJudgeWarning` says so once per model and
process. Decision: warn rather than require a model, so that the quick start's keyless
`--model demo/overlap` and a laptop's embedded model still run the example; pytest lists the
warning in its summary, so a suite that silently fell back to the embedded model is seen to.
Without the embedded model installed, no model configured is bad input (`JobInputError`, the
same one line as `veritrail check`'s).
"""

from __future__ import annotations

import warnings
from typing import Any

from ..api import PathLike, SourcesLike, _source_texts, check
from ..records import ClaimResult, SentenceRef
from ..results import Report

MAX_LISTED = 20
"""Claims listed in the failure message (the rest are counted)."""

EVIDENCE_SHOWN = 3
"""Evidence sentences shown per claim."""


class NotAJudgeWarning(UserWarning):
    """`assert_supported`'s verdicts came from the embedded or a demonstration model."""


_warned: set[str] = set()
"""Models `NotAJudgeWarning` was already given for (once per model and process)."""


def model_words(report: Report) -> str:
    """ "model demo/overlap (demonstration, not a judge)", or "model openai/gpt-4o"."""
    from ..report import report_model_kind

    _, label = report_model_kind(report)
    return f"model {report.doc.model}" + (f" ({label})" if label else "")


def _warn_not_a_judge(report: Report) -> None:
    from ..report import report_model_kind

    kind, label = report_model_kind(report)
    name = report.doc.model
    if kind in ("demonstration", "embedded") and name not in _warned:
        _warned.add(name)
        warnings.warn(
            f"assert_supported: verdicts by {name}, {label}; give model= or set "
            "VERITRAIL_MODEL to a judge model for verdicts that mean something",
            NotAJudgeWarning,
            stacklevel=3,
        )


def assert_supported(
    answer: PathLike,
    sources: SourcesLike,
    *,
    model: str | None = None,
    max_unsupported: float = 0.0,
    **settings: Any,
) -> Report:
    """Assert that `answer` is supported by `sources`; return the `Report` when it is.

    Arguments are those of `veritrail.check` (`claims=`, `question=`, `oracle=`, `base_url=`,
    `chunk_sentences=`, any setting). Raises `AssertionError` whose message lists every
    unsupported claim with the judge's reasoning and the nearest evidence sentences (those the
    run selected; when it selected none, the source sentences closest in wording), and every claim
    that could not be verified with its error. Bad input raises `veritrail.JobInputError`.
    """
    report = check(answer, sources, model=model, max_unsupported=max_unsupported, **settings)
    _warn_not_a_judge(report)
    if report.ok:
        return report
    raise AssertionError(failure_message(report, sources))


def failure_message(report: Report, sources: SourcesLike | None = None) -> str:
    """The `assert_supported` failure text for `report` (`sources` for the nearest sentences
    of claims that found no evidence)."""
    s = report.summary
    lines: list[str] = [f"veritrail, {model_words(report)}:"]
    if report.unsupported and report.max_unsupported is not None:
        allowed = report.max_unsupported
        lines.append(
            f"{s.unsupported} of {s.claims} claims are not supported by the sources "
            f"({100 * s.unsupported_share:.1f}%, allowed {100 * allowed:.1f}%):"
        )
        pool = _source_sentences(sources) if sources is not None else []
        for r in report.unsupported[:MAX_LISTED]:
            lines.extend(_claim_lines(r, pool))
        if len(report.unsupported) > MAX_LISTED:
            lines.append(f"  ... and {len(report.unsupported) - MAX_LISTED} more (see the report)")
    if report.errors:
        lines.append(
            f"{len(report.errors)} of {s.claims} claims could not be verified "
            "(the model failed; run again, finished claims are cached):"
        )
        for r in report.errors[:MAX_LISTED]:
            lines.append(f"- {r.claim.id}: {r.claim.text}")
            lines.append(f"    error: {r.error or 'unknown'}")
    return "\n".join(lines)


def _claim_lines(r: ClaimResult, pool: list[tuple[str, str]]) -> list[str]:
    out = [f"- {r.claim.id}: {r.claim.text}"]
    if r.reasoning:
        out.append(f"    reasoning: {r.reasoning}")
    found = _evidence(r)
    if found:
        out.append("    evidence found:")
        out.extend(f"      [{e.node_id} #{e.sentence_index}] {e.text}" for e in found)
    else:
        near = _nearest(r.claim.text, pool)
        if near:
            out.append("    no evidence was selected; closest source sentences:")
            out.extend(f"      [{name}] {text}" for name, text in near)
        else:
            out.append("    no evidence was selected")
    return out


def _evidence(r: ClaimResult) -> list[SentenceRef]:
    """The claim's evidence sentences, closest to the sources first (its last iterations reach
    the deepest nodes), without repeats."""
    seen: set[tuple[str, int]] = set()
    out: list[SentenceRef] = []
    for it in reversed(r.iterations):
        for e in it.evidence:
            key = (e.node_id, e.sentence_index)
            if key not in seen:
                seen.add(key)
                out.append(e)
    return out[:EVIDENCE_SHOWN]


def _source_sentences(sources: SourcesLike) -> list[tuple[str, str]]:
    from ..method.segment import split_sentences

    try:
        texts, _ = _source_texts(sources)
    except (OSError, ValueError):
        return []
    return [(t.name, sent) for t in texts for sent in split_sentences(t.text)]


def _nearest(claim: str, pool: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The source sentences most alike `claim` in wording (rapidfuzz token-set ratio, a
    maintained C implementation, rather than a hand-written overlap score)."""
    if not pool:
        return []
    from rapidfuzz import fuzz, process

    hits = process.extract(
        claim, [s for _, s in pool], scorer=fuzz.token_set_ratio, limit=EVIDENCE_SHOWN
    )
    return [pool[i] for _, score, i in hits if score > 0]


__all__ = ["NotAJudgeWarning", "assert_supported", "failure_message", "model_words"]
