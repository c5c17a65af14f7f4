"""The fixed 20-claim WiCE slice of issue 19's quality targets, written as a WiCE claim file.

    python benchmarks/wice_slice.py OUT.jsonl [--wice ../shared/data/wice/.../claim/test.jsonl]
    veritrail eval wice:OUT.jsonl --model local/qwen2.5-coder-1.5b \
        --method veritrail:q=1 --method rag:k=15 --method direct --out results/

The slice (docs/evaluation.md, "Quality of the embedded model (WiCE slices)"): from WiCE's test claims, the 10
`supported` claims and the 10 claims of the other labels (`partially_supported`,
`not_supported`: both are "Not Fully Supported" here) with the shortest articles, ties broken by
file order, kept in file order. Balanced, so balanced accuracy and macro F1 say something about
20 claims; short articles (15–31 sentences: 2–4 root chunks), so the embedded model gets through
it in minutes, not hours. The rows are written unchanged (WiCE's own format), so the slice is
rebuilt from the shared data and nothing of WiCE is copied into this repository.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

WICE_TEST = (
    Path(__file__).resolve().parents[2]
    / "shared/data/wice/data/entailment_retrieval/claim/test.jsonl"
)
PER_SIDE = 10


def slice_rows(rows: list[dict[str, object]], per_side: int = PER_SIDE) -> list[int]:
    """Indices (in file order) of the slice's rows."""

    def size(i: int) -> tuple[int, int]:
        evidence = rows[i]["evidence"]
        assert isinstance(evidence, list)
        return len(evidence), i

    order = sorted(range(len(rows)), key=size)
    supported = [i for i in order if rows[i]["label"] == "supported"][:per_side]
    other = [i for i in order if rows[i]["label"] != "supported"][:per_side]
    return sorted(supported + other)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--wice", type=Path, default=WICE_TEST)
    args = ap.parse_args()
    lines = [ln for ln in args.wice.read_text(encoding="utf-8").splitlines() if ln.strip()]
    rows = [json.loads(ln) for ln in lines]
    keep = slice_rows(rows)
    args.out.write_text("".join(lines[i] + "\n" for i in keep), encoding="utf-8")
    print(f"wrote {len(keep)} claims (rows {keep}) to {args.out}")


if __name__ == "__main__":
    main()
