"""Citation checking (docs/citations.md): the final output's own citation markers, each claim's
markers mapped to DAG nodes, and each claim's `CitationStatus` from its verification result.

A run with `--citations auto` (every marker style below) or `--citations PATTERN` (a regular
expression whose first group, or group `ref`, is the reference) gets a `citation` object on each
claim of its report and a count per status in `summary.citations` (`attach_citations`, called by
`run.ending.end_run`); `--max-miscited RATE` is the gate over them (`miscited_gate`, applied by
`outcome.exit_code`).

Marker styles of `auto`: `[1]`, `[1, 3]`, `[1-3]`, `[^1]` (a footnote; its definition line
`[^1]: name-or-URL` names the source when it has one), `【1】` and `【1†name】`, markdown links
`[text](URL)`, `(Source: name)` / `(Sources: a; b)`, and `[node-id]` when it is a node of the
DAG.

A reference names nodes by (first match wins): a 1-based index into the sources in the DAG's order
(`check`'s SOURCE files as given; nodes `NAME#N` of one NAME are one source, any other root is a
source of its own), a node id, a source name (the file as given, its base name or its stem), or a
URL (the DAG's `meta.urls`, `{node id or source name: URL}`, or a source whose base name is the
URL's last path segment). A reference that names nothing is kept in `unresolved`.

A claim's markers are those of the terminal sentences it came from (`sentence_indices`); a marker
at the very start of a sentence (`... in 1850.[2] The ...` splits as `[2] The ...`) belongs to the
sentence before it. A claim given with no sentence indices is found in the final output by its
text (`located_by` says how).

A cited node that is not a source (`verify`'s summary cited as `[summary-2]`) is followed down
to the sources its own markers name, or to its inputs when it carries none (`follow_citations`);
the status is computed against those, listed as the claim's `followed_nodes`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from .errors import InputProblem
from .method.segment import sentence_spans
from .records import CitationStatus, Verdict

if TYPE_CHECKING:
    from .dag import Dag
    from .report import ReportSource

OFF = "off"
AUTO = "auto"

_NUM_LIST = r"\d+(?:\s*[-–]\s*\d+)?(?:\s*[,;]\s*\d+(?:\s*[-–]\s*\d+)?)*"
# One alternation so that overlapping styles are read once, left to right; the footnote form
# must come before the bracketed numbers, a markdown link before a bare bracket.
_AUTO = re.compile(
    r"\[\^(?P<foot>[^\]\s]+)\](?!:)"
    r"|\[(?P<link_text>[^\]\n]*)\]\((?P<url>[^)\s]+)(?:\s+\"[^\"]*\")?\)"
    rf"|\[(?P<nums>{_NUM_LIST})\](?!\()"
    r"|【(?P<cjk>[^】]+)】"
    r"|\((?:Sources?|Source\(s\))\s*:\s*(?P<names>[^)\n]+)\)"
    # `[summary-2]`: a marker only when it is a node id of the DAG (`find_markers`' node_ids),
    # so bracketed words in prose stay prose.
    r"|\[(?P<node>[^\]\s\[]+)\](?!\()",
    re.IGNORECASE,
)
_FOOTNOTE_DEF = re.compile(r"^\[\^(?P<label>[^\]\s]+)\]:[ \t]*(?P<body>.*)$", re.MULTILINE)
_URL = re.compile(r"https?://\S+")


class CitationOptionError(InputProblem, ValueError):
    """A bad `--citations` value or `--max-miscited` rate (exit 2, before any model call)."""


@dataclass(frozen=True, slots=True)
class CitationRule:
    """How markers are found: the built-in styles (`pattern` None) or the user's expression."""

    spec: str
    pattern: re.Pattern[str] | None = None


@dataclass(frozen=True, slots=True)
class Marker:
    """One citation marker of the final output: its text, where it is, what it refers to."""

    text: str
    start: int
    end: int
    refs: tuple[str, ...]


