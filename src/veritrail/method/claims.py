"""Claims input (docs/extraction.md): the `--claims` file, and the seam for extraction from the terminal node.

File format: a JSON array whose items are strings or objects
``{"id": "c1", "text": "...", "sentence_indices": [0]}`` (`id` and `sentence_indices` optional), or an
object ``{"claims": [...]}`` holding such an array (what `veritrail extract` writes). Items given as
strings, or objects without an id (or with ``"id": null``), get ids ``c1``, ``c2``… by position; an
id is a non-empty string or an integer (used as its decimal string). The file is read under the
input rules of `veritrail.textio` (UTF-8 with an optional BOM, strict JSON, bounded nesting).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from ..errors import InputProblem
from ..records import Claim
from ..textio import InputError, read_input_json


class ClaimsFileError(InputProblem, ValueError):
    """The claims file is unreadable or malformed; the message says where."""


class ClaimSource(Protocol):
    """Where claims come from when none are given: extraction from the terminal node's text."""

    async def claims_for(self, terminal_text: str) -> list[Claim]:
        """Return the claims to verify for this final output."""
        ...


def parse_claims(doc: Any, *, origin: str = "claims") -> list[Claim]:
    """Validate a decoded claims document and return the claims."""
    items = doc.get("claims") if isinstance(doc, dict) else doc
    if not isinstance(items, list):
        raise ClaimsFileError(f'{origin}: expected a JSON array of claims (or {{"claims": [...]}})')
    out: list[Claim] = []
    problems: list[str] = []
    for pos, item in enumerate(items):
        if isinstance(item, str):
            cid, text, sents = f"c{pos + 1}", item, ()
        elif isinstance(item, dict) and isinstance(item.get("text"), str):
            raw_id = item.get("id")
            if raw_id is None:
                cid = f"c{pos + 1}"
            elif isinstance(raw_id, str) and raw_id.strip():
                cid = raw_id
            elif type(raw_id) is int:  # not bool
                cid = str(raw_id)
            else:
                problems.append(f"item {pos}: id must be a non-empty string or an integer")
                continue
            text = item["text"]
            si = item.get("sentence_indices", [])
            if not isinstance(si, list) or not all(type(i) is int and i >= 0 for i in si):
                problems.append(f"item {pos}: sentence_indices must be a list of non-negative ints")
                continue
            sents = tuple(si)
        else:
            problems.append(f'item {pos}: expected a string or an object with a string "text"')
            continue
        if not text.strip():
            problems.append(f"item {pos} ({cid}): empty claim text")
            continue
        out.append(Claim(cid, text.strip(), sents))
    seen: set[str] = set()
    dups = sorted({c.id for c in out if c.id in seen or seen.add(c.id)})  # type: ignore[func-returns-value]
    if dups:
        shown = ", ".join(dups[:20]) + (f", … (+{len(dups) - 20})" if len(dups) > 20 else "")
        problems.append("duplicate claim ids: " + shown)
    if problems:
        more = f"; … (+{len(problems) - 10} more)" if len(problems) > 10 else ""
        raise ClaimsFileError(f"{origin}: " + "; ".join(problems[:10]) + more)
    return out


def load_claims(path: str | Path) -> list[Claim]:
    """Read and validate a claims file (`ClaimsFileError` names the file and what is wrong)."""
    try:
        doc = read_input_json(path, "claims file")
    except InputError as exc:
        raise ClaimsFileError(str(exc)) from None
    return parse_claims(doc, origin=f"claims file {path}")


def claim_to_json(claim: Claim, *, omit_empty_indices: bool = False) -> dict[str, Any]:
    """A claim as JSON, ``{"id", "text", "sentence_indices"}``: the one place that writes it.

    The report, the run directory and the API write `sentence_indices` always (the report
    schema requires it); the claims file leaves it out when empty (`omit_empty_indices`), as
    it is optional there. Callers add their own fields after these (a report's verdict, a
    dataset's label).
    """
    doc: dict[str, Any] = {"id": claim.id, "text": claim.text}
    if claim.sentence_indices or not omit_empty_indices:
        doc["sentence_indices"] = list(claim.sentence_indices)
    return doc


def claim_from_json(doc: Mapping[str, Any]) -> Claim:
    """Inverse of `claim_to_json`, for JSON this package wrote (a claims file a person wrote goes
    through `parse_claims`, which checks every field)."""
    return Claim(doc["id"], doc["text"], tuple(doc.get("sentence_indices", ())))


def claims_to_json(claims: Sequence[Claim]) -> list[dict[str, Any]]:
    """The claims-file representation of `claims` (what `veritrail extract` writes)."""
    return [claim_to_json(c, omit_empty_indices=True) for c in claims]
