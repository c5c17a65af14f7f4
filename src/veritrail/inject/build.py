"""Variants of a DAG with one hallucination planted at a known stage (docs/inject.md).

`make_variants` picks, for each variant, a kind and a stage (in turn, so kinds and stages are
balanced), a node of that stage and a sentence of that node (seeded choices), perturbs the
sentence (`perturb`), and carries the perturbed sentence down one path to the final output:

* the chosen node gets the perturbed sentence in place of the original (a fabricated sentence is
  inserted after it instead);
* each node on the shortest path from it to the terminal (ties: file order) gets the perturbed
  sentence in place of the original if the original is there verbatim, appended otherwise.

So the first node whose text states the perturbed sentence is the chosen one: its stage and id
are the gold stage and node, and the perturbed sentence, as the terminal states it, is the
injected claim (gold Not Fully Supported). The terminal's other sentences that are still there
verbatim are the untouched claims; their gold verdict is whatever the same method says about
them on the clean DAG (computed by ``veritrail eval injected:DIR``).

`write_injection` writes the clean DAG, each variant's DAG, claims and gold, and the manifest
``injected.json``. Everything is a function of the DAG, the options and the seed: the same
inputs give byte-identical files.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..dag import Dag, Node, save_dag
from ..errors import InputProblem
from ..method.segment import sentence_spans, split_sentences
from ..records import CitationStatus, Verdict
from .cite import (
    GOLD_STATUS,
    CitedSentence,
    apply_edits,
    cited_sentences,
    dropped_citation,
    is_footnote_definition,
    strip_markers,
    wrong_citation,
)
from .perturb import CITATION_KINDS, Kind, Vocabulary, perturb

MANIFEST = "injected.json"
"""The manifest's file name in an injection directory."""

FORMAT_NAME = "veritrail-injected"
FORMAT_VERSION = 1

INJECTED_CLAIM_ID = "injected"
"""The injected claim's id in each variant's claims file."""

_MIN_WORDS = 4
_MAX_WORDS = 60


class InjectError(InputProblem, ValueError):
    """The DAG or the options cannot give the asked variants (exit 2, one line)."""


@dataclass(frozen=True, slots=True)
class Variant:
    """One perturbed copy of the DAG and what was planted in it."""

    id: str
    kind: Kind
    stage: int
    node: str
    original: str
    """The sentence of `node` that was perturbed (for ``fabricated``: the one it follows)."""
    injected: str
    """The perturbed sentence: the injected claim's text, as the terminal states it."""
    path: tuple[str, ...]
    """The nodes it was carried through, `node` first, the terminal last."""
    dag: Dag
    untouched: tuple[str, ...]
    """Ids of the clean claims (terminal sentences) still in the variant's terminal verbatim."""
    claim: str = ""
    """The injected claim's text: `injected` without its citation markers (`cite.strip_markers`;
    the same text when it has none)."""
    citation: CitationStatus | None = None
    """A citation kind's gold citation status (*misattributed*, *uncited*); None otherwise."""


@dataclass(frozen=True, slots=True)
class Injection:
    """Every variant of one DAG, with the clean claims they refer to."""

    source: Dag
    seed: int
    kinds: tuple[Kind, ...]
    stages: tuple[int, ...]
    clean_claims: tuple[tuple[str, str], ...]
    """(id, text) of each distinct sentence of the clean terminal: ``t1``, ``t2``, …"""
    variants: tuple[Variant, ...]
    skipped: tuple[tuple[Kind, int], ...]
    """(kind, stage) pairs that applied to no sentence of that stage."""
    not_applicable: tuple[tuple[Kind, str], ...] = ()
    """(kind, why) of the asked kinds that cannot apply to this DAG at all (the citation kinds
    on a final output with no citation marker): left out of `kinds`."""
    citations: bool = False
    """Whether the final output carries citation markers naming the DAG's sources (so
    ``veritrail eval`` checks citations on it)."""


def injectable_stages(dag: Dag) -> list[int]:
    """The stages of the DAG's non-root nodes (roots are the sources: nothing enters there)."""
    return sorted({n.stage for n in dag if n.sources})


