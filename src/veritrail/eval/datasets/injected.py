"""Injected hallucinations as a dataset: ``veritrail eval injected:DIR`` (docs/inject.md).

DIR is what `veritrail inject` wrote (its manifest ``injected.json``) or a folder of such
directories (each sub-folder holding a manifest, as the shipped benchmark does). Items:

* one per variant: the variant's DAG, its injected claim (gold Not Fully Supported; the claim's
  meta names the kind, the gold stage and node) and its untouched claims;
* one ``clean`` item per manifest: the clean DAG with every clean claim some variant left
  untouched, so each method's verdict on the clean DAG is computed once, by the same run.

A variant of a citation kind (``wrong-citation``, ``dropped-citation``) changed only the final
output's markers: its injected claim is gold Fully Supported with a gold citation status
(meta ``citation``). When the manifest says the final output carries markers (``"citations"``),
every claim's meta names its DAG file (``dag``) so that `eval.injected` can check citations on
it as ``--citations auto`` does.

An untouched claim has no gold verdict of its own: its label here is a placeholder (Fully
Supported) that `eval.injected` never reads; it compares the method's verdict with the same
method's verdict on the clean item's claim named in the meta (``clean``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ...inject.build import FORMAT_NAME, FORMAT_VERSION, MANIFEST
from ...records import GoldClaim, Verdict, claim_key
from .format import DatasetError, EvalDataset, EvalItem

INJECTED_SOURCE = "injected"
"""`EvalDataset.meta["source"]` of an injected dataset."""

ROLE = "role"
"""`GoldClaim.meta` key: ``injected``, ``untouched`` or ``clean``."""

CITED_DAG = "cited_dag"
"""`GoldClaim.meta` key: the DAG file of a claim whose final output carries citation markers."""

SOURCE = "dag"
"""`GoldClaim.meta` key: which injected DAG the claim belongs to (the sub-folder, or the
source DAG's name for a single injection directory)."""


def is_injected(spec: str) -> bool:
    """Whether a dataset argument names an injection directory (``injected:DIR``)."""
    return spec.startswith("injected:")


def _manifests(base: Path) -> list[Path]:
    if (base / MANIFEST).is_file():
        return [base / MANIFEST]
    return sorted(p for p in base.glob(f"*/{MANIFEST}") if p.is_file())


def _read(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DatasetError(f"{path}: unreadable manifest ({exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT_NAME:
        raise DatasetError(f"{path}: not a {FORMAT_NAME} manifest")
    if doc.get("version") != FORMAT_VERSION:
        raise DatasetError(
            f"{path}: {FORMAT_NAME} version {doc.get('version')!r} (this veritrail reads "
            f"{FORMAT_VERSION})"
        )
    return doc


def _claims(path: Path) -> dict[str, str]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        return {str(c["id"]): str(c["text"]) for c in doc["claims"]}
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as exc:
        raise DatasetError(f"{path}: unreadable claims file ({exc})") from None


def _extra(name: str, cited_dag: Path | None) -> dict[str, Any]:
    """The meta every claim of one DAG carries: its DAG's name, and the DAG file when its final
    output carries citation markers."""
    out: dict[str, Any] = {SOURCE: name}
    if cited_dag is not None:
        out[CITED_DAG] = str(cited_dag.resolve())
    return out


def injected_dataset(path: str | Path) -> EvalDataset:
    """The variants and clean DAGs of an injection directory (or a folder of them)."""
    base = Path(path)
    if not base.is_dir():
        raise DatasetError(f"injected:{base}: not a directory written by `veritrail inject`")
    manifests = _manifests(base)
    if not manifests:
        raise DatasetError(f"injected:{base}: no {MANIFEST} there or in its sub-folders")
    items: list[EvalItem] = []
    for mpath in manifests:
        doc = _read(mpath)
        root = mpath.parent
        prefix = "" if root == base else root.relative_to(base).as_posix() + "/"
        clean_id = f"{prefix}clean"
        clean_text = _claims(root / doc["clean"]["claims"])
        cited = bool(doc.get("citations"))
        name = prefix.rstrip("/") or str(doc["source"].get("name") or base.name)

        needed: dict[str, None] = {}
        variant_items: list[EvalItem] = []
        try:
            for v in doc["variants"]:
                texts = _claims(root / v["claims"])
                vid = f"{prefix}{v['id']}"
                citation = v.get("citation")
                injected = GoldClaim(
                    "injected",
                    texts["injected"],
                    # A citation kind's claim is true: only its marker changed.
                    Verdict.FULLY_SUPPORTED if citation else Verdict.NOT_FULLY_SUPPORTED,
                    meta={
                        ROLE: "injected",
                        "kind": v["kind"],
                        "stage": int(v["stage"]),
                        "node": v["node"],
                        **({"citation": str(citation)} if citation else {}),
                        **_extra(name, root / v["dag"] if cited else None),
                    },
                )
                untouched = []
                for cid in v["untouched"]:
                    needed[cid] = None
                    untouched.append(
                        GoldClaim(
                            cid,
                            texts[cid],
                            Verdict.FULLY_SUPPORTED,  # placeholder: see the module docstring
                            meta={
                                ROLE: "untouched",
                                "clean": claim_key(clean_id, cid),
                                **_extra(name, root / v["dag"] if cited else None),
                            },
                        )
                    )
                variant_items.append(
                    EvalItem(
                        vid,
                        (injected, *untouched),
                        dag_paths=(str((root / v["dag"]).resolve()),),
                        meta={"variant": v["id"], "source": doc["source"].get("name")},
                    )
                )
        except (KeyError, TypeError, ValueError) as exc:
            raise DatasetError(f"{mpath}: malformed variant entry ({exc!r})") from None
        if needed:
            missing = [c for c in needed if c not in clean_text]
            if missing:
                raise DatasetError(f"{mpath}: clean claims {missing[:5]} missing from clean/")
            items.append(
                EvalItem(
                    clean_id,
                    tuple(
                        GoldClaim(
                            c,
                            clean_text[c],
                            Verdict.FULLY_SUPPORTED,
                            meta={
                                ROLE: "clean",
                                **_extra(name, root / doc["clean"]["dag"] if cited else None),
                            },
                        )
                        for c in needed
                    ),
                    dag_paths=(str((root / doc["clean"]["dag"]).resolve()),),
                    meta={"clean": True, "source": doc["source"].get("name")},
                )
            )
        items.extend(variant_items)
    return EvalDataset(
        f"injected-{base.resolve().name}",
        items,
        {"source": INJECTED_SOURCE, "manifests": len(manifests)},
    )


__all__ = ["CITED_DAG", "INJECTED_SOURCE", "ROLE", "SOURCE", "injected_dataset", "is_injected"]
