"""DeepEval's FaithfulnessMetric over the peers corpus: run by `bench_peers.py` with the python
of DeepEval's own virtualenv (never ours), against the loopback server.

    <venv>/bin/python peers_run_deepeval.py CORPUS.json OUT.json --base-url URL --concurrency N

As a user runs it: one `LLMTestCase` per answer (the answer as `actual_output`, its 3 source
paragraphs as `retrieval_context`), `evaluate()` with the metric on an OpenAI model pointed at
`--base-url` (dummy key), DeepEval's default error handling (a metric that fails raises out of
`evaluate()`: the script then ends as an uncaught exception would, status 1, after writing what
it knows). Writes, per answer, the score, the metric's verbose log and the error if any.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "1")  # no network beyond 127.0.0.1
os.environ.setdefault("DEEPEVAL_NO_INSPECT_PROMPT", "1")
os.environ.setdefault("DEEPEVAL_RESULTS_FOLDER", "")

from deepeval import evaluate
from deepeval.evaluate.configs import (
    AsyncConfig,
    CacheConfig,
    DisplayConfig,
    ErrorConfig,
)
from deepeval.metrics import FaithfulnessMetric
from deepeval.models import GPTModel
from deepeval.test_case import LLMTestCase


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus")
    ap.add_argument("out")
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--model", default="gpt-4o-mini")
    args = ap.parse_args()
    with open(args.corpus, encoding="utf-8") as f:
        items = json.load(f)
    model = GPTModel(model=args.model, base_url=args.base_url, api_key="sk-bench-loopback")
    cases = [
        LLMTestCase(
            input="Summarise the sources.",
            actual_output=it["answer"],
            retrieval_context=it["sources"],
            name=it["id"],
        )
        for it in items
    ]
    metric = FaithfulnessMetric(model=model, include_reason=True, async_mode=True)
    try:
        result = evaluate(
            cases,
            [metric],
            async_config=AsyncConfig(max_concurrent=args.concurrency),
            display_config=DisplayConfig(
                show_indicator=False, print_results=False, inspect_after_run=False
            ),
            cache_config=CacheConfig(write_cache=False, use_cache=False),
            error_config=ErrorConfig(),
        )
    except Exception as exc:  # noqa: BLE001 - what a user's script dies of: kept, status 1
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump({"tool": "deepeval", "crashed": f"{type(exc).__name__}: {exc}"[:500]}, f)
        print(f"deepeval raised {type(exc).__name__}: {exc}"[:500], file=sys.stderr)
        return 1
    rows = []
    for tr in result.test_results:
        md = (tr.metrics_data or [None])[0]
        verbose = (md.verbose_logs or "") if md is not None else ""
        rows.append(
            {
                "id": tr.name,
                "score": md.score if md is not None else None,
                "success": md.success if md is not None else False,
                "error": md.error if md is not None else "no metric data",
                "verbose_logs": verbose,
            }
        )
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"tool": "deepeval", "answers": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
