"""Embedders for the RAG baseline: the hashing fallback, and the offline MiniLM (slow)."""

from __future__ import annotations

import numpy as np
import pytest

from veritrail.detectors.embeddings import HashingEmbedder, get_embedder, top_k


def test_hashing_embedder_is_unit_norm_deterministic_and_lexical() -> None:
    e = HashingEmbedder(dim=256)
    texts = ["Acme was founded in 1990.", "acme was FOUNDED in 1990", "Bananas are yellow.", ""]
    v = e.embed(texts)
    assert v.shape == (4, 256)
    assert np.allclose(np.linalg.norm(v[:3], axis=1), 1.0, atol=1e-5)
    assert not v[3].any()  # empty text: the zero vector, never NaN
    assert np.array_equal(v, e.embed(texts))
    assert float(v[0] @ v[1]) > 0.9 > float(v[0] @ v[2])
    assert "not semantic" in e.name


def test_top_k_orders_by_similarity_with_stable_ties() -> None:
    m = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.6, 0.8]], dtype=np.float32)
    q = np.array([1.0, 0.0], dtype=np.float32)
    assert top_k(q, m, 3) == [0, 2, 3]
    assert top_k(q, m, 10) == [0, 2, 3, 1]
    assert top_k(q, m[:0], 3) == [] and top_k(q, m, 0) == []


def test_unknown_embedder_name() -> None:
    with pytest.raises(ValueError, match="unknown embedder"):
        get_embedder("word2vec")


@pytest.mark.slow
def test_minilm_onnx_is_semantic_and_matches_the_float_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # everything comes from installed packages
    e = get_embedder("minilm-onnx")
    texts = [
        "A man is eating food.",
        "Someone is having a meal.",
        "The stock market fell sharply today.",
        "word " * 400,  # longer than the model's 256-token window: truncated, not an error
    ]
    v = e.embed(texts)
    assert v.shape == (4, 384)
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-4)
    assert float(v[0] @ v[1]) > 0.5 > 0.2 > float(v[0] @ v[2])

    # The int8 ONNX export against the float weights of the same model (mean pooling, normalised).
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from veritrail.detectors.embeddings import _minilm_dir

    path = str(_minilm_dir())
    tok = transformers.AutoTokenizer.from_pretrained(path)
    model = transformers.AutoModel.from_pretrained(path)
    torch.set_num_threads(1)
    enc = tok(texts[:3], padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**enc).last_hidden_state
    mask = enc["attention_mask"].unsqueeze(-1).float()
    ref = (hidden * mask).sum(1) / mask.sum(1)
    ref = torch.nn.functional.normalize(ref, dim=1).numpy()
    cos = (ref * v[:3]).sum(axis=1)
    assert (cos > 0.98).all(), cos
