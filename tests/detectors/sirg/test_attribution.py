"""AttnLRP and Input×Gradient on tiny random Llama and Qwen2 models."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from veritrail.detectors.sirg.attribution import Method, attnlrp_rules, logits, relevance_rows
from veritrail.detectors.sirg.models import LoadedLM

FIXTURES = Path(__file__).parents[2] / "fixtures" / "sirg"
SENTENCE = "Alice met Bob in Paris on Monday and they signed the contract."


def _ids(lm: LoadedLM) -> list[int]:
    ids: list[int] = lm.tokenizer(SENTENCE)["input_ids"]
    return ids


def test_rules_leave_logits_unchanged(tiny_lm: LoadedLM) -> None:
    ids = _ids(tiny_lm)
    plain = logits(tiny_lm.model, ids)
    patched = logits(tiny_lm.model, ids, method=Method.ATTNLRP)
    after = logits(tiny_lm.model, ids)
    assert torch.equal(plain, patched)
    assert torch.equal(plain, after)  # the patch is removed on exit


def test_rules_are_removed_on_error(tiny_lm: LoadedLM) -> None:
    model = tiny_lm.model
    impl = model.config._attn_implementation
    with pytest.raises(RuntimeError), attnlrp_rules(model):
        assert model.config._attn_implementation != impl
        raise RuntimeError("boom")
    assert model.config._attn_implementation == impl
    assert not any("forward" in vars(m) for m in model.modules())


@pytest.mark.parametrize("method", list(Method))
def test_full_pass_rows_equal_prefix_recomputation(tiny_lm: LoadedLM, method: Method) -> None:
    ids = _ids(tiny_lm)
    targets = list(range(1, len(ids)))
    full = relevance_rows(tiny_lm.model, ids, targets, method=method)
    for i, t in enumerate(targets):
        prefix = relevance_rows(tiny_lm.model, ids[: t + 1], [t], method=method)[0]
        scale = float(np.abs(full[i]).max()) + 1e-12
        assert np.abs(prefix[:t] - full[i, :t]).max() / scale < 1e-4, (method, t)
        assert not full[i, t:].any()  # nothing at or after the target


def test_methods_differ_and_rows_are_finite(tiny_lm: LoadedLM) -> None:
    ids = _ids(tiny_lm)
    lrp = relevance_rows(tiny_lm.model, ids, [len(ids) - 1])
    ixg = relevance_rows(tiny_lm.model, ids, [len(ids) - 1], method=Method.INPUT_X_GRADIENT)
    assert np.isfinite(lrp).all() and np.isfinite(ixg).all()
    assert np.abs(lrp - ixg).max() > 1e-3


def test_target_positions_are_checked(tiny_lm: LoadedLM) -> None:
    ids = _ids(tiny_lm)
    with pytest.raises(ValueError, match="outside"):
        relevance_rows(tiny_lm.model, ids, [0])
    assert relevance_rows(tiny_lm.model, ids, []).shape == (0, len(ids))


def _fixture_model(arch: str) -> Any:
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config

    cfg = json.loads((FIXTURES / f"tiny_{arch}.config.json").read_text())
    cfg.pop("arch")
    config = (LlamaConfig if arch == "llama" else Qwen2Config)(**cfg)
    model = AutoModelForCausalLM.from_config(config).eval()
    model.load_state_dict(load_file(str(FIXTURES / f"tiny_{arch}.safetensors")))
    return model


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_matches_lxt_golden_vectors(arch: str) -> None:
    """Golden rows from lxt 2.1 on transformers 4.52.4 (tests/fixtures/sirg/make_golden.py)."""
    golden = json.loads((FIXTURES / "golden_lxt.json").read_text())
    model = _fixture_model(arch)
    ids, targets = golden["input_ids"], golden["targets"]
    ours = relevance_rows(model, ids, targets)
    ixg = relevance_rows(model, ids, targets, method=Method.INPUT_X_GRADIENT)
    for i, t in enumerate(targets):
        ref = np.asarray(golden[arch]["rows"][i], dtype=np.float64)
        np.testing.assert_allclose(ours[i, :t], ref, atol=1e-5, rtol=1e-4)
        # The golden data discriminates: plain Input×Gradient does not match it.
        assert np.abs(ixg[i, :t] - ref).max() > 1e-2
