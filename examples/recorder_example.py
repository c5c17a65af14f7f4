"""Record the DAG of your own pipeline with `veritrail.pipelines.recorder`, then verify a claim against it.

Run it as is (no model, no key needed): the "model" here is a tiny rule-based stand-in so the
example is self-contained; replace `summarize` with your real model call. It writes
`example_dag.json` and `example_oracle.json` next to the working directory and verifies one
claim with the oracle (perfect evidence), printing the provenance path from the final output
back to the source sentence:

    python examples/recorder_example.py [OUT_DIR]
    veritrail verify OUT_DIR/example_dag.json --claims OUT_DIR/example_claims.json --oracle OUT_DIR/example_oracle.json
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from veritrail.method.config import VerifyConfig
from veritrail.method.loop import verify_claims
from veritrail.method.oracle import Oracle
from veritrail.pipelines.recorder import Recorder
from veritrail.records import Claim

REPORTS = {
    "q1": "Revenue grew by 12% in the first quarter. The growth came from the new Lisbon office.",
    "q2": "Revenue fell by 3% in the second quarter. Costs stayed flat.",
}


def first_sentence(text: str) -> str:
    """Stand-in for a model call: keep each input's first sentence."""
    return " ".join(part.split(". ")[0].rstrip(".") + "." for part in text.split("\n\n"))


def build(out_dir: Path) -> Path:
    """Run the toy pipeline under a recorder and save its DAG."""
    rec = Recorder(meta={"pipeline": "quarterly digest (example)"})

    # 1. Declare the sources: these are ground truth (root nodes).
    q1 = rec.source(REPORTS["q1"], id="report-q1")
    q2 = rec.source(REPORTS["q2"], id="report-q2")

    # 2a. Record a step explicitly: which nodes went in, what came out.
    s1 = rec.step("summarize", inputs=[q1], output=first_sentence(q1.text))

    # 2b. Or decorate the function that calls the model: NodeRef arguments become the step's
    #     inputs (the function receives their text) and the return value is its output.
    @rec.traced("summarize")
    def summarize(text: str) -> str:
        return first_sentence(text)

    s2 = summarize(q2)

    @rec.traced("combine")
    def combine(parts: list[str]) -> str:
        return first_sentence("\n\n".join(parts))

    final = combine([s1, s2])

    path = out_dir / "example_dag.json"
    dag = rec.save(path, terminal=final)
    print(f"recorded {len(dag)} nodes; stages: {dag.meta['stage_names']}; terminal: {dag.terminal}")
    return path


async def verify(dag_path: Path, out_dir: Path) -> None:
    """Verify one claim of the final output with an oracle answering from a file."""
    from veritrail.dag import load_dag

    dag = load_dag(dag_path)
    claim = "Revenue grew by 12% in the first quarter."
    oracle_doc = {
        "claims": [
            {
                "claim": claim,
                # The sentence (0-based index) the claim rests on, in every node along the way.
                "evidence": {"summarize-1": [0], "report-q1": [0]},
                "verdicts": ["Fully Supported"],
            }
        ]
    }
    (out_dir / "example_oracle.json").write_text(json.dumps(oracle_doc, indent=1), encoding="utf-8")
    (out_dir / "example_claims.json").write_text(json.dumps([claim]), encoding="utf-8")
    steps = Oracle.from_file(out_dir / "example_oracle.json").steps()
    [result] = await verify_claims(dag, [Claim("c1", claim)], steps, VerifyConfig(q=1))
    print(f"{claim!r}: {result.verdict.value if result.verdict else None}")
    for path in result.provenance:
        print("  provenance:", " -> ".join(path))


def main() -> None:
    out_dir = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(".")
    out_dir.mkdir(parents=True, exist_ok=True)
    asyncio.run(verify(build(out_dir), out_dir))


if __name__ == "__main__":
    main()