def parse_kinds(values: Sequence[str]) -> tuple[Kind, ...]:
    """Kinds named on the command line (comma lists allowed); all kinds when none is named."""
    names = [v.strip() for value in values for v in value.split(",") if v.strip()]
    if not names:
        return tuple(Kind)
    out: list[Kind] = []
    for name in names:
        try:
            kind = Kind(name.lower())
        except ValueError:
            known = ", ".join(k.value for k in Kind)
            raise InjectError(f"unknown kind {name!r} (known: {known})") from None
        if kind not in out:
            out.append(kind)
    return tuple(out)


def _rng(seed: int, *parts: object) -> random.Random:
    # A string seed hashed by us: random.Random(str) hashes differently across Python versions.
    digest = hashlib.sha256(":".join(str(p) for p in (seed, *parts)).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def _sentences(text: str) -> list[tuple[int, int]]:
    """Spans of the plain sentences of a node that can be perturbed in place."""
    if text.lstrip()[:1] in ("{", "["):
        return []  # a JSON node: its units are not contiguous sentences of the text
    out: list[tuple[int, int]] = []
    for a, b in sentence_spans(text):
        s = text[a:b]
        words = len(s.split())
        if "\n" in s or s.lstrip().startswith(("#", "```", "~~~", "|", "-", "*")):
            continue
        if _MIN_WORDS <= words <= _MAX_WORDS:
            out.append((a, b))
    return out


def _path_to_terminal(dag: Dag, start: str) -> tuple[str, ...]:
    """The shortest path from `start` down to the terminal (children in file order)."""
    prev: dict[str, str | None] = {start: None}
    queue = deque([start])
    while queue:
        nid = queue.popleft()
        if nid == dag.terminal:
            path = [nid]
            while (p := prev[path[-1]]) is not None:
                path.append(p)
            return tuple(reversed(path))
        for child in dag.children(nid):
            if child not in prev:
                prev[child] = nid
                queue.append(child)
    raise InjectError(f"node {start!r} does not reach the final output {dag.terminal!r}")


def _append(text: str, sentence: str) -> str:
    base = text.rstrip()
    sep = "" if not base else (" " if base[-1] in ".!?\"')”’" else ". ")
    return base + sep + sentence + text[len(base) :]


def _carry(dag: Dag, path: Sequence[str], at: tuple[int, int], kind: Kind, new: str) -> Dag:
    """A copy of `dag` with `new` planted in `path[0]` (at the span `at`) and carried down."""
    first = dag.node(path[0])
    a, b = at
    original = first.text[a:b]
    if kind is Kind.FABRICATED:
        planted = first.text[:b] + " " + new + first.text[b:]
    else:
        planted = first.text[:a] + new + first.text[b:]
    texts = {first.id: planted}
    for nid in path[1:]:
        text = dag.node(nid).text
        if kind is not Kind.FABRICATED and original in text:
            texts[nid] = text.replace(original, new, 1)
        elif new not in text:
            texts[nid] = _append(text, new)
    nodes = {
        n.id: Node(n.id, texts.get(n.id, n.text), n.sources, n.stage) for n in dag
    }  # stages kept as they were: the gold stage is the clean DAG's
    out = Dag(nodes, dag.terminal, dict(dag.meta), stages_given=True)
    # Validate as a file reader would: a variant must load like any DAG.
    return Dag.from_records(out.to_records(), dict(dag.meta))


def _terminal_claims(dag: Dag) -> tuple[tuple[str, str, str], ...]:
    """(id, sentence as written, claim text) of each distinct claim of the terminal: its
    sentences without their citation markers (footnote definition lines are no claims)."""
    seen: dict[str, tuple[str, str]] = {}
    for raw in split_sentences(dag.node(dag.terminal).text):
        raw = raw.strip()
        if not raw or is_footnote_definition(raw):
            continue
        text = strip_markers(raw)
        if text and text not in seen:
            seen[text] = (f"t{len(seen) + 1}", raw)
    return tuple((cid, raw, text) for text, (cid, raw) in seen.items())


def clean_claims(dag: Dag) -> tuple[tuple[str, str], ...]:
    """The terminal's distinct sentences, without citation markers, as claims ``t1``, ``t2``, …
    (file order)."""
    return tuple((cid, text) for cid, _, text in _terminal_claims(dag))


_MASK = 0xE000  # private-use characters: no word, digit or name regex of `perturb` matches one


def _perturb_masked(
    kind: Kind, sentence: str, vocab: Vocabulary, rng: random.Random, context: str
) -> str | None:
    """`perturb`, with the sentence's citation markers hidden from it (``number`` must not turn
    ``[1]`` into ``[3]``: that is a citation change) and put back after."""
    from ..citations import AUTO, CitationRule, find_markers

    markers = find_markers(sentence, CitationRule(AUTO))
    if not markers or kind is Kind.FABRICATED:  # a fabricated sentence is new: no marker in it
        return perturb(kind, sentence, vocab, rng, context)
    masked, pos = [], 0
    for i, m in enumerate(markers):
        masked += [sentence[pos : m.start], chr(_MASK + i)]
        pos = m.end
    masked.append(sentence[pos:])
    out = perturb(kind, "".join(masked), vocab, rng, context)
    if out is None:
        return None
    for i, m in enumerate(markers):
        if out.count(chr(_MASK + i)) != 1:
            return None
        out = out.replace(chr(_MASK + i), m.text)
    return out


def make_variants(
    dag: Dag,
    *,
    n: int,
    seed: int,
    kinds: Sequence[Kind] = tuple(Kind),
    stages: Sequence[int] | None = None,
    max_untouched: int | None = None,
) -> Injection:
    """`n` variants of `dag`, each with one hallucination of one kind planted at one stage."""
    if n < 1:
        raise InjectError("--n must be at least 1")
    if max_untouched is not None and max_untouched < 0:
        raise InjectError("--max-untouched must be 0 or more")
    possible = injectable_stages(dag)
    if not possible:
        raise InjectError("the DAG has no stage above its sources: nothing to inject into")
    chosen = sorted(set(stages)) if stages else possible
    bad = [s for s in chosen if s not in possible]
    if bad:
        raise InjectError(
            f"stage(s) {', '.join(map(str, bad))} hold no node above the sources "
            f"(injectable stages: {', '.join(map(str, possible))})"
        )
    claims = _terminal_claims(dag)
    if not claims:
        raise InjectError(f"the final output {dag.terminal!r} has no sentence to check")
    cited = cited_sentences(dag)
    asked = tuple(kinds)
    not_applicable: list[tuple[Kind, str]] = []
    if not cited:
        why = "the final output has no citation marker naming a source"
        not_applicable = [(k, why) for k in asked if k in CITATION_KINDS]
        kinds = tuple(k for k in asked if k not in CITATION_KINDS)
        if not kinds:
            names = ", ".join(k.value for k in asked)
            raise InjectError(
                f"{names}: only for a DAG whose final output carries citation markers ([1], "
                f"[^1], 【1】, links, (Source: name)) naming its sources; {dag.terminal!r} has none"
            )
    terminal_stage = dag.node(dag.terminal).stage
    vocab = Vocabulary.of_texts(n.text for n in dag)
    all_text = "\n".join(node.text for node in dag)
    combos = [(k, s) for s in chosen for k in kinds]
    by_stage = {s: [node for node in dag if node.sources and node.stage == s] for s in chosen}
    used: set[tuple[str, int, Kind]] = set()
    variants: list[Variant] = []
    dead: set[tuple[Kind, int]] = set()
    attempt = 0
    while len(variants) < n and len(dead) < len(combos):
        kind, stage = combos[attempt % len(combos)]
        attempt += 1
        if (kind, stage) in dead:
            continue
        rng = _rng(seed, len(variants), kind.value, stage)
        if kind in CITATION_KINDS:
            cite_made = (
                _cite_variant(dag, cited, kind, rng, used) if stage == terminal_stage else None
            )
            if cite_made is None:
                dead.add((kind, stage))
                continue
            variants.append(
                _cite_finish(dag, claims, kind, cite_made, len(variants), max_untouched, rng)
            )
            continue
        nodes = list(by_stage[stage])
        rng.shuffle(nodes)
        made = None
        for node in nodes:
            spans = _sentences(node.text)
            order = list(range(len(spans)))
            rng.shuffle(order)
            for i in order:
                if (node.id, i, kind) in used:
                    continue
                a, b = spans[i]
                sentence = node.text[a:b]
                new = _perturb_masked(kind, sentence, vocab, rng, node.text)
                if new is None or new in all_text:
                    continue
                used.add((node.id, i, kind))
                made = (node, (a, b), sentence, new)
                break
            if made is not None:
                break
        if made is None:
            dead.add((kind, stage))
            continue
        node, span, sentence, new = made
        path = _path_to_terminal(dag, node.id)
        variant_dag = _carry(dag, path, span, kind, new)
        kept = {s.strip() for s in split_sentences(variant_dag.node(dag.terminal).text)}
        claim = strip_markers(new)
        untouched = [cid for cid, raw, text in claims if raw in kept and text != claim]
        if max_untouched is not None and len(untouched) > max_untouched:
            picked = set(rng.sample(untouched, max_untouched))
            untouched = [c for c in untouched if c in picked]
        variants.append(
            Variant(
                id=f"v{len(variants) + 1:03d}",
                kind=kind,
                stage=stage,
                node=node.id,
                original=sentence,
                injected=new,
                path=path,
                dag=variant_dag,
                untouched=tuple(untouched),
                claim=claim,
            )
        )
    if not variants:
        raise InjectError(
            "no sentence of the chosen stages could be perturbed by the chosen kinds "
            "(sentences of 4 to 60 words in plain-text nodes)"
        )
    return Injection(
        source=dag,
        seed=seed,
        kinds=tuple(kinds),
        stages=tuple(chosen),
        clean_claims=tuple((cid, text) for cid, _, text in claims),
        variants=tuple(variants),
        skipped=tuple(sorted(dead, key=lambda ks: (ks[1], ks[0].value))),
        not_applicable=tuple(not_applicable),
        citations=bool(cited),
    )


def _cite_variant(
    dag: Dag,
    cited: tuple[CitedSentence, ...],
    kind: Kind,
    rng: random.Random,
    used: set[tuple[str, int, Kind]],
) -> tuple[CitedSentence, list[tuple[int, int, str]]] | None:
    """A cited sentence of the terminal (seeded pick) and the marker edits of `kind` on it."""
    order = list(range(len(cited)))
    rng.shuffle(order)
    for i in order:
        if (dag.terminal, i, kind) in used:
            continue
        cs = cited[i]
        if kind is Kind.WRONG_CITATION:
            edit = wrong_citation(dag, cs, rng)
            edits = [edit] if edit is not None else []
        else:
            edits = dropped_citation(dag, cs)
        if edits:
            used.add((dag.terminal, i, kind))
            return cs, edits
    return None


def _cite_finish(
    dag: Dag,
    claims: Sequence[tuple[str, str, str]],
    kind: Kind,
    made: tuple[CitedSentence, list[tuple[int, int, str]]],
    index: int,
    max_untouched: int | None,
    rng: random.Random,
) -> Variant:
    """The variant of a citation kind: only the terminal's markers change (stage and node: the
    terminal's, where the change is); its claim keeps the clean sentence's text."""
    cs, edits = made
    text = dag.node(dag.terminal).text
    a = min(cs.start, *(e[0] for e in edits))
    b = max(cs.end, *(e[1] for e in edits))
    original = text[a:b].strip()
    changed = apply_edits(text[a:b], [(s - a, e - a, new) for s, e, new in edits]).strip()
    nodes = {
        n.id: Node(
            n.id, apply_edits(text, edits) if n.id == dag.terminal else n.text, n.sources, n.stage
        )
        for n in dag
    }
    out = Dag(nodes, dag.terminal, dict(dag.meta), stages_given=True)
    variant_dag = Dag.from_records(out.to_records(), dict(dag.meta))
    claim = strip_markers(text[cs.start : cs.end].strip())
    kept = {s.strip() for s in split_sentences(variant_dag.node(dag.terminal).text)}
    untouched = [cid for cid, raw, t in claims if raw in kept and t != claim]
    if max_untouched is not None and len(untouched) > max_untouched:
        picked = set(rng.sample(untouched, max_untouched))
        untouched = [c for c in untouched if c in picked]
    return Variant(
        id=f"v{index + 1:03d}",
        kind=kind,
        stage=dag.node(dag.terminal).stage,
        node=dag.terminal,
        original=original,
        injected=changed,
        path=(dag.terminal,),
        dag=variant_dag,
        untouched=tuple(untouched),
        claim=claim,
        citation=GOLD_STATUS[kind],
    )


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=1) + "\n"