def parse_rule(value: str | None) -> CitationRule | None:
    """`--citations`'s value: None or `off` → no checking, `auto` → the built-in styles, anything
    else a regular expression with a group (`ref` or the first) holding the reference."""
    if value is None or not value.strip() or value.strip().lower() == OFF:
        return None
    if value.strip().lower() == AUTO:
        return CitationRule(AUTO)
    try:
        pattern = re.compile(value)
    except re.error as exc:
        raise CitationOptionError(
            f"--citations {value!r} is not a regular expression ({exc})"
        ) from None
    if pattern.groups < 1:
        raise CitationOptionError(
            f"--citations {value!r} needs a group holding the reference, e.g. '\\{{(\\d+)\\}}'"
        )
    if pattern.search("") is not None:
        raise CitationOptionError(f"--citations {value!r} matches empty text")
    return CitationRule(value, pattern)


def check_gate_rate(rate: float | None) -> None:
    """`--max-miscited` is a share between 0 and 1."""
    if rate is not None and not 0.0 <= rate <= 1.0:
        raise CitationOptionError(f"--max-miscited must be between 0 and 1 (got {rate:g})")


def _split_refs(body: str) -> tuple[str, ...]:
    """`1, 3-4` → 1, 3, 4; `a.txt; b.txt` → a.txt, b.txt."""
    out: list[str] = []
    for part in re.split(r"\s*[,;]\s*", body.strip()):
        if not part:
            continue
        span = re.fullmatch(r"(\d+)\s*[-–]\s*(\d+)", part)
        if span and int(span[1]) <= int(span[2]) and int(span[2]) - int(span[1]) < 100:
            out.extend(str(i) for i in range(int(span[1]), int(span[2]) + 1))
        else:
            out.append(part)
    return tuple(out)


def find_markers(text: str, rule: CitationRule, node_ids: Iterable[str] = ()) -> list[Marker]:
    """The markers of `text`, in order. Footnote definition lines are not markers: their body
    names the source of `[^label]` when it holds a URL or a name. With `auto`, a node id in
    brackets (`[summary-2]`) is a marker too when it is one of `node_ids`."""
    if rule.pattern is not None:
        out: list[Marker] = []
        for m in rule.pattern.finditer(text):
            if m.end() == m.start():
                continue
            group = m.group("ref") if "ref" in rule.pattern.groupindex else m.group(1)
            if group:
                out.append(Marker(m.group(0), m.start(), m.end(), _split_refs(group)))
        return out
    notes = {d["label"]: d["body"].strip() for d in _FOOTNOTE_DEF.finditer(text)}
    defs = [(d.start(), d.end()) for d in _FOOTNOTE_DEF.finditer(text)]
    ids = frozenset(node_ids)
    out = []
    for m in _AUTO.finditer(text):
        if any(a <= m.start() < b for a, b in defs):
            continue
        if m["node"] is not None:
            if m["node"] not in ids:
                continue
            refs: tuple[str, ...] = (m["node"],)
        elif m["foot"] is not None:
            body = notes.get(m["foot"], "")
            url = _URL.search(body)
            ref = url.group(0).rstrip(".,;)") if url else (body or m["foot"])
            refs = (ref,) if body else (m["foot"],)
        elif m["url"] is not None:
            refs = (m["url"],)
        elif m["nums"] is not None:
            refs = _split_refs(m["nums"])
        elif m["cjk"] is not None:
            # 【3†report.pdf】: the index before the dagger, the name after it as a fallback.
            refs = tuple(p.strip() for p in m["cjk"].split("†") if p.strip())[:1]
        else:
            refs = _split_refs(m["names"])
        out.append(Marker(m.group(0), m.start(), m.end(), refs))
    return out


