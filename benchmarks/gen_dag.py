"""Generate synthetic generation DAGs at GraphRAG scale and at book scale (deterministic per seed).

    python benchmarks/gen_dag.py graphrag --out /tmp/graphrag.json          # ~114K nodes, ~33 MB
    python benchmarks/gen_dag.py graphrag --out /tmp/graphrag.jsonl         # same DAG, JSON Lines
    python benchmarks/gen_dag.py book --out /tmp/book.json                  # ~70 nodes, 100K+ tokens
    python benchmarks/gen_dag.py graphrag --scale 0.05 --out /tmp/small.json

Shapes (stages are written explicitly, as a GraphRAG adapter would):

* **graphrag** (6 stages, after the paper's GraphRAG DAGs): 3,199 text chunks (~300 tokens) →
  ~95K per-chunk entity/relationship extractions (~30 per chunk, one source each) → ~12K summarized
  descriptions (each merges the extractions of one entity or relationship across chunks, Zipf-like
  fan-in) → ~3.6K community reports (Markdown with headings and bullets; leaf reports draw on a
  slice of the descriptions, higher-level reports on their sub-reports) → ~80 map answers (~45
  reports each) → 1 final answer.
* **book** (hierarchical summarization): 48 chunks of ~2,200 tokens → 16 summaries of 3 chunks →
  4 summaries of 4 → 1 final summary (69 nodes).

The text is generated prose with the things a sentence splitter must get right (abbreviations,
initials, decimals, quotes, headings, bullet and numbered lists), so the same files serve the
segmentation-throughput benchmark.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_WORD_LIST = (
    "the a of and to in that was for on with as by at from his her their its into over under "
    "after before during while because although city council river harbour market winter summer "
    "report village company ledger letter office meeting station journey family school record "
    "festival shipment bridge clerk merchant partner debt charity visit dinner promise memory "
    "lantern window street evening morning season decision agreement dispute warning account "
    "estate inheritance voyage archive treaty committee survey figure budget harvest shortage "
    "quickly quietly openly later early nearly often rarely finally gradually formally briefly "
    "visited described signed refused approved recalled founded managed opened closed expanded "
    "reduced announced delayed rejected praised questioned supported funded recorded described "
    "old new local central northern small large annual cold bright private public former"
)
_WORDS = _WORD_LIST.split()
_SYLLABLE_LIST = "ka lo ri ven mar tel os ard bel cor dun el fen gar hol ist jor kel lin mor nev or"
_SYLLABLES = _SYLLABLE_LIST.split()
_ABBREV = ("Dr.", "Mr.", "Mrs.", "Prof.", "St.", "Gen.")


class Prose:
    """Deterministic pseudo-English with names, abbreviations, decimals and quotes."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.names = [self._name() for _ in range(400)]

    def _name(self) -> str:
        r = self.rng
        return "".join(r.choice(_SYLLABLES) for _ in range(r.randint(2, 3))).capitalize()

    def name(self) -> str:
        """A person or place name, sometimes with a title abbreviation or initials."""
        r = self.rng
        n = r.choice(self.names)
        roll = r.random()
        if roll < 0.15:
            return f"{r.choice(_ABBREV)} {n}"
        if roll < 0.22:
            return f"{r.choice('ABCDEFGHJKLMNPRSTW')}. {r.choice('ABCDEFGHJKLMNPRSTW')}. {n}"
        return n

    def sentence(self) -> str:
        """One sentence of 8-24 words."""
        r = self.rng
        words = [r.choice(_WORDS) for _ in range(r.randint(6, 20))]
        words.insert(r.randint(0, len(words)), self.name())
        roll = r.random()
        if roll < 0.12:
            words.insert(r.randint(1, len(words)), f"{r.randint(1, 99)}.{r.randint(0, 9)}%")
        elif roll < 0.2:
            words.insert(r.randint(1, len(words)), f"in {r.randint(1700, 2025)}")
        elif roll < 0.25:
            words.insert(r.randint(1, len(words)), "in the U.S.")
        s = " ".join(words)
        s = s[0].upper() + s[1:]
        if r.random() < 0.08:
            return f'{s}, said {self.name()}, "{r.choice(_WORDS).capitalize()} {r.choice(_WORDS)}!"'
        return s + r.choice(".....?")

    def paragraph(self, chars: int) -> str:
        """Sentences until about `chars` characters."""
        out: list[str] = []
        n = 0
        while n < chars:
            s = self.sentence()
            out.append(s)
            n += len(s) + 1
        return " ".join(out)

    def report(self, chars: int) -> str:
        """A Markdown community report: title, summary, findings with headings and bullets."""
        r = self.rng
        parts = [f"# {self.name()} and the {r.choice(_WORDS).capitalize()} Community", ""]
        parts.append(self.paragraph(chars // 4))
        while sum(map(len, parts)) < chars:
            parts += ["", f"## {self.sentence().rstrip('.?!')}", "", self.paragraph(chars // 6)]
            if r.random() < 0.5:
                parts.append("")
                marker = r.choice(("-", "*", "1."))
                for k in range(r.randint(2, 4)):
                    m = f"{k + 1}." if marker == "1." else marker
                    parts.append(f"{m} {self.sentence()}")
        return "\n".join(parts)


def _hid(rng: random.Random, prefix: str) -> str:
    return f"{prefix}-{rng.getrandbits(64):016x}"


def graphrag_nodes(seed: int, scale: float = 1.0) -> Iterator[dict[str, Any]]:
    """Yield node records of a GraphRAG-shaped DAG, sources before the nodes that use them."""
    rng = random.Random(seed)
    prose = Prose(rng)
    n_chunks = max(2, round(3199 * scale))
    n_summaries = max(2, round(12_000 * scale))
    n_reports_l0 = max(2, round(2_700 * scale))
    n_reports_l1 = max(1, round(750 * scale))
    n_reports_l2 = max(1, round(150 * scale))
    n_maps = max(1, round(80 * scale))

    chunks = [_hid(rng, "chunk") for _ in range(n_chunks)]
    for cid in chunks:
        yield {"id": cid, "text": prose.paragraph(1200), "sources": [], "stage": 1}

    # Extractions: ~30 per chunk. Each belongs to one entity/relationship (a future summary);
    # the Zipf-like choice gives a few descriptions hundreds of extractions and most a handful.
    weights = [1.0 / (k + 1) ** 0.6 for k in range(n_summaries)]
    members: list[list[str]] = [[] for _ in range(n_summaries)]
    for cid in chunks:
        owners = rng.choices(range(n_summaries), weights=weights, k=rng.randint(22, 38))
        for owner in owners:
            eid = _hid(rng, "ext")
            members[owner].append(eid)
            yield {"id": eid, "text": prose.sentence(), "sources": [cid], "stage": 2}

    summaries: list[str] = []
    for k in range(n_summaries):
        if not members[k]:
            continue
        sid = _hid(rng, "desc")
        summaries.append(sid)
        yield {"id": sid, "text": prose.paragraph(200), "sources": members[k], "stage": 3}

    # Leaf reports partition the descriptions (plus a little overlap, as communities share
    # relationships); higher levels draw on their sub-community reports.
    rng.shuffle(summaries)
    reports: list[str] = []
    level0: list[str] = []
    per = len(summaries) / n_reports_l0
    for k in range(n_reports_l0):
        part = summaries[round(k * per) : round((k + 1) * per)]
        extra = rng.sample(summaries, k=min(2, len(summaries)))
        rid = _hid(rng, "report")
        level0.append(rid)
        srcs = list(dict.fromkeys(part + extra))
        yield {"id": rid, "text": prose.report(1100), "sources": srcs, "stage": 4}
    reports += level0
    below = level0
    for count in (n_reports_l1, n_reports_l2):
        level: list[str] = []
        per = len(below) / count
        for k in range(count):
            part = below[round(k * per) : round((k + 1) * per)] or [rng.choice(below)]
            rid = _hid(rng, "report")
            level.append(rid)
            yield {"id": rid, "text": prose.report(1100), "sources": part, "stage": 4}
        reports += level
        below = level

    rng.shuffle(reports)
    maps: list[str] = []
    per = len(reports) / n_maps
    for k in range(n_maps):
        mid = _hid(rng, "map")
        maps.append(mid)
        srcs = reports[round(k * per) : round((k + 1) * per)]
        yield {"id": mid, "text": prose.report(1200), "sources": srcs, "stage": 5}
    yield {"id": "answer", "text": prose.report(2500), "sources": maps, "stage": 6}


def book_nodes(seed: int) -> Iterator[dict[str, Any]]:
    """Yield a hierarchical-summarization DAG: 48 chunks → 16 → 4 → 1."""
    rng = random.Random(seed)
    prose = Prose(rng)
    level = [f"chunk-{k:02d}" for k in range(48)]
    for cid in level:
        text = "\n\n".join(prose.paragraph(900) for _ in range(10))
        yield {"id": cid, "text": text, "sources": [], "stage": 1}
    stage = 1
    for width, name in ((3, "sum1"), (4, "sum2")):
        stage += 1
        nxt = []
        for k in range(len(level) // width):
            nid = f"{name}-{k:02d}"
            nxt.append(nid)
            srcs = level[k * width : (k + 1) * width]
            yield {"id": nid, "text": prose.paragraph(2400), "sources": srcs, "stage": stage}
        level = nxt
    yield {"id": "final", "text": prose.paragraph(3000), "sources": level, "stage": stage + 1}


def write(records: Iterator[dict[str, Any]], out: Path) -> int:
    """Write records as JSON (one node per line inside ``{"nodes": [...]}``) or JSON Lines."""
    n = 0
    with out.open("w", encoding="utf-8") as fh:
        jsonl = out.suffix == ".jsonl"
        if not jsonl:
            fh.write('{"nodes": [\n')
        for rec in records:
            if not jsonl and n:
                fh.write(",\n")
            fh.write(json.dumps(rec, ensure_ascii=False))
            if jsonl:
                fh.write("\n")
            n += 1
        if not jsonl:
            fh.write("\n]}\n")
    return n


def main(argv: list[str] | None = None) -> None:
    """Command line: see the module docstring."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("shape", choices=("graphrag", "book"))
    ap.add_argument("--out", type=Path, required=True, help=".json or .jsonl")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--scale", type=float, default=1.0, help="graphrag only: node-count factor")
    a = ap.parse_args(argv)
    recs = graphrag_nodes(a.seed, a.scale) if a.shape == "graphrag" else book_nodes(a.seed)
    n = write(recs, a.out)
    print(f"{a.out}: {n} nodes, {a.out.stat().st_size / 1e6:.1f} MB", file=sys.stderr)


if __name__ == "__main__":
    main()
