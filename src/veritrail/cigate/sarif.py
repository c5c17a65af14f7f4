"""SARIF 2.1.0 (what GitHub code scanning and other code hosts read): one `run` per report
(per job of a batch), one `result` per reported claim: Not Fully Supported (level `error`), ended
in error (`warning`), Inconclusive (`note`), each under its rule (`findings.RULES`); a miscited
claim (`--citations`) also under rule `miscited`, an `error` when the `--max-miscited` gate failed,
else a `warning`, with its status and cited and supporting nodes in its properties.

A result is located at the DAG file (the line of the first blamed node when the DAG text is
known, else line 1: code hosts need a line to annotate) and, as logical locations, at the
stage and the nodes where the unsupported content entered the DAG. `partialFingerprints` hold
a hash of the claim text, so a host tracks the same claim across runs.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path, PurePath
from typing import Any
from urllib.parse import quote

from .findings import RULES, TOOL_NAME, Finding, GateInput, Kind

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_LEVEL = {
    Kind.UNSUPPORTED: "error",
    Kind.ERROR: "warning",
    Kind.INCONCLUSIVE: "note",
    Kind.MISCITED: "warning",
}


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("veritrail")
    except PackageNotFoundError:  # running from a source tree that is not installed
        return "0"


def artifact_uri(path: str) -> str:
    """A file path as a SARIF URI reference: relative paths percent-encoded with `/`
    separators (code hosts resolve them against the repository), absolute ones as `file:`."""
    p = PurePath(path)
    if p.is_absolute():
        return Path(path).as_uri()
    return quote(p.as_posix(), safe="/")


def _rules() -> list[dict[str, Any]]:
    return [
        {
            "id": rule_id,
            "name": rule_id.title().replace("-", ""),
            "shortDescription": {"text": text},
            "defaultConfiguration": {"level": _LEVEL[kind]},
        }
        for kind, (rule_id, text) in RULES.items()
    ]


def _logical(f: Finding) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"name": f"stage {s}", "fullyQualifiedName": f"stage-{s}", "kind": "module"}
        for s in f.stages
    ]
    stage = f"stage-{f.stages[0]}/" if len(f.stages) == 1 else ""
    out += [{"name": n, "fullyQualifiedName": f"{stage}{n}", "kind": "element"} for n in f.nodes]
    return out


def _result(gi: GateInput, f: Finding) -> dict[str, Any]:
    rule_id = RULES[f.kind][0]
    if f.kind is Kind.UNSUPPORTED:
        text = f"Claim {f.claim_id} is Not Fully Supported ({f.where}): {f.text}"
    elif f.kind is Kind.ERROR:
        text = f"Claim {f.claim_id} could not be verified: {f.text}"
    elif f.kind is Kind.MISCITED:
        text = f"Claim {f.claim_id} is miscited ({f.cites}): {f.text}"
    else:
        text = f"Claim {f.claim_id} is Inconclusive: {f.text}"
    location: dict[str, Any] = {}
    if gi.dag_uri:
        location["physicalLocation"] = {
            "artifactLocation": {"uri": artifact_uri(gi.dag_uri)},
            "region": {"startLine": gi.node_line(f.nodes[0] if f.nodes else None)},
        }
    logical = _logical(f)
    if logical:
        location["logicalLocations"] = logical
    key = hashlib.sha256(" ".join(f.text.split()).casefold().encode()).hexdigest()
    level = "error" if f.kind is Kind.MISCITED and f.gate_failed else _LEVEL[f.kind]
    cites = (
        {
            "citation": f.citation,
            "citedNodes": list(f.cited_nodes),
            "supportingNodes": list(f.supporting_nodes),
            "gateFailed": f.gate_failed,
        }
        if f.kind is Kind.MISCITED
        else {}
    )
    result: dict[str, Any] = {
        "ruleId": rule_id,
        "level": level,
        "message": {"text": text},
        "partialFingerprints": {"veritrailClaimText/v1": key},
        "properties": {
            "claimId": f.claim_id,
            "verdict": f.verdict,
            "errorStages": list(f.stages),
            "reasoning": f.reasoning,
            "evidenceTrail": f.trail,
            **({"error": f.error} if f.error else {}),
            **cites,
        },
    }
    if location:
        result["locations"] = [location]
    return result


def sarif_log(inputs: Sequence[GateInput]) -> dict[str, Any]:
    """The SARIF 2.1.0 log of `inputs` (one run each)."""
    runs = []
    for gi in inputs:
        runs.append(
            {
                "tool": {
                    "driver": {
                        "name": TOOL_NAME,
                        "version": _version(),
                        "rules": _rules(),
                    }
                },
                "automationDetails": {"id": f"veritrail/{gi.name}/"},
                "results": [_result(gi, f) for f in gi.reported],
                "properties": dict(gi.properties),
            }
        )
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": runs}


def sarif_json(inputs: Sequence[GateInput]) -> str:
    """`sarif_log` as indented JSON text (non-ASCII kept; JSON escapes the rest)."""
    return json.dumps(sarif_log(inputs), indent=2, ensure_ascii=False) + "\n"
