"""Build the injected-hallucination benchmark (benchmarks/injected/, issue 39) from real runs.

    python benchmarks/build_injected.py [--data ../shared/data] [--out benchmarks/injected]

Sources (benchmarks/injected/README.md says why these):

* the quick-start DAG (examples/quickstart/dag.json);
* BooookScore (Chang et al., ICLR 2024; lilakk/BooookScore @ 094bf69b, MIT): the hierarchical
  traces of two books (chunk summaries → final summary) and the incremental trace of one book
  (a chain of running summaries), through `veritrail from-booookscore`;
* GraphRAG's index of *A Christmas Carol* (microsoft/graphrag @ 6dad6d2b, tests/verbs/data, MIT):
  community report 84 with its descriptions and text unit, through
  `veritrail from-graphrag --terminal-report 84` (needs pyarrow).

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

from veritrail.cli.main import cli

ROOT = Path(__file__).resolve().parents[1]
SEED = 39

BOOKS_HIER = ("catfish-rolling.epub", "the-survivalists.epub")
BOOK_INC = "catfish-rolling.epub"
GRAPHRAG_REPORT = "84"


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
