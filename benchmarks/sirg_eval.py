"""SIRG evaluation on the data we have (issue 10, item 5): FABLES and WiCE, teacher-forced.

    python benchmarks/sirg_eval.py --dataset fables --n-train 60 --n-test 30
    python benchmarks/sirg_eval.py --dataset wice --n-train 60 --n-test 30

A job outside CI (minutes to hours on CPU: one backward pass per attributed token, two methods).

Data (built deterministically from ``../shared/data``; seed fixed):

* **FABLES** — a response is two consecutive claims of one book summary (one claim per line),
  labelled per line (Yes → faithful; No / PartialSupport → hallucinated; Inapplicable and claims
  without an evidence quote dropped). The context is the annotators' evidence quotes for both
  claims (each cut to 200 characters, at most 2 per claim), shuffled. Train and test are split
  **by book** (no book in both).
* **WiCE** — a response is one claim (supported → faithful; partially / not supported →
  hallucinated). The context is the first gold evidence set plus fixed distractors (the article
  sentences at evenly spaced positions outside every gold set, 3 of them; every line cut to 200
  characters), shuffled; dev → train, test → test.

The response is teacher-forced through the white-box model (SmolLM2-135M-Instruct by default):
the paper attributes the generator's own outputs, which these datasets do not have.

Output: a JSON file with settings, timings, cache counts and, per variant, P/R/F1 of the
hallucinated class with bootstrap 95% CIs over tau (see ``veritrail.detectors.sirg.evaluate``).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

from veritrail.detectors.sirg.attribution import Method
from veritrail.detectors.sirg.cache import AnalysisCache
from veritrail.detectors.sirg.classifier import FragmentClassifier
from veritrail.detectors.sirg.dataset import LabelledRecord
from veritrail.detectors.sirg.detector import Detector, DetectorConfig
from veritrail.detectors.sirg.evaluate import compare
from veritrail.detectors.sirg.models import LazyLM, set_threads

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data"
FABLES_QUERY = "Write statements about the book that these passages support."
WICE_QUERY = "Write a sentence for a Wikipedia article that this source supports."


def fables_records(data: Path, seed: int) -> list[LabelledRecord]:
    """Pairs of consecutive claims per (book, summariser), labelled per line."""
    raw = json.loads((data / "fables" / "FABLES.json").read_text(encoding="utf-8"))["FABLES"]
    rng = random.Random(seed)
    out = []
    for book in sorted(raw):
        for summariser in sorted(raw[book]):
            claims = []
            for cid, c in sorted(
                raw[book][summariser]["claims"].items(), key=lambda kv: int(kv[0])
            ):
                quotes = [q.strip() for q in c["evidence"] if q and q.strip()]
                if c["label"] == "Inapplicable" or not quotes:
                    continue
                claims.append((cid, c["claim"].strip(), int(c["label"] != "Yes"), quotes[:2]))
            for i in range(0, len(claims) - 1, 2):
                pair = claims[i : i + 2]
                lines = [" ".join(q.split())[:200] for _, _, _, qs in pair for q in qs]
                rng.shuffle(lines)
                out.append(
                    LabelledRecord(
                        id=f"fables/{book}/{summariser}/{pair[0][0]}+{pair[1][0]}",
                        context="\n".join(lines),
                        query=FABLES_QUERY,
                        response="\n".join(c for _, c, _, _ in pair),
                        labels=[lab for _, _, lab, _ in pair],
                        group=book,
                    )
                )
    return out


def wice_records(data: Path, split: str, seed: int, distractors: int = 3) -> list[LabelledRecord]:
    """One claim per record; gold sentences plus fixed distractors as context."""
    path = data / "wice" / "data" / "entailment_retrieval" / "claim" / f"{split}.jsonl"
    rng = random.Random(seed)
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
        d = json.loads(line)
        ev = d["evidence"]
        gold = list(d["supporting_sentences"][0]) if d["supporting_sentences"] else []
        in_any = {i for s in d["supporting_sentences"] for i in s}
        others = [i for i in range(len(ev)) if i not in in_any and len(ev[i]) > 30]
        step = max(1, len(others) // (distractors + 1))
        picked = others[step::step][:distractors]
        idx = sorted(set(gold) | set(picked))
        lines = [" ".join(ev[i].split())[:200] for i in idx if ev[i].strip()]
        rng.shuffle(lines)
        out.append(
            LabelledRecord(
                id=f"wice/{split}/{n}",
                context="\n".join(lines),
                query=WICE_QUERY,
                response=" ".join(d["claim"].split()),
                label=int(d["label"] != "supported"),
                group=f"wice-{split}",
            )
        )
    return out


def split_fables(
    records: list[LabelledRecord], n_train: int, n_test: int, seed: int
) -> tuple[list[LabelledRecord], list[LabelledRecord]]:
    """Split by book: a fixed shuffled book order; the last third of books are test books."""
    books = sorted({r.group or "" for r in records})
    random.Random(seed).shuffle(books)
    test_books = set(books[: len(books) // 3])
    rng = random.Random(seed + 1)
    train = [r for r in records if r.group not in test_books]
    test = [r for r in records if r.group in test_books]
    rng.shuffle(train)
    rng.shuffle(test)
    return train[:n_train], test[:n_test]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", choices=("fables", "wice"), required=True)
    ap.add_argument("--data-root", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--n-train", type=int, default=60)
    ap.add_argument("--n-test", type=int, default=30)
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--max-targets", type=int, default=3, help="attributed tokens per fragment")
    ap.add_argument("--k", type=int, default=15)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--lr", type=float, default=3e-5)
    ap.add_argument("--max-length", type=int, default=192)
    ap.add_argument("--bootstrap", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cache", type=Path, default=ROOT / ".veritrail" / "sirg-bench-cache")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--analyse-only", action="store_true", help="fill the cache and stop")
    args = ap.parse_args(argv)

    def log(msg: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)

    set_threads(args.threads)
    if args.dataset == "fables":
        train, test = split_fables(
            fables_records(args.data_root, args.seed), args.n_train, args.n_test, args.seed
        )
    else:
        rng = random.Random(args.seed)
        train = wice_records(args.data_root, "dev", args.seed)
        test = wice_records(args.data_root, "test", args.seed)
        rng.shuffle(train)
        rng.shuffle(test)
        train, test = train[: args.n_train], test[: args.n_test]
    log(f"{args.dataset}: {len(train)} train, {len(test)} test responses")

    config = DetectorConfig(k=args.k, max_targets_per_fragment=args.max_targets)
    lm = LazyLM(args.model)
    cache = AnalysisCache(args.cache)
    det = Detector(lm, None, config, cache)
    timings: dict[str, float] = {}
    analyses: dict[Method, tuple[list[Any], list[Any]]] = {}
    for method in (Method.ATTNLRP, Method.INPUT_X_GRADIENT):
        t0 = time.monotonic()
        parts = []
        for part in (train, test):
            got = []
            for i, r in enumerate(part):
                a, hit = det.analyse(r.example(), method)
                got.append(a)
                if not hit:
                    log(
                        f"{method.value} {i + 1}/{len(part)} {r.id}: {len(a.input_ids)} tokens, "
                        f"{len(a.targets)} targets"
                    )
            parts.append(got)
        analyses[method] = (parts[0], parts[1])
        timings[f"analyse_{method.value}_s"] = round(time.monotonic() - t0, 1)
    log(f"cache: {cache.hits} hits, {cache.misses} misses; {timings}")
    if args.analyse_only:
        return 0

    t0 = time.monotonic()
    result = compare(
        train,
        test,
        analyses,
        config=config,
        new_classifier=lambda: FragmentClassifier.from_encoder(
            seed=args.seed, max_length=args.max_length
        ),
        train_kwargs={
            "epochs": args.epochs,
            "batch_size": args.batch_size,
            "lr": args.lr,
            "seed": args.seed,
        },
        n_boot=args.bootstrap,
        seed=args.seed,
        log=log,
    )
    timings["compare_s"] = round(time.monotonic() - t0, 1)
    result.update(
        {
            "dataset": args.dataset,
            "model": lm.name,
            "teacher_forced": True,
            "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
            "timings": timings,
            "cache": {"hits": cache.hits, "misses": cache.misses},
            "mean_tokens": round(
                sum(
                    len(a.input_ids)
                    for a in analyses[Method.ATTNLRP][0] + analyses[Method.ATTNLRP][1]
                )
                / max(1, len(train) + len(test)),
                1,
            ),
        }
    )
    text = json.dumps(result, indent=1)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
