"""On-disk cache of analyses (relevance rows + fragments), so training never recomputes attribution.

One ``.npz`` file per (cache version, model, method, target cap, example) under a directory; the
key is a SHA-256 over a canonical JSON of those fields (the example's full text included, so any
change to the context, query or response is a miss). Files are written atomically (temporary
file + rename), so an interrupted run leaves no half-written entry.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from .analysis import PROMPT_VERSION, Analysis, Example
from .attribution import Method
from .fragments import Fragment, FragmentKind, TokenizedFragment, Unit, UnitKind

CACHE_VERSION = 1


def cache_key(
    model: str, method: Method, example: Example, max_targets_per_fragment: int | None
) -> str:
    """Stable key of one analysis."""
    payload = {
        "cache": CACHE_VERSION,
        "prompt": PROMPT_VERSION,
        "model": model,
        "method": method.value,
        "max_targets": max_targets_per_fragment,
        "context": example.context,
        "query": example.query,
        "response": example.response,
    }
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _node_to_dict(n: TokenizedFragment) -> dict[str, Any]:
    f = n.fragment
    return {
        "kind": f.kind.value,
        "start": f.start,
        "end": f.end,
        "text": f.text,
        "units": [[u.start, u.end, u.text, u.kind.value] for u in f.units],
        "tokens": list(n.tokens),
        "unit_tokens": [list(u) for u in n.units],
    }


def _node_from_dict(d: dict[str, Any]) -> TokenizedFragment:
    frag = Fragment(
        kind=FragmentKind(d["kind"]),
        start=int(d["start"]),
        end=int(d["end"]),
        text=str(d["text"]),
        units=tuple(Unit(int(a), int(b), str(t), UnitKind(k)) for a, b, t, k in d["units"]),
    )
    return TokenizedFragment(
        fragment=frag,
        tokens=tuple(int(t) for t in d["tokens"]),
        units=tuple(tuple(int(t) for t in u) for u in d["unit_tokens"]),
    )


def save_analysis(analysis: Analysis, path: Path) -> None:
    """Write one analysis to ``path`` (.npz) atomically."""
    meta = {
        "model": analysis.model,
        "method": analysis.method.value,
        "nodes": [_node_to_dict(n) for n in analysis.nodes],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".npz.tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            np.savez_compressed(
                fh,
                meta=np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8),
                input_ids=np.asarray(analysis.input_ids, dtype=np.int64),
                sections=analysis.sections,
                targets=np.asarray(analysis.targets, dtype=np.int64),
                rows=analysis.rows,
                scores=analysis.scores,
            )
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_analysis(path: Path) -> Analysis:
    """Read an analysis written by ``save_analysis``."""
    with np.load(path) as z:
        meta = json.loads(bytes(z["meta"]).decode("utf-8"))
        return Analysis(
            model=str(meta["model"]),
            method=Method(meta["method"]),
            input_ids=tuple(int(i) for i in z["input_ids"]),
            sections=z["sections"],
            nodes=tuple(_node_from_dict(d) for d in meta["nodes"]),
            targets=tuple(int(t) for t in z["targets"]),
            rows=z["rows"],
            scores=z["scores"],
        )


class AnalysisCache:
    """A directory of cached analyses; counts hits and misses for reporting."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.hits = 0
        self.misses = 0

    def path(self, model: str, method: Method, example: Example, max_targets: int | None) -> Path:
        """Where the analysis for these inputs lives (whether or not it exists)."""
        key = cache_key(model, method, example, max_targets)
        return self.root / key[:2] / f"{key}.npz"

    def get(
        self, model: str, method: Method, example: Example, max_targets: int | None
    ) -> Analysis | None:
        """The cached analysis, or None."""
        p = self.path(model, method, example, max_targets)
        if p.is_file():
            self.hits += 1
            return load_analysis(p)
        self.misses += 1
        return None

    def put(self, example: Example, max_targets: int | None, analysis: Analysis) -> None:
        """Store ``analysis`` for ``example``."""
        save_analysis(analysis, self.path(analysis.model, analysis.method, example, max_targets))
