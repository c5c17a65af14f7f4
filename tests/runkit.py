"""The deterministic loopback model and the small 3-stage DAG shared by the run tests.

`responder` answers every method step from the prompt alone (evidence = the sentences naming the
claim's item; a verdict by content), so a run against `FakeOpenAIServer` is reproducible: the
resume, run-contract and batch tests compare whole reports on it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
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


def _evidence(user: str, claim: str) -> dict[str, Any]:
    item = re.search(r"Item (\d+)", claim)
    key = f"item {item.group(1)}" if item else "\0"
    ids = [
        int(i)
        for i, s in re.findall(r"^\[(\d+)\] (.*)$", user, re.M)
        if key in s.lower() or f"items {key[5:]} " in s.lower()
    ]
    return {"selected_ids": ids, "context_ids": [], "summary": f"Mentions {key}.", "missing": ""}


def _verdict(claim: str) -> dict[str, Any]:
    item = re.search(r"Item (\d+)", claim)
    key = f"item {item.group(1)}" if item else "\0"
    verdict = "Not Fully Supported" if "lost" in claim else "Fully Supported"
    return {"reasoning": f"Judged {key}.", "verdict": verdict}


def _shared(user: str, answer: Callable[[str], dict[str, Any]], label: str) -> str:
    """A shared prompt (docs/method.md#shared-prompts): per claim c1..cN, what its own prompt gets."""
    entries = []
    k = 1
    while f"<<< {label} c{k}\n" in user:
        entries.append({"claim": f"c{k}", **answer(fenced(user, f"{label} c{k}"))})
        k += 1
    return json.dumps({"claims": entries})


def responder(request: dict[str, Any]) -> str:
    """A deterministic model: evidence = sentences naming the claim's item; verdict by content."""
    msgs = request.get("messages")
    if not msgs:
        return "{}"  # a body cut off by the SIGKILL: nobody is left to read the reply
    system, user = msgs[0]["content"], msgs[-1]["content"]
    shared = "<<< claim c1\n" in user or "<<< statement c1\n" in user
    if system.startswith("You split factual"):
        if shared:
            return _shared(user, lambda text: {"parts": [text]}, "statement")
        return json.dumps({"parts": [fenced(user, "statement")]})
    if system.startswith("You find evidence"):
        if shared:  # each claim reads only the excerpts listed for it
            entries = []
            k = 1
            while f"<<< claim c{k}\n" in user:
                own = re.search(rf"^Excerpts for (?:c{k}|every claim): ([0-9, ]*)$", user, re.M)
                labels = re.findall(r"\d+", own.group(1)) if own else []
                text = "\n".join(fenced(user, f"excerpt {label}") for label in labels)
                entries.append({"claim": f"c{k}", **_evidence(text, fenced(user, f"claim c{k}"))})
                k += 1
            return json.dumps({"claims": entries})
        return json.dumps(_evidence(user, fenced(user, "claim")))
    if system.startswith("You judge"):
        if shared:
            return _shared(user, _verdict, "claim")
        return json.dumps(_verdict(fenced(user, "claim")))
    raise AssertionError(system[:60])


def _numbered(block: str) -> list[tuple[int, str]]:
    return [(int(i), t) for i, t in re.findall(r"^\[(\d+)\] (.*)$", block, re.M)]


def extracting_responder(request: dict[str, Any]) -> str:
    """`responder` plus claim extraction's stages, in both forms (every sentence is kept as it
    is; the batched forms are told apart by their schema names)."""
    fmt = (request.get("response_format") or {}).get("json_schema") or {}
    user = (request.get("messages") or [{}])[-1].get("content", "")
    if fmt.get("name") == "claim_selection_batch":
        asked = re.search(r"^Sentences to answer: ([0-9, ]+)", user, re.M)
        wanted = {int(i) for i in re.findall(r"\d+", asked.group(1) if asked else "")}
        given = _numbered(fenced(user, "text"))
        return json.dumps({"sentences": [{"id": i, "text": t} for i, t in given if i in wanted]})
    if fmt.get("name") == "claim_disambiguation_batch":
        parts = _numbered(fenced(user, "checkable parts"))
        entries = [{"id": i, "status": "clear", "text": t} for i, t in parts]
        return json.dumps({"sentences": entries})
    if fmt.get("name") == "claim_decomposition_batch":
        statements = _numbered(fenced(user, "statements"))
        return json.dumps({"sentences": [{"id": i, "parts": [t]} for i, t in statements]})
    if fmt.get("name") == "claim_selection":
        sentence = fenced(user, "target sentence")
        return json.dumps(
            {"has_verifiable_content": True, "verifiable_text": sentence, "reason": ""}
        )
    if fmt.get("name") == "claim_disambiguation":
        return json.dumps({"status": "clear", "text": fenced(user, "checkable part"), "reason": ""})
    return responder(request)
