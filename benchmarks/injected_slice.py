"""Cut a slice of the injected benchmark (benchmarks/injected) for a model too slow for all of it.

The embedded model takes some 15-30 s a call on two cores, and the whole benchmark is about
1,500 calls with VeriTrail; docs/evaluation.md's embedded-model figures were measured on slices
cut by this script. A slice keeps some DAG folders, the variants of some kinds, and N untouched
claims per variant (chosen by rotation: the i-th variant kept keeps untouched claims i, i+1, …
modulo the variant's list, so every clean claim gets its turn); each kept variant's claims.json
and gold.json are cut to the planted claim and those untouched claims. The clean DAG is copied
whole (eval reads only the clean claims some variant keeps).

    python benchmarks/injected_slice.py /tmp/slice1 --dag quickstart --dag graphrag-report-84
    python benchmarks/injected_slice.py /tmp/slice2 --dag agent-booking \
        --kinds number,entity-swap --untouched 1
    python benchmarks/injected_slice.py /tmp/slice2 --dag cited-answer --kinds number,entity-swap

A DAG folder already in OUT is refused (exit 2): nothing is overwritten. Deterministic: the same
arguments give byte-identical files.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent / "injected"


def cut(
    src: Path, dst: Path, *, kinds: set[str] | None = None, untouched: int = 0
) -> dict[str, Any]:
    """Write the slice of one DAG folder `src` to `dst`; return its manifest."""
    doc: dict[str, Any] = json.loads((src / "injected.json").read_text(encoding="utf-8"))
    keep = [v for v in doc["variants"] if kinds is None or v["kind"] in kinds]
    for i, v in enumerate(keep):
        pool = list(v["untouched"])
        n = min(untouched, len(pool))
        v["untouched"] = [pool[(i + j) % len(pool)] for j in range(n)]
    doc["variants"] = keep
    dst.mkdir(parents=True)
    shutil.copytree(src / "clean", dst / "clean")
    for v in keep:
        shutil.copytree(src / v["id"], dst / v["id"])
        wanted = {"injected", *v["untouched"]}
        for name in ("claims.json", "gold.json"):
            path = dst / v["id"] / name
            part = json.loads(path.read_text(encoding="utf-8"))
            part["claims"] = [c for c in part["claims"] if c["id"] in wanted]
            path.write_text(json.dumps(part, indent=1) + "\n", encoding="utf-8")
    (dst / "injected.json").write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return doc


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path, help="the slice's folder (created; DAG folders go inside)")
    ap.add_argument("--dag", action="append", required=True, help="a folder of the benchmark")
    ap.add_argument("--kinds", help="comma-separated kinds to keep (default: all)")
    ap.add_argument("--untouched", type=int, default=0, help="untouched claims per variant (0)")
    ap.add_argument("--bench", type=Path, default=BENCH, help="the benchmark (benchmarks/injected)")
    args = ap.parse_args(argv)
    kinds = {k.strip() for k in args.kinds.split(",")} if args.kinds else None
    if args.untouched < 0:
        print("injected_slice: --untouched must be 0 or more", file=sys.stderr)
        return 2
    for name in args.dag:
        src, dst = args.bench / name, args.out / name
        if not (src / "injected.json").is_file():
            print(f"injected_slice: {src} is not a folder of the benchmark", file=sys.stderr)
            return 2
        if dst.exists():
            print(f"injected_slice: {dst} exists; not overwriting it", file=sys.stderr)
            return 2
    for name in args.dag:
        doc = cut(args.bench / name, args.out / name, kinds=kinds, untouched=args.untouched)
        n_untouched = sum(len(v["untouched"]) for v in doc["variants"])
        print(f"{name}: {len(doc['variants'])} variants, {n_untouched} untouched claims")
    return 0


if __name__ == "__main__":
    sys.exit(main())