@dataclass(frozen=True, slots=True)
class SourceIndex:
    """The DAG's sources in order and the ways a reference names nodes."""

    sources: tuple[tuple[str, tuple[str, ...]], ...]
    """(source name, its node ids) in the DAG's order."""
    node_ids: frozenset[str]
    urls: Mapping[str, tuple[str, ...]]

    @classmethod
    def of(cls, dag: Dag) -> SourceIndex:
        """Roots grouped into sources: `NAME#N` chunks of one NAME are one source."""
        groups: dict[str, list[str]] = {}
        for node in dag:
            if not dag.is_root(node.id):
                continue
            name, sep, num = node.id.rpartition("#")
            key = name if sep and name and num.isdigit() else node.id
            groups.setdefault(key, []).append(node.id)
        sources = tuple((k, tuple(v)) for k, v in groups.items())
        ids = frozenset(n.id for n in dag)
        urls: dict[str, tuple[str, ...]] = {}
        meta_urls = dag.meta.get("urls") if isinstance(dag.meta, Mapping) else None
        if isinstance(meta_urls, Mapping):
            for key, url in meta_urls.items():
                if not isinstance(url, str):
                    continue
                named = dict(sources).get(str(key)) or ((str(key),) if key in ids else ())
                if named:
                    urls[_norm_url(url)] = urls.get(_norm_url(url), ()) + tuple(named)
        return cls(sources, ids, urls)

    def resolve(self, ref: str) -> tuple[str, ...]:
        """The node ids `ref` names (empty when it names none)."""
        ref = ref.strip()
        if ref.isdigit():
            k = int(ref)
            return self.sources[k - 1][1] if 1 <= k <= len(self.sources) else ()
        if ref in self.node_ids:
            return (ref,)
        by_name = self._by_name(ref)
        if by_name:
            return by_name
        if "://" in ref:
            got = self.urls.get(_norm_url(ref))
            if got:
                return got
            last = PurePosixPath(urlsplit(ref).path).name
            return self._by_name(last) if last else ()
        return ()

    def _by_name(self, ref: str) -> tuple[str, ...]:
        if not ref:
            return ()
        for exact in (True, False):
            for name, nodes in self.sources:
                p = PurePosixPath(name.replace("\\", "/"))
                if (name == ref) if exact else ref in (p.name, p.stem):
                    return nodes
        return ()


def _norm_url(url: str) -> str:
    return url.strip().rstrip("/").lower()


def _sentence_of(spans: Sequence[tuple[int, int]], text: str, marker: Marker) -> int | None:
    """The sentence a marker belongs to: the one holding it, or the one before when the marker
    opens its sentence (only other markers and spaces before it in that sentence)."""
    for i, (a, b) in enumerate(spans):
        if a <= marker.start < b:
            if i > 0 and not text[a : marker.start].strip():
                return i - 1
            return i
        if marker.start < a:
            return max(i - 1, 0) if i else 0
    return len(spans) - 1 if spans else None


def markers_by_sentence(
    text: str, spans: Sequence[tuple[int, int]], markers: Iterable[Marker]
) -> dict[int, list[Marker]]:
    """`markers` of `text` grouped by the sentence (index into `spans`) each belongs to
    (`_sentence_of`): the one rule for which sentence a marker cites from, shared with
    `veritrail inject`'s citation kinds."""
    out: dict[int, list[Marker]] = {}
    for marker in markers:
        at = _sentence_of(spans, text, marker)
        if at is not None:
            out.setdefault(at, []).append(marker)
    return out


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"\w+", text.lower()) if len(w) > 2}


def locate_claim(
    claim_text: str,
    indices: Sequence[int],
    text: str,
    spans: Sequence[tuple[int, int]],
) -> tuple[tuple[int, ...], str]:
    """The terminal sentences of a claim and how they were found: `sentences` (its own
    `sentence_indices`), `text` (its text found in the output), `overlap` (the sentence sharing
    the most words with it), `none`."""
    if indices:
        return tuple(i for i in indices if 0 <= i < len(spans)), "sentences"
    flat = " ".join(text.split()).lower()
    needle = " ".join(claim_text.split()).lower().rstrip(".")
    if needle:
        # Offsets in `flat` differ from `text`'s; map sentences through their flattened forms.
        at = flat.find(needle)
        if at >= 0:
            pos, hit = 0, []
            for i, (a, b) in enumerate(spans):
                piece = " ".join(text[a:b].split()).lower()
                start = flat.find(piece, pos)
                end = start + len(piece)
                pos = max(end, pos)
                if start >= 0 and start < at + len(needle) and end > at:
                    hit.append(i)
            if hit:
                return tuple(hit), "text"
    want = _words(claim_text)
    best, best_i = 0.0, -1
    for i, (a, b) in enumerate(spans):
        have = _words(text[a:b])
        if want and have:
            score = len(want & have) / len(want | have)
            if score > best:
                best, best_i = score, i
    return ((best_i,), "overlap") if best_i >= 0 else ((), "none")