def _claims_doc(claims: Sequence[tuple[str, str]]) -> dict[str, Any]:
    return {"claims": [{"id": cid, "text": text} for cid, text in claims]}


def write_injection(inj: Injection, out: str | Path, *, source_name: str = "dag.json") -> Path:
    """Write the injection under `out` (which must be empty or absent); returns the manifest."""
    base = Path(out)
    if base.exists() and (not base.is_dir() or any(base.iterdir())):
        raise InjectError(f"{base}: exists and is not an empty directory")
    (base / "clean").mkdir(parents=True, exist_ok=True)
    save_dag(inj.source, base / "clean" / "dag.json")
    (base / "clean" / "claims.json").write_text(
        _dump(_claims_doc(inj.clean_claims)), encoding="utf-8"
    )
    clean_text = dict(inj.clean_claims)
    entries: list[dict[str, Any]] = []
    for v in inj.variants:
        d = base / v.id
        d.mkdir()
        save_dag(v.dag, d / "dag.json")
        claims = [
            (INJECTED_CLAIM_ID, v.claim or v.injected),
            *((c, clean_text[c]) for c in v.untouched),
        ]
        (d / "claims.json").write_text(_dump(_claims_doc(claims)), encoding="utf-8")
        # A citation kind's claim is true (only its marker moved): Fully Supported, and its
        # citation status is what is measured.
        label = Verdict.FULLY_SUPPORTED if v.citation is not None else Verdict.NOT_FULLY_SUPPORTED
        gold = {
            "claims": [
                {
                    "id": INJECTED_CLAIM_ID,
                    "label": label.value,
                    "kind": v.kind.value,
                    "stage": v.stage,
                    "node": v.node,
                    **({"citation": v.citation.value} if v.citation is not None else {}),
                },
                *({"id": c, "label": None, "clean_claim": c} for c in v.untouched),
            ]
        }
        (d / "gold.json").write_text(_dump(gold), encoding="utf-8")
        entries.append(
            {
                "id": v.id,
                "kind": v.kind.value,
                "stage": v.stage,
                "node": v.node,
                "path": list(v.path),
                "original": v.original,
                "injected": v.injected,
                **({"citation": v.citation.value} if v.citation is not None else {}),
                "untouched": list(v.untouched),
                "dag": f"{v.id}/dag.json",
                "claims": f"{v.id}/claims.json",
                "gold": f"{v.id}/gold.json",
            }
        )
    source_bytes = (base / "clean" / "dag.json").read_bytes()
    manifest = {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "source": {
            "name": source_name,
            "sha256": hashlib.sha256(source_bytes).hexdigest(),
            "nodes": len(inj.source),
            "terminal": inj.source.terminal,
        },
        "seed": inj.seed,
        "kinds": [k.value for k in inj.kinds],
        **(
            {"not_applicable": [{"kind": k.value, "why": why} for k, why in inj.not_applicable]}
            if inj.not_applicable
            else {}
        ),
        **({"citations": "auto"} if inj.citations else {}),
        "stages": list(inj.stages),
        "clean": {"dag": "clean/dag.json", "claims": "clean/claims.json"},
        "skipped": [{"kind": k.value, "stage": s} for k, s in inj.skipped],
        "variants": entries,
    }
    path = base / MANIFEST
    path.write_text(_dump(manifest), encoding="utf-8")
    return path


__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "INJECTED_CLAIM_ID",
    "MANIFEST",
    "InjectError",
    "Injection",
    "Variant",
    "clean_claims",
    "injectable_stages",
    "make_variants",
    "parse_kinds",
    "write_injection",
]
