"""The generated corpus of `bench_peers.py` and `tests/test_cost_guard.py` (issue 38).

Each item is one answer of 5 sentences over 3 source paragraphs, deterministic from a seed.
Source paragraphs state facts about invented entities (5 sentences each); the answer repeats
some of those facts word for word and changes one content word in others (a year, a city or a
product), so a word-overlap judge finds evidence for every sentence but every content word only
for the faithful ones. Nothing here imports veritrail: the peers' runners read the same corpus
file from their own virtualenvs.

Two DAG layouts per item, as plain records (docs/dag-format.md):
* `check_dag`: the layout `veritrail check` writes: every source file cut into chunks (here one
  paragraph = one chunk, ids `source-K.txt#1`) as roots, the answer (id `answer`) as terminal.
* `two_stage_dag`: sources -> chunk summaries (one per paragraph: two of its sentences) ->
  answer, so a claim's trail crosses an intermediate stage.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SENTENCES_PER_ANSWER = 5
PARAGRAPHS_PER_ANSWER = 3
SENTENCES_PER_PARAGRAPH = 5

_NAMES = [
    "Orchard Muse", "Harbor Finch", "Copper Lantern", "Silver Heron", "Quiet Meridian",
    "Granite Owl", "Amber Tide", "Velvet Compass", "Northern Loom", "Cobalt Willow",
    "Hollow Pine", "Scarlet Ferry", "Iron Thistle", "Pale Orchard", "Rapid Juniper",
]  # fmt: skip
_CITIES = [
    "Oslo", "Lisbon", "Turin", "Ghent", "Krakow", "Leeds", "Porto", "Bergen", "Lyon", "Graz",
    "Utrecht", "Malmo", "Tartu", "Aarhus", "Bilbao", "Bremen", "Cork", "Brno",
]  # fmt: skip
_PRODUCTS = [
    "bicycles", "lanterns", "violins", "telescopes", "kettles", "typewriters", "compasses",
    "clocks", "barometers", "microscopes", "sextants", "pianos", "looms", "cameras",
]  # fmt: skip
_PEOPLE = [
    "Ada Lindqvist", "Bruno Maes", "Clara Ostrowska", "Dmitri Varga", "Elena Rossi",
    "Farid Haddad", "Greta Jansen", "Hugo Almeida", "Ines Kowalski", "Jonas Berg",
]  # fmt: skip
_TEMPLATES = [
    "The {name} company was founded in {year} in {city}.",
    "{person} led the {name} workshop for {n} years.",
    "The {name} workshop built {product} for schools in {city}.",
    "In {year} the {name} company opened a second factory near {city}.",
    "The {name} company employed {n} craftsmen at its peak.",
    "{person} designed the first {name} {product} in {year}.",
    "The {name} archive holds {n} letters written by {person}.",
    "Most {name} {product} were sold in {city} before {year}.",
]


@dataclass(frozen=True, slots=True)
class Item:
    """One answer and its sources. `supported[i]` says whether answer sentence i repeats a
    source sentence unchanged (True) or changes one of its content words (False)."""

    id: str
    sources: tuple[str, ...]
    summaries: tuple[str, ...]
    answer_sentences: tuple[str, ...]
    supported: tuple[bool, ...]

    @property
    def answer(self) -> str:
        return " ".join(self.answer_sentences)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "sources": list(self.sources),
            "summaries": list(self.summaries),
            "answer": self.answer,
            "answer_sentences": list(self.answer_sentences),
            "supported": list(self.supported),
        }


def _fact(rng: random.Random, name: str) -> str:
    template = rng.choice(_TEMPLATES)
    return template.format(
        name=name,
        year=rng.randrange(1850, 2000),
        city=rng.choice(_CITIES),
        person=rng.choice(_PEOPLE),
        product=rng.choice(_PRODUCTS),
        n=rng.randrange(3, 90),
    )


def _falsify(rng: random.Random, sentence: str, source_text: str) -> str:
    """`sentence` with one content word (a year, number, city or product) swapped for one the
    sources never mention, so it stays close enough to be found as evidence but is unsupported."""
    words = sentence.rstrip(".").split(" ")
    used = set(re.findall(r"\w+", source_text))
    for i in rng.sample(range(len(words)), len(words)):
        w = words[i]
        if w.isdigit():
            span = range(1850, 2000) if len(w) == 4 else range(3, 90)
            pool = [str(v) for v in span if str(v) not in used]
        elif w in _CITIES:
            pool = [c for c in _CITIES if c not in source_text]
        elif w in _PRODUCTS:
            pool = [p for p in _PRODUCTS if p not in source_text]
        else:
            continue
        if pool:
            words[i] = rng.choice(pool)
            return " ".join(words) + "."
    raise AssertionError(f"nothing to falsify in {sentence!r}")  # every template has a slot


def make_item(seed: int, index: int, unsupported_rate: float = 0.3) -> Item:
    """Item `index` of the corpus of `seed` (independent of the other items: a corpus of 10 is
    the first 10 of a corpus of 200)."""
    rng = random.Random(f"veritrail-peers:{seed}:{index}")
    names = rng.sample(_NAMES, PARAGRAPHS_PER_ANSWER)
    paragraphs = [[_fact(rng, name) for _ in range(SENTENCES_PER_PARAGRAPH)] for name in names]
    source_text = " ".join(" ".join(p) for p in paragraphs)
    # Answer sentences are drawn across the paragraphs (at least one from each).
    picks = [(k, rng.randrange(SENTENCES_PER_PARAGRAPH)) for k in range(PARAGRAPHS_PER_ANSWER)]
    while len(picks) < SENTENCES_PER_ANSWER:
        pick = (rng.randrange(PARAGRAPHS_PER_ANSWER), rng.randrange(SENTENCES_PER_PARAGRAPH))
        if pick not in picks:
            picks.append(pick)
    rng.shuffle(picks)
    answer: list[str] = []
    supported: list[bool] = []
    for k, j in picks:
        ok = rng.random() >= unsupported_rate
        answer.append(paragraphs[k][j] if ok else _falsify(rng, paragraphs[k][j], source_text))
        supported.append(ok)
    # Each summary keeps two of its paragraph's sentences, the ones the answer drew on first, so
    # the answer's faithful sentences are supported through the intermediate stage too.
    summaries = []
    for k, para in enumerate(paragraphs):
        used = [j for kk, j in picks if kk == k]
        keep = (used + [j for j in range(SENTENCES_PER_PARAGRAPH) if j not in used])[:2]
        summaries.append(" ".join(para[j] for j in sorted(keep)))
    # A used sentence beyond the two kept is added so no faithful claim loses its support.
    summaries = [
        s
        + "".join(
            " " + paragraphs[k][j] for kk, j in picks if kk == k and paragraphs[k][j] not in s
        )
        for k, s in enumerate(summaries)
    ]
    return Item(
        id=f"a{index:04d}",
        sources=tuple(" ".join(p) for p in paragraphs),
        summaries=tuple(summaries),
        answer_sentences=tuple(answer),
        supported=tuple(supported),
    )


def make_corpus(n: int, seed: int = 0) -> list[Item]:
    """The first `n` items of the corpus of `seed`."""
    return [make_item(seed, i) for i in range(n)]


def source_name(k: int) -> str:
    """The file name of source paragraph `k` (0-based), as `veritrail check` would be given it."""
    return f"source-{k + 1}.txt"


def check_dag(item: Item) -> dict[str, Any]:
    """The DAG `veritrail check ANSWER source-1.txt source-2.txt source-3.txt` builds for `item`
    (each paragraph is shorter than a chunk, so one root per source file)."""
    roots = [
        {"id": f"{source_name(k)}#1", "text": text, "sources": []}
        for k, text in enumerate(item.sources)
    ]
    answer = {"id": "answer", "text": item.answer, "sources": [r["id"] for r in roots]}
    return {
        "meta": {"made_by": "benchmarks/peers_corpus.py (check layout)"},
        "nodes": [*roots, answer],
    }


def two_stage_dag(item: Item) -> dict[str, Any]:
    """Sources -> one chunk summary per source -> the answer."""
    roots = [
        {"id": f"{source_name(k)}#1", "text": text, "sources": [], "stage": 1}
        for k, text in enumerate(item.sources)
    ]
    summaries = [
        {"id": f"summary-{k + 1}", "text": text, "sources": [roots[k]["id"]], "stage": 2}
        for k, text in enumerate(item.summaries)
    ]
    answer = {
        "id": "answer",
        "text": item.answer,
        "sources": [s["id"] for s in summaries],
        "stage": 3,
    }
    return {
        "meta": {"made_by": "benchmarks/peers_corpus.py (2-stage)"},
        "nodes": [*roots, *summaries, answer],
    }


def write_batch(items: list[Item], layout: str, directory: Path) -> Path:
    """DAG files of `items` in `layout` ("check" or "two_stage") and a `veritrail batch` manifest
    over them (claims extracted from each answer; reports under `directory/reports`). Returns the
    manifest's path."""
    build = {"check": check_dag, "two_stage": two_stage_dag}[layout]
    (directory / "dags").mkdir(parents=True, exist_ok=True)
    lines = []
    for item in items:
        dag_path = directory / "dags" / f"{item.id}.json"
        dag_path.write_text(json.dumps(build(item), indent=1), encoding="utf-8")
        lines.append(
            json.dumps(
                {
                    "id": item.id,
                    "dag": str(dag_path),
                    "claims": None,
                    "out": str(directory / "reports" / f"{item.id}.json"),
                    "run_dir": str(directory / "runs" / item.id),
                }
            )
        )
    manifest = directory / "manifest.jsonl"
    manifest.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return manifest


def write_corpus(items: list[Item], path: Path) -> None:
    """The corpus as JSON, for the peers' runners."""
    path.write_text(json.dumps([i.to_json() for i in items], indent=1), encoding="utf-8")
