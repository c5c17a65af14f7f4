"""RAGAS's Faithfulness over the peers corpus: run by `bench_peers.py` with the python of RAGAS's
own virtualenv (never ours), against the loopback server.

    <venv>/bin/python peers_run_ragas.py CORPUS.json OUT.json --base-url URL --concurrency N

As RAGAS 0.4 documents it: `ragas.metrics.collections.Faithfulness` (statement generator, then
one NLI prompt over all statements) on `llm_factory(MODEL, client=AsyncOpenAI(base_url=...))`
with a dummy key. One `ascore` per answer (the answer, its 3 source paragraphs as
`retrieved_contexts`), at most `--concurrency` at once: RAGAS's `abatch_score` gathers every
answer at once with no bound and loses the whole batch to one exception, so the bound and the
per-answer error are this script's (the way a user scoring many answers has to write it). An
answer whose scoring raised gets no score and its error is recorded; the script exits 0 either
way, as RAGAS itself does not stop.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import sys

os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")  # no network beyond 127.0.0.1


def _vertexai_shim() -> None:
    """RAGAS 0.4.3 does not import on a fresh install: ragas/llms/base.py imports ChatVertexAI
    from `langchain_community.chat_models.vertexai`, which no langchain-community release that
    pip resolves for it still has (vibrantlabsai/ragas#2745, #2995, open). The class is only
    named in an isinstance list, so an empty stand-in is the workaround users apply."""
    import types

    try:
        import langchain_community.chat_models.vertexai  # noqa: F401
    except ModuleNotFoundError:
        shim = types.ModuleType("langchain_community.chat_models.vertexai")
        shim.ChatVertexAI = type("ChatVertexAI", (), {})  # type: ignore[attr-defined]
        sys.modules[shim.__name__] = shim


_vertexai_shim()

from openai import AsyncOpenAI  # noqa: E402
from ragas.llms import llm_factory  # noqa: E402
from ragas.metrics.collections import Faithfulness  # noqa: E402


async def run(items: list[dict], base_url: str, concurrency: int, model: str) -> list[dict]:
    client = AsyncOpenAI(base_url=base_url, api_key="sk-bench-loopback")
    metric = Faithfulness(llm=llm_factory(model, client=client))
    gate = asyncio.Semaphore(concurrency)

    async def one(item: dict) -> dict:
        async with gate:
            try:
                result = await metric.ascore(
                    user_input="Summarise the sources.",
                    response=item["answer"],
                    retrieved_contexts=item["sources"],
                )
            except Exception as exc:  # noqa: BLE001 - per answer: RAGAS raises anything
                return {
                    "id": item["id"],
                    "score": None,
                    "error": f"{type(exc).__name__}: {exc}"[:300],
                }
        value = float(result.value) if result.value is not None else math.nan
        return {"id": item["id"], "score": None if math.isnan(value) else value, "error": None}

    return list(await asyncio.gather(*(one(it) for it in items)))


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
    rows = asyncio.run(run(items, args.base_url, args.concurrency, args.model))
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"tool": "ragas", "answers": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
