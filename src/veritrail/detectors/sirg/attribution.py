"""Token-level relevance of every target token to the tokens before it (SIRG step 1).

Two methods, switchable:

* **AttnLRP** (Achtibat et al., ICML 2024) in its Gradient×Input form, written for the Llama
  and Qwen2 families of transformers 5.x. The rules are installed as modified gradients, so one
  ordinary backward pass yields LRP relevance (``input · modified gradient``):

  - RMSNorm: the normalisation denominator is treated as a constant (identity rule);
  - gated MLP: identity rule through the activation (gradient scaled by ``act(x)/x``) and the
    uniform rule at ``act(gate) * up`` (half the gradient to each factor);
  - attention: the uniform rule at both products, ``Q·Kᵀ`` and ``A·V`` (so query and key get a
    quarter, value half of the gradient); the softmax keeps its exact gradient, which is what
    AttnLRP's softmax rule amounts to in Gradient×Input form.

  The attention rule goes through transformers' public attention-registration API
  (``AttentionInterface.register``); norms and MLPs are patched per instance and restored on
  exit, so the model class is never modified and the logits are unchanged.

* **Input×Gradient**: the same pass with no rules.

The relevance seed is the target token's logit (gradient 1), so a row sums to roughly that logit
(LRP conservation, up to what biases absorb).

Cost: one forward pass over the whole sequence and one backward pass per target token; because
attention is causal, the row for target position ``t`` equals what a forward pass over the
prefix ``tokens[:t]`` alone would give (tested).

Licence note: LRP is subject to patents held by Fraunhofer; see docs/sirg.md. Input×Gradient
carries no such notice.
"""

from __future__ import annotations

import contextlib
import enum
import types
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch
from torch.autograd import Function

_ATTN_NAME = "veritrail_attnlrp"
_EPS = 1e-10


class Method(enum.Enum):
    """Attribution method."""

    ATTNLRP = "attnlrp"
    INPUT_X_GRADIENT = "ixg"


class _IdentityRule(Function):
    """Element-wise nonlinearity whose relevance passes through unchanged."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, fn: Any) -> torch.Tensor:
        out: torch.Tensor = fn(x)
        ctx.save_for_backward(out / (x + _EPS))
        return out

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor) -> tuple[torch.Tensor, None]:
        (ratio,) = ctx.saved_tensors
        return grads[0] * ratio, None


class _DivideGradient(Function):
    """Identity forward; the gradient is divided by ``factor`` (the uniform rule)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, factor: float) -> torch.Tensor:
        ctx.factor = factor
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor) -> tuple[torch.Tensor, None]:
        return grads[0] / ctx.factor, None


# Function.apply is untyped in torch's stubs; bind once as Any.
_identity_apply: Any = _IdentityRule.apply
_divide_apply: Any = _DivideGradient.apply


def _divide(x: torch.Tensor, factor: float) -> torch.Tensor:
    out: torch.Tensor = _divide_apply(x, factor)
    return out


def _rms_norm_forward(self: Any, hidden_states: torch.Tensor) -> torch.Tensor:
    dtype = hidden_states.dtype
    h = hidden_states.to(torch.float32)
    variance = h.pow(2).mean(-1, keepdim=True)
    h = h * torch.rsqrt(variance + self.variance_epsilon).detach()
    out: torch.Tensor = self.weight * h.to(dtype)
    return out


def _gated_mlp_forward(self: Any, x: torch.Tensor) -> torch.Tensor:
    gate: torch.Tensor = _identity_apply(self.gate_proj(x), self.act_fn)
    out: torch.Tensor = self.down_proj(_divide(gate * self.up_proj(x), 2.0))
    return out


def _make_attention(inner: Any) -> Any:
    def attention(module: Any, query: Any, key: Any, value: Any, *args: Any, **kwargs: Any) -> Any:
        # Uniform rule at Q·Kᵀ (½ each) after the uniform rule at A·V (½ to A): ¼ for Q and K.
        kwargs["dropout"] = 0.0
        return inner(
            module, _divide(query, 4.0), _divide(key, 4.0), _divide(value, 2.0), *args, **kwargs
        )

    return attention


def _register_attention() -> None:
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    if _ATTN_NAME in ALL_ATTENTION_FUNCTIONS:
        return
    AttentionInterface.register(_ATTN_NAME, _make_attention(ALL_ATTENTION_FUNCTIONS["sdpa"]))
    AttentionMaskInterface.register(_ATTN_NAME, ALL_MASK_ATTENTION_FUNCTIONS["sdpa"])