def citation_status(
    verdict: Verdict | None,
    *,
    has_markers: bool,
    cited: Iterable[str],
    evidence_nodes: Iterable[str],
    evidence_roots: Iterable[str],
) -> CitationStatus | None:
    """The claim's status (docs/citations.md#statuses); None for a claim with no verdict.

    `evidence_nodes` are the nodes the claim's evidence came from (its provenance paths and the
    nodes any iteration selected evidence from), `evidence_roots` the roots among them: a cited
    node "holds evidence" when it is one of `evidence_nodes`."""
    if verdict is None:
        return None
    if not has_markers:
        return CitationStatus.UNCITED
    backed = bool(set(cited) & set(evidence_nodes))
    if verdict is Verdict.FULLY_SUPPORTED:
        return CitationStatus.SUPPORTED_BY_CITED if backed else CitationStatus.MISATTRIBUTED
    if any(True for _ in evidence_roots) and not backed:
        return CitationStatus.CITED_NOT_SUPPORTING
    return CitationStatus.UNSUPPORTED


def follow_citations(
    dag: Dag,
    index: SourceIndex,
    rule: CitationRule,
    cited: Sequence[str],
    evidence_sentences: Mapping[str, frozenset[int]] | None = None,
) -> list[str]:
    """The sources a claim cites once its cited nodes are followed down (docs/citations.md,
    "Citations through intermediate nodes"): a root is itself; a node with sources is replaced
    by what the markers of its own text name (only the markers of its sentences that hold the
    claim's evidence, `evidence_sentences[node]`, when some of those carry markers), followed
    the same way; a node whose text (or whose evidence sentences) carries no marker that names a
    node stands for its own inputs, its sources in the DAG, followed the same way. Each node is
    visited once, so a marker that points back up the chain ends there."""
    chosen = evidence_sentences or {}
    out: list[str] = []
    seen: set[str] = set()
    queue = list(cited)
    while queue:
        nid = queue.pop(0)
        if nid in seen or nid not in index.node_ids:
            continue
        seen.add(nid)
        if dag.is_root(nid):
            out.append(nid)
            continue
        text = dag.node(nid).text
        markers = find_markers(text, rule, index.node_ids)
        wanted = chosen.get(nid, frozenset())
        if markers and wanted:
            spans = sentence_spans(text)
            markers = [m for m in markers if _sentence_of(spans, text, m) in wanted]
        targets = [t for m in markers for ref in m.refs for t in index.resolve(ref)]
        queue.extend(targets or dag.sources(nid))
    return list(dict.fromkeys(out))


def attach_citations(report: dict[str, Any], dag: Dag, spec: str | None) -> dict[str, Any]:
    """`report` (as `report.build_report` wrote it) with each claim's `citation` object and
    `summary.citations`, the counts per status; the report unchanged when `spec` is off."""
    from .report_model import parse_claim

    rule = parse_rule(spec)
    if rule is None:
        return report
    text = dag.node(dag.terminal).text
    spans = sentence_spans(text)
    index = SourceIndex.of(dag)
    by_sentence = markers_by_sentence(text, spans, find_markers(text, rule, index.node_ids))
    counts = {s.value: 0 for s in CitationStatus}
    claims = []
    for raw in report.get("claims", []):
        c = parse_claim(raw)
        sentences, located_by = locate_claim(c.text, c.sentence_indices, text, spans)
        markers = [m for i in sentences for m in by_sentence.get(i, [])]
        refs = list(dict.fromkeys(r for m in markers for r in m.refs))
        cited: list[str] = []
        unresolved: list[str] = []
        for ref in refs:
            got = index.resolve(ref)
            cited.extend(got)
            if not got:
                unresolved.append(ref)
        cited = list(dict.fromkeys(cited))
        # A cited node that is not a source (a summary the answer cites) is followed down to the
        # sources its own markers name; the status is computed against those.
        followed = cited
        if any(not dag.is_root(n) for n in cited):
            evidence_sentences: dict[str, set[int]] = {}
            for it in c.iterations:
                for ev in it.evidence:
                    evidence_sentences.setdefault(ev.node_id, set()).add(ev.sentence_index)
            followed = follow_citations(
                dag,
                index,
                rule,
                cited,
                {k: frozenset(v) for k, v in evidence_sentences.items()},
            )
        # Provenance is written for Fully Supported and Inconclusive claims only; the nodes
        # evidence was selected from, in any iteration, say where a Not Fully Supported
        # claim's partial evidence sits.
        on_paths = list(
            dict.fromkeys(
                [n for path in c.provenance for n in path]
                + [n for it in c.iterations for n in it.nodes_with_evidence]
            )
        )
        roots = [n for n in on_paths if n in index.node_ids and dag.is_root(n)]
        status = citation_status(
            None if c.errored else c.verdict,
            has_markers=bool(markers),
            cited=followed,
            evidence_nodes=on_paths,
            evidence_roots=roots,
        )
        if status is not None:
            counts[status.value] += 1
        entry: dict[str, Any] = {
            "kind": status.value if status is not None else None,
            "markers": [m.text for m in markers],
            "cited_nodes": cited,
            "supporting_nodes": roots,
            "located_by": located_by,
        }
        if unresolved:
            entry["unresolved"] = unresolved
        entry["followed_nodes"] = followed
        claims.append({**raw, "citation": entry})
    out = dict(report)
    out["claims"] = claims
    out["summary"] = {**report.get("summary", {}), "citations": counts}
    return out


