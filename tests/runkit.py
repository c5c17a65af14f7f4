"""The deterministic loopback model and the small 3-stage DAG shared by the run tests.

`responder` answers every method step from the prompt alone (evidence = the sentences naming the
claim's item; a verdict by content), so a run against `FakeOpenAIServer` is reproducible: the
resume, run-contract and batch tests compare whole reports on it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from veritrail.dag import Dag


def build_dag() -> Dag:
    """Three stages, two summaries per merge: several iterations and prompts per claim."""
    recs: list[dict[str, object]] = [
        {
            "id": f"r{i}",
            "text": f"Chunk {i} says item {i} costs {i + 1} dollars. It was sold in town {i}.",
        }
        for i in range(8)
    ]
    recs += [
        {
            "id": f"m{j}",
            "text": f"Summary {j}: items {2 * j} and {2 * j + 1} were sold.",
            "sources": [f"r{2 * j}", f"r{2 * j + 1}"],
        }
        for j in range(4)
    ]
    recs.append(
        {
            "id": "t",
            "text": "All items were sold. Item 3 costs 4 dollars. Item 9 was lost.",
            "sources": ["m0", "m1", "m2", "m3"],
        }
    )
    return Dag.from_records(recs)


CLAIMS = [f"Item {i} costs {i + 1} dollars." for i in range(6)] + [
    "Item 9 was lost.",
    "Item 2 was sold in town 2.",
]


def fenced(text: str, label: str) -> str:
    m = re.search(rf"<<< {label}\n(.*?)\n>>> end {label}", text, re.S)
    return m.group(1) if m else ""


def responder(request: dict[str, Any]) -> str:
    """A deterministic model: evidence = sentences naming the claim's item; verdict by content."""
    msgs = request.get("messages")
    if not msgs:
        return "{}"  # a body cut off by the SIGKILL: nobody is left to read the reply
    system, user = msgs[0]["content"], msgs[-1]["content"]
    if system.startswith("You split factual"):
        return json.dumps({"parts": [fenced(user, "statement")]})
    claim = fenced(user, "claim")
    item = re.search(r"Item (\d+)", claim)
    key = f"item {item.group(1)}" if item else "\0"
    if system.startswith("You find evidence"):
        ids = [
            int(i)
            for i, s in re.findall(r"^\[(\d+)\] (.*)$", user, re.M)
            if key in s.lower() or f"items {key[5:]} " in s.lower()
        ]
        return json.dumps(
            {"selected_ids": ids, "context_ids": [], "summary": f"Mentions {key}.", "missing": ""}
        )
    if system.startswith("You judge"):
        verdict = "Not Fully Supported" if "lost" in claim else "Fully Supported"
        return json.dumps({"reasoning": f"Judged {key}.", "verdict": verdict})
    raise AssertionError(system[:60])


def extracting_responder(request: dict[str, Any]) -> str:
    """`responder` plus the two claim-extraction stages (every sentence is kept as it is)."""
    fmt = (request.get("response_format") or {}).get("json_schema") or {}
    user = (request.get("messages") or [{}])[-1].get("content", "")
    if fmt.get("name") == "claim_selection":
        sentence = fenced(user, "target sentence")
        return json.dumps(
            {"has_verifiable_content": True, "verifiable_text": sentence, "reason": ""}
        )
    if fmt.get("name") == "claim_disambiguation":
        return json.dumps({"status": "clear", "text": fenced(user, "checkable part"), "reason": ""})
    return responder(request)
