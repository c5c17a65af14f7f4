"""Shared prompts against one claim per prompt (docs/method.md#shared-prompts, issue 38).

    python benchmarks/bench_shared_prompts.py [--answers 10]

Runs `veritrail verify` through its CLI with the word-overlap demonstration model
(`--model demo/overlap`, in-process, keyless) on the same inputs twice, `--claims-per-prompt 1`
(the paper's form) and the default, and prints per input the calls by step (decomposition +
evidence + verdict), the input tokens as the model layer counts them (characters / 4), and
whether every claim's verdict, error stage, evidence and termination are the same in both forms.

Inputs: the quick start (`examples/quickstart`, 4 claims), `examples/check` (4 claims, the DAG
`veritrail check` builds), and `--answers` generated answers of `peers_corpus.py` (5 claims each)
in the check layout (3 sources -> answer) and over a 2-stage DAG (sources -> chunk summaries ->
answer), their claims given as the answers' sentences.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from peers_corpus import Item, check_dag, make_corpus, two_stage_dag  # noqa: E402

STEPS = ("decomposition", "evidence_selection", "verdict")


def _veritrail() -> list[str]:
    """`veritrail` of the environment running this script."""
    exe = Path(sys.executable).parent / "veritrail"
    if exe.exists():
        return [str(exe)]
    return [sys.executable, "-c", "from veritrail.cli.main import main; main()"]


def _verify(inputs: list[str], claims: Path, out: Path, per_prompt: int | None) -> dict[str, Any]:
    """`veritrail verify DAG` (or `check ANSWER SOURCES...`: `inputs`) with the demonstration
    model; the report."""
    cmd = [
        *_veritrail(), *inputs, "--claims", str(claims),
        "--model", "demo/overlap", "--cache", "off", "--out", str(out), "--quiet",
        "--runs-dir", str(out.parent / f"runs-{out.stem}"),
    ]  # fmt: skip
    if per_prompt is not None:
        cmd += ["--claims-per-prompt", str(per_prompt)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)}: exit {done.returncode}\n{done.stderr}")
    return json.loads(out.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def _figures(report: dict[str, Any]) -> tuple[Counter[str], int]:
    calls: Counter[str] = Counter()
    tokens = 0
    for c in report["claims"]:
        for step, cost in (c.get("cost") or {}).get("per_step", {}).items():
            calls[step] += cost.get("lm_calls", 0)
            tokens += cost.get("input_tokens", 0)
    return calls, tokens


def _outcomes(report: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [
        (
            c["id"],
            c["verdict"],
            c.get("error_stage"),
            c["termination"],
            sorted(
                (s["node_id"], s["sentence_index"])
                for it in c["iterations"]
                for s in it["evidence"]
            ),
        )
        for c in report["claims"]
    ]


def _row(name: str, n: int, one: dict[str, Any], shared: dict[str, Any]) -> str:
    def cell(r: dict[str, Any]) -> str:
        calls, tokens = _figures(r)
        parts = " + ".join(str(calls.get(s, 0)) for s in STEPS)
        return f"{sum(calls.values())} calls ({parts}), {tokens:,} tokens in"

    same = "yes" if _outcomes(one) == _outcomes(shared) else "NO"
    return f"| {name} | {n} | {cell(one)} | {cell(shared)} | {same} |"


def _write(path: Path, doc: Any) -> Path:
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def _corpus_inputs(items: list[Item], work: Path, layout: str) -> list[tuple[Path, Path]]:
    build = {"check": check_dag, "two_stage": two_stage_dag}[layout]
    out = []
    for item in items:
        dag = _write(work / f"{layout}-{item.id}.json", build(item))
        sentences = [s for s in item.answer.split(". ") if s]
        claims = [s if s.endswith(".") else s + "." for s in sentences]
        out.append((dag, _write(work / f"{layout}-{item.id}-claims.json", claims)))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--answers", type=int, default=10)
    args = ap.parse_args()
    print("| run | claims | one claim per prompt | shared (default) | same results |")
    print("| --- | ---: | ---: | ---: | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        check_dir = ROOT / "examples/check"
        fixed = [
            ("quick start", ["verify", str(ROOT / "examples/quickstart/dag.json")],
             ROOT / "examples/quickstart/claims.json"),
            ("`examples/check`", ["check", str(check_dir / "answer.txt"),
             *map(str, sorted((check_dir / "sources").glob("*.txt")))], check_dir / "claims.json"),
        ]  # fmt: skip
        for k, (name, inputs, c) in enumerate(fixed):
            one = _verify(inputs, c, work / f"fixed-{k}-1.json", 1)
            shared = _verify(inputs, c, work / f"fixed-{k}-s.json", None)
            print(_row(name, len(one["claims"]), one, shared))
        items = make_corpus(args.answers, 0)
        for layout, label in (("check", "check layout"), ("two_stage", "2-stage DAG")):
            totals: dict[str, dict[str, Any]] = {"1": {"claims": []}, "s": {"claims": []}}
            for k, (d, c) in enumerate(_corpus_inputs(items, work, layout)):
                for form, per in (("1", 1), ("s", None)):
                    r = _verify(["verify", str(d)], c, work / f"{layout}-{k}-{form}.json", per)
                    totals[form]["claims"] += [{**x, "id": f"{k}/{x['id']}"} for x in r["claims"]]
            n = len(totals["1"]["claims"])
            print(_row(f"{label}, {args.answers} answers", n, totals["1"], totals["s"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