@dataclass(frozen=True, slots=True)
class MiscitedGate:
    """A failed `--max-miscited` gate."""

    rate: float
    share: float
    claims: tuple[tuple[str, str, str], ...]
    """(id, text, status) of the miscited claims."""
    cited: int
    """Claims with a citation marker and a status (the share's denominator)."""


def miscited_gate(report: ReportSource, rate: float | None = None) -> MiscitedGate | None:
    """The `--max-miscited` gate: a `MiscitedGate` when the share of cited claims (a marker and a
    status) that are misattributed or cite a source that does not support them is above `rate`
    (the report's own `run.max_miscited` when `rate` is None), else None."""
    from .report import as_report

    doc = as_report(report)
    if rate is None:
        rate = doc.run.max_miscited
    if rate is None:
        return None
    cited = [
        (c, c.citation.kind)
        for c in doc.claims
        if c.citation is not None and c.citation.kind is not None and c.citation.markers
    ]
    bad = tuple((c.id, c.text, s.value) for c, s in cited if s.miscited)
    if not cited or len(bad) / len(cited) <= rate:
        return None
    return MiscitedGate(rate, len(bad) / len(cited), bad, len(cited))


def citation_rows(report: ReportSource, limit: int = 20) -> list[tuple[str, str, str]]:
    """(claim id, citation status, markers → cited nodes) per claim for the terminal summary,
    at most `limit`, then a row saying how many more; empty when the run did not check
    citations."""
    from .display import shorten
    from .report import as_report

    doc = as_report(report)
    claims = [c for c in doc.claims if c.citation is not None]
    rows = []
    for c in claims[:limit]:
        ct = c.citation
        assert ct is not None
        kind = ct.kind.value if ct.kind is not None else "no verdict"
        cites = " ".join(ct.markers)
        if ct.cited_nodes:
            cites += " → " + ", ".join(ct.cited_nodes)
        if ct.followed_nodes != ct.cited_nodes:
            cites += " ⇒ " + (", ".join(ct.followed_nodes) or "no source")
        if ct.unresolved:
            cites += " (names no source: " + ", ".join(ct.unresolved) + ")"
        rows.append((c.id, kind, shorten(cites, 90) if cites else "-"))
    if len(claims) > limit:
        rows.append(("…", f"{len(claims) - limit} more", "see the report"))
    return rows


def status_counts(report: ReportSource) -> dict[str, int] | None:
    """`summary.citations` of a report, None when the run did not check citations."""
    from .report import as_report

    return as_report(report).summary.citations


__all__ = [
    "AUTO",
    "OFF",
    "CitationOptionError",
    "CitationRule",
    "Marker",
    "MiscitedGate",
    "SourceIndex",
    "attach_citations",
    "check_gate_rate",
    "citation_rows",
    "citation_status",
    "find_markers",
    "follow_citations",
    "locate_claim",
    "markers_by_sentence",
    "miscited_gate",
    "parse_rule",
    "status_counts",
]
