"""Build the injected-hallucination benchmark (benchmarks/injected/, issue 39) from real runs.

    python benchmarks/build_injected.py [--data ../shared/data] [--out benchmarks/injected]

Sources (benchmarks/injected/README.md says why these):

* the quick-start DAG (examples/quickstart/dag.json);
* BooookScore (Chang et al., ICLR 2024; lilakk/BooookScore @ 094bf69b, MIT): the hierarchical
  traces of two books (chunk summaries → final summary) and the incremental trace of one book
  (a chain of running summaries), through `veritrail from-booookscore`;
* GraphRAG's index of *A Christmas Carol* (microsoft/graphrag @ 6dad6d2b, tests/verbs/data, MIT):
  community report 84 with its descriptions and text unit, through
  `veritrail from-graphrag --terminal-report 84` (needs pyarrow);
* an agent run: the chat transcript benchmarks/injected/sources/agent-booking.json (our own text:
  a flight search and a booking, tool calls with their arguments and results) through the
  conversation adapter (`veritrail check --conversation`'s DAG);
* a cited answer: benchmarks/injected/sources/cited-answer.md (our own text, with [1] [2] [3]
  markers) over three passages of GraphRAG's example inputs (microsoft/graphrag @ 6dad6d2b,
  MIT): one of the novella *Operation Dulce*, two of *A Christmas Carol*'s text units; the
  citation kinds' material.

Each source becomes one sub-folder written by `veritrail inject` with a fixed seed, so a rebuild
gives byte-identical files (each sub-folder is replaced).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

from veritrail.adapters.conversation import read_conversation
from veritrail.cli.main import cli
from veritrail.dag import Dag, save_dag

ROOT = Path(__file__).resolve().parents[1]
SEED = 39

BOOKS_HIER = ("catfish-rolling.epub", "the-survivalists.epub")
BOOK_INC = "catfish-rolling.epub"
GRAPHRAG_REPORT = "84"
SOURCES = ROOT / "benchmarks" / "injected" / "sources"

# The cited answer's sources, in marker order: (root id, where, first words, last words). Where
# is a file under the GraphRAG data folder, or the number (human_readable_id) of a text unit of
# the Christmas Carol index; the passage runs from the first words to the last. Three passages
# on unrelated subjects (a cybersecurity expert at work, the guests of a Christmas Eve ball in a
# warehouse, a family's evening after dinner), so that a marker moved to another source names
# one that does not support the sentence.
CITED_SOURCES: tuple[tuple[str, str | int, str, str], ...] = (
    (
        "dulce.txt",
        "operation_dulce/Operation Dulce v2 1 1.md",
        "Sam Rivera sat alone in a cramped office",
        '"Got a minute, Rivera?"',
    ),
    ("fezziwig.txt", 14, "Every movable was packed off", "any how and every how."),
    ("cratchit.txt", 22, "At last the dinner was all done", "said Tiny Tim, the last of all."),
)


def _passage(text: str, first: str, last: str) -> str:
    """The passage from `first` to `last`, whitespace (the source's line breaks) folded to single
    spaces first; `first` must occur once, so that a changed input stops the build rather than
    shifting the passage."""
    text = " ".join(text.split())
    if text.count(first) != 1:
        sys.exit(f"cited answer: {first!r} does not occur exactly once in its source")
    i = text.index(first)
    j = text.find(last, i)
    if j < 0:
        sys.exit(f"cited answer: {last!r} does not follow {first!r} in its source")
    return text[i : j + len(last)]


def cited_dag(data: Path) -> Dag:
    """The cited answer over its three GraphRAG passages (roots), one stage above them."""
    import pyarrow.parquet as pq  # the GraphRAG import needs it too

    graphrag = data / "graphrag"
    units = {
        int(row["human_readable_id"]): str(row["text"])
        for row in pq.read_table(
            graphrag / "tests_verbs_data" / "text_units.parquet",
            columns=["human_readable_id", "text"],
        ).to_pylist()
    }
    records: list[dict[str, object]] = []
    for nid, where, first, last in CITED_SOURCES:
        text = (
            units[where]
            if isinstance(where, int)
            else (graphrag / where).read_text(encoding="utf-8")
        )
        records.append({"id": nid, "text": _passage(text, first, last), "sources": []})
    answer = (SOURCES / "cited-answer.md").read_text(encoding="utf-8").strip()
    records.append({"id": "answer", "text": answer, "sources": [r["id"] for r in records]})
    meta = {
        "source": "GraphRAG example inputs (microsoft/graphrag @ 6dad6d2b, MIT): Operation Dulce"
        " chapter 2; A Christmas Carol text units 14 and 22 (tests/verbs/data)",
        "made_by": "benchmarks/build_injected.py",
    }
    return Dag.from_records(records, meta)


def run(*args: str) -> None:
    """One veritrail command, in-process; stops the build on a non-zero exit."""
    try:
        cli.main(args=list(args), prog_name="veritrail", standalone_mode=False)
    except SystemExit as exc:  # click's own exit (0 is fine)
        if exc.code:
            sys.exit(f"veritrail {' '.join(args)}: exit {exc.code}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "injected")
    args = ap.parse_args()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        # (folder, DAG, variants, extra inject options)
        jobs: list[tuple[str, Path, int, tuple[str, ...]]] = [
            ("quickstart", ROOT / "examples" / "quickstart" / "dag.json", 8, ())
        ]
        for book in BOOKS_HIER:
            dag = t / f"hier-{book}.json"
            run(
                "from-booookscore",
                str(args.data / "booookscore" / "claude-88000-hier.json"),
                "--book",
                book,
                "--out",
                str(dag),
            )
            jobs.append((f"booookscore-hier-{book.removesuffix('.epub')}", dag, 4, ()))
        dag = t / "inc.json"
        run(
            "from-booookscore",
            str(args.data / "booookscore" / "claude-88000-inc.json"),
            "--book",
            BOOK_INC,
            "--out",
            str(dag),
        )
        jobs.append((f"booookscore-inc-{BOOK_INC.removesuffix('.epub')}", dag, 8, ()))
        dag = t / "graphrag.json"
        run(
            "from-graphrag",
            str(args.data / "graphrag" / "tests_verbs_data"),
            "--terminal-report",
            GRAPHRAG_REPORT,
            "--out",
            str(dag),
        )
        # The import records where the index was read; relative to the data folder, the benchmark
        # is the same bytes on every machine (and names no path outside it).
        doc = json.loads(dag.read_text(encoding="utf-8"))
        doc["meta"]["graphrag"]["index_dir"] = "graphrag/tests_verbs_data"
        dag.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
        jobs.append((f"graphrag-report-{GRAPHRAG_REPORT}", dag, 8, ()))
        # An agent run: the transcript's DAG as `check --conversation` builds it.
        dag = t / "agent-booking.json"
        save_dag(read_conversation(SOURCES / "agent-booking.json"), dag)
        jobs.append(("agent-booking", dag, 16, ()))
        # A cited answer: every kind, the citation kinds included (5 variants of each).
        dag = t / "cited-answer.json"
        save_dag(cited_dag(args.data), dag)
        jobs.append(("cited-answer", dag, 30, ()))
        for folder, dag, n, extra in jobs:
            target = out / folder
            if target.exists():
                shutil.rmtree(target)
            run(
                "inject",
                str(dag),
                "--n",
                str(n),
                "--seed",
                str(SEED),
                "--max-untouched",
                "3",
                "--out",
                str(target),
                *extra,
            )


if __name__ == "__main__":
    main()