def _is_rms_norm(m: torch.nn.Module) -> bool:
    return type(m).__name__.endswith("RMSNorm") and hasattr(m, "variance_epsilon")


def _is_gated_mlp(m: torch.nn.Module) -> bool:
    return all(hasattr(m, a) for a in ("gate_proj", "up_proj", "down_proj", "act_fn"))


SUPPORTED_MODEL_TYPES = ("llama", "qwen2")


@contextlib.contextmanager
def attnlrp_rules(model: Any) -> Iterator[None]:
    """Install AttnLRP's rules on ``model`` for the duration of the block.

    Raises ValueError for architectures other than Llama and Qwen2 (other families have other
    norms, activations or attention code; their rules are not written here).
    """
    model_type = getattr(model.config, "model_type", "")
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise ValueError(
            f"AttnLRP rules are written for {SUPPORTED_MODEL_TYPES}, not {model_type!r}"
        )
    _register_attention()
    patched: list[torch.nn.Module] = []
    previous = model.config._attn_implementation
    try:
        for m in model.modules():
            if _is_rms_norm(m):
                setattr(m, "forward", types.MethodType(_rms_norm_forward, m))  # noqa: B010
                patched.append(m)
            elif _is_gated_mlp(m):
                setattr(m, "forward", types.MethodType(_gated_mlp_forward, m))  # noqa: B010
                patched.append(m)
        model.set_attn_implementation(_ATTN_NAME)
        yield
    finally:
        for m in patched:
            del m.forward
        model.set_attn_implementation(previous)


def _rules(model: Any, method: Method) -> contextlib.AbstractContextManager[None]:
    if method is Method.ATTNLRP:
        return attnlrp_rules(model)
    return contextlib.nullcontext()


def relevance_rows(
    model: Any,
    input_ids: Sequence[int],
    targets: Sequence[int],
    *,
    method: Method = Method.ATTNLRP,
    threads: int | None = None,
) -> np.ndarray:
    """Relevance of each earlier token for each target token, teacher-forced.

    Args:
        model: a Llama- or Qwen2-family causal LM from transformers (eval mode).
        input_ids: the whole sequence (prompt followed by the response).
        targets: positions ``t`` (``1 <= t < len(input_ids)``) whose token ``input_ids[t]`` is
            explained; its logit at position ``t - 1`` is the relevance seed.
        method: AttnLRP or Input×Gradient.
        threads: torch intra-op threads (None leaves the current setting).

    Returns:
        float32 array of shape ``(len(targets), len(input_ids))``; row ``i`` holds the relevance
        of positions ``0 .. t_i - 1`` and zeros from ``t_i`` on.
    """
    n = len(input_ids)
    for t in targets:
        if not 1 <= t < n:
            raise ValueError(f"target position {t} outside 1..{n - 1}")
    if threads is not None:
        torch.set_num_threads(max(1, int(threads)))
    rows = np.zeros((len(targets), n), dtype=np.float32)
    if not targets:
        return rows
    ids = torch.tensor([list(input_ids)], dtype=torch.long)
    head = model.get_output_embeddings()
    with _rules(model, method), torch.enable_grad():
        emb = model.get_input_embeddings()(ids).detach().requires_grad_(True)
        hidden = model.base_model(inputs_embeds=emb, use_cache=False).last_hidden_state[0]
        for i, t in enumerate(targets):
            tok = int(input_ids[t])
            # Only the target's logit is needed: project one row instead of the whole vocabulary.
            logit = hidden[t - 1] @ head.weight[tok]
            if getattr(head, "bias", None) is not None:
                logit = logit + head.bias[tok]
            (grad,) = torch.autograd.grad(logit, emb, retain_graph=i < len(targets) - 1)
            rows[i, :t] = (grad[0, :t] * emb[0, :t].detach()).sum(-1).float().numpy()
    return rows


def logits(model: Any, input_ids: Sequence[int], *, method: Method | None = None) -> torch.Tensor:
    """Full logits for ``input_ids`` (optionally with a method's rules installed): used to check
    that the rules change gradients only."""
    ids = torch.tensor([list(input_ids)], dtype=torch.long)
    ctx = _rules(model, method) if method is not None else contextlib.nullcontext()
    with ctx, torch.no_grad():
        out: torch.Tensor = model(input_ids=ids, use_cache=False).logits[0]
    return out
