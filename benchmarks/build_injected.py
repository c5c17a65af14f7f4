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
  markers) over three web articles that WiCE (Kamoi et al., EMNLP 2023; ryokamoi/wice @
  ddeb6c18) ships as evidence, a few sentences of each: the citation kinds' material.

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

# The cited answer's sources, in marker order: (root id, WiCE dev claim id, evidence sentences).
# Three articles on unrelated subjects, so that a marker moved to another source names one that
# does not support the sentence.
WICE_SOURCES = (
    ("chimeras.txt", "dev03245", (12, 14, 15, 17, 21, 22, 26, 27, 28)),
    ("portola.txt", "dev00624", (11, 13, 15, 16, 17, 24, 32, 33)),
    ("registry.txt", "dev03598", (11, 12, 13, 14, 16, 17, 18, 22)),
)


def _sentence(text: str) -> str:
    """An evidence sentence as text: the web page's heading mark dropped, a full stop added to
    a heading so that it stays a sentence of its own."""
    if text.startswith("#"):
        text = text.lstrip("#").strip()
        return text if text.endswith((".", "!", "?")) else text + "."
    return text


def cited_dag(data: Path) -> Dag:
    """The cited answer over its three WiCE evidence excerpts (roots), one stage above them."""
    path = data / "wice" / "data" / "entailment_retrieval" / "claim" / "dev.jsonl"
    rows = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        rows[row["meta"]["id"]] = row
    records = [
        {
            "id": nid,
            "text": " ".join(_sentence(rows[cid]["evidence"][i]) for i in picks),
            "sources": [],
        }
        for nid, cid, picks in WICE_SOURCES
    ]
    answer = (SOURCES / "cited-answer.md").read_text(encoding="utf-8").strip()
    records.append({"id": "answer", "text": answer, "sources": [r["id"] for r in records]})
    meta = {
        "source": "WiCE evidence (dev " + ", ".join(c for _, c, _ in WICE_SOURCES) + ")",
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
        dag = t / "cited-wice.json"
        save_dag(cited_dag(args.data), dag)
        jobs.append(("cited-wice", dag, 30, ()))
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
