"""Complete report documents for tests that care about a few fields: every field the typed
contract (`veritrail.report_model`) requires gets a neutral value, the test's fields win.
Readers of reports validate the whole document, so a test report must be a valid one."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from veritrail.report import REPORT_FORMAT, REPORT_VERSION


def iteration(**fields: Any) -> dict[str, Any]:
    """One iteration of a claim, `fields` over neutral values."""
    return {
        "index": 1,
        "nodes_checked": [],
        "carried_roots": [],
        "nodes_with_evidence": [],
        "evidence": [],
        "summaries": [],
        "dropped_ids": [],
        "verdict": "Fully Supported",
        "reasoning": "",
        "verdict_called_lm": True,
        **fields,
    }


def claim(**fields: Any) -> dict[str, Any]:
    """One report claim, `fields` over neutral values (its iterations completed)."""
    out: dict[str, Any] = {
        "id": "c1",
        "text": "A claim.",
        "sentence_indices": [],
        "subclaims": [],
        "verdict": "Fully Supported",
        "reasoning": "",
        "termination": "roots_only",
        "error": None,
        "score": None,
        "iterations": [],
        "provenance": [],
        "error_stages": [],
        "error_stage_status": "not_applicable",
        "issues": [],
        "cost": {
            "lm_calls": 0,
            "cached_calls": 0,
            "input_tokens": 0,
            "output_tokens": 0,
            "dollars": 0.0,
            "nodes_read": 0,
            "nodes_read_share": 0.0,
            "wall_seconds": 0.0,
            "per_step": {},
        },
        **fields,
    }
    out["iterations"] = [iteration(**it) for it in out["iterations"]]
    return out


def report(claims: Sequence[Mapping[str, Any]] = (), **fields: Any) -> dict[str, Any]:
    """A report of `claims` (each completed by `claim`), `fields` over neutral values; the
    `dag` section is completed too when given in part."""
    done = [claim(**c) for c in claims]
    verdicts = {v: 0 for v in ("Fully Supported", "Not Fully Supported", "Inconclusive")}
    verdicts["error"] = 0
    for c in done:
        verdicts[c["verdict"] or "error"] += 1
    dag = {
        "path": None,
        "nodes": 1,
        "terminal": "t",
        "terminal_sentences": [],
        "nodes_per_stage": {},
        "max_stage": 1,
        "nodes_touched": [],
        **fields.pop("dag", {}),
    }
    dag["nodes_touched"] = [
        {"stage": 1, "is_root": False, "sources": [], **n} for n in dag["nodes_touched"]
    ]
    return {
        "format": REPORT_FORMAT,
        "version": REPORT_VERSION,
        "model": "test/model",
        "config": {},
        "dag": dag,
        "summary": {
            "claims": len(done),
            "verdicts": verdicts,
            "terminations": {},
            "error_stages": {},
            "cost": {"lm_calls": 0, "input_tokens": 0, "output_tokens": 0, "dollars": 0.0},
        },
        "claims": done,
        "run": {},
        **fields,
    }
