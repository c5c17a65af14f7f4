"""NLI checkers over a local Hugging Face sequence-classification model (docs/plugins.md).

Any model directory that `transformers.AutoModelForSequenceClassification` and `AutoTokenizer`
load offline (``config.json``, weights, tokenizer files) works: an MNLI model (DeBERTa, RoBERTa,
BART), MiniCheck's RoBERTa/DeBERTa checkpoints, or any binary "supported?" classifier. Nothing is
downloaded: loading uses ``local_files_only=True``.

* `NLIModel` — loads the directory, reads the label mapping from its config, and scores
  (premise, hypothesis) pairs in batches on the CPU: P(supported) per pair.
* `NLIJudge` — a `steps.VerdictGenerator` (``veritrail verify --judge nli:PATH``): premise = the
  verdict evidence (root texts and evidence summaries), hypothesis = the claim. Evidence longer
  than the model's window is cut into chunks at sentence boundaries and the claim is supported
  when one chunk entails it (max over chunks, as AlignScore and MiniCheck do).
* `nli_chunk_scores` — the same max-over-chunks score for the eval baseline;
* `NLIChunkDetector` — that baseline as a `Detector` (``veritrail eval --method
  nli:model=PATH,chunk=350``; AlignScore / MiniCheck style, no LM): every root node cut into
  chunks of about ``chunk`` estimated tokens at sentence boundaries, each chunk scored against the
  claim, P(supported) = the maximum over chunks, Fully Supported at or above ``threshold``
  (options ``model=PATH`` required, ``chunk=350``, ``threshold=0.5``, ``batch=8``). Its evidence is
  the sentences of the best chunk; it makes no LM calls.

Label mapping (`label_roles`), read from ``config.id2label`` in any case: a label containing
"entail" is entailment, "contradict" contradiction, "neutral" neutral; binary labels such as
``supported``/``unsupported``, ``consistent``/``inconsistent``, ``factual``/``hallucinated``
are read the same way (negatives first, so "unsupported" is not "supported"). A two-label model
with generic names (``LABEL_0``/``LABEL_1``, as MiniCheck ships) takes index 1 as supported; a
one-output model (HHEM-style regression head) is read as sigmoid(logit) = P(supported). Anything
else is refused with a message, never guessed.

Verdicts: P(supported) >= threshold gives Fully Supported, otherwise Not Fully Supported.
Inconclusive is never produced: an NLI model has no "cannot tell" output distinct from neutral,
and neutral means the evidence does not entail the claim (Not Fully Supported).
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..dag import Dag, PerDag
from ..errors import InputProblem
from ..method.segment import SentenceIndex, split_sentences
from ..method.steps import VerdictInput, VerdictOutcome
from ..method.tokens import estimate_tokens
from ..records import Claim, GoldClaim, SentenceKey, Verdict
from .base import Detection, error_text, root_ids

DEFAULT_CHUNK_TOKENS = 350
DEFAULT_THRESHOLD = 0.5
DEFAULT_BATCH = 8

_NEGATIVE = (
    "unsupported",
    "not_supported",
    "not supported",
    "inconsistent",
    "hallucinat",
    "unfaithful",
    "not_entail",
    "non_entail",
    "not entail",
    "refute",
    "false",
)
_POSITIVE = ("support", "consistent", "factual", "faithful", "true", "yes")


@contextmanager
def _no_progress_bars() -> Iterator[None]:
    from transformers.utils import logging

    hf: Any = logging  # untyped module
    was_on = hf.is_progress_bar_enabled()
    hf.disable_progress_bar()
    try:
        yield
    finally:
        if was_on:
            hf.enable_progress_bar()


class NLIModelError(InputProblem, ValueError):
    """The model directory cannot be used (missing, unreadable, or labels that cannot be read)."""


@dataclass(frozen=True, slots=True)
class LabelRoles:
    """Which output indices mean what: P(supported) = sum of `supported` probabilities."""

    supported: tuple[int, ...]
    contradiction: tuple[int, ...] = ()
    regression: bool = False
    """One output read as sigmoid(logit) = P(supported)."""


def label_roles(id2label: dict[int, str], num_labels: int) -> LabelRoles:
    """The roles of a classifier's outputs, from its ``id2label`` (see the module docstring)."""
    if num_labels == 1:
        return LabelRoles(supported=(0,), regression=True)
    names = {i: str(id2label.get(i, f"LABEL_{i}")).strip().lower() for i in range(num_labels)}
    supported: list[int] = []
    contradiction: list[int] = []
    for i, n in names.items():
        if "contradict" in n:
            contradiction.append(i)
        elif any(neg in n for neg in _NEGATIVE):
            continue  # "unsupported", "not_entailment": checked before the positives they contain
        elif "entail" in n or any(pos in n for pos in _POSITIVE):
            supported.append(i)
    if supported:
        return LabelRoles(tuple(supported), tuple(contradiction))
    if num_labels == 2 and all(n in (f"label_{i}", str(i)) for i, n in names.items()):
        return LabelRoles(supported=(1,))  # MiniCheck / HHEM convention: 1 = supported
    raise NLIModelError(
        f"cannot tell which label means 'entailed/supported' from id2label {dict(names)}; "
        "edit config.json so one label name contains 'entailment' or 'supported'"
    )


class NLIModel:
    """A local sequence-classification model scoring (premise, hypothesis) pairs on the CPU.

    Thread-safe: calls are serialised (one forward pass at a time uses the CPU fully).
    """

    def __init__(self, path: str | Path, *, batch_size: int = DEFAULT_BATCH) -> None:
        self.path = Path(path).expanduser()
        if not (self.path / "config.json").is_file():
            raise NLIModelError(f"{self.path}: not a Hugging Face model directory (no config.json)")
        try:
            from transformers import AutoModelForSequenceClassification, AutoTokenizer
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise NLIModelError(
                "the NLI judge needs torch and transformers: pip install 'veritrail[sirg]'"
            ) from exc
        try:
            auto_tok: Any = AutoTokenizer
            auto_model: Any = AutoModelForSequenceClassification
            with _no_progress_bars():  # no loading bars in the run's terminal output
                self.tokenizer = auto_tok.from_pretrained(self.path, local_files_only=True)
                self.model = auto_model.from_pretrained(self.path, local_files_only=True)
        except (OSError, ValueError, KeyError) as exc:
            raise NLIModelError(f"{self.path}: cannot load the model: {exc}") from exc
        self.model.eval()
        cfg = self.model.config
        self.roles = label_roles(dict(cfg.id2label or {}), int(cfg.num_labels))
        limits = [
            int(v)
            for v in (
                getattr(self.tokenizer, "model_max_length", None),
                getattr(cfg, "max_position_embeddings", None),
            )
            if isinstance(v, int) and 0 < v < 100_000
        ]
        self.max_length = min([512, *limits])
        self.batch_size = max(1, batch_size)
        self._lock = threading.Lock()

    @property
    def fingerprint(self) -> str:
        """`model_fingerprint` of the model directory."""
        return model_fingerprint(self.path)

    def score(self, pairs: Sequence[tuple[str, str]]) -> list[tuple[float, float]]:
        """(P(supported), P(contradiction)) per (premise, hypothesis) pair, in batches."""
        import torch

        out: list[tuple[float, float]] = []
        with self._lock, torch.no_grad():
            for start in range(0, len(pairs), self.batch_size):
                batch = pairs[start : start + self.batch_size]
                enc = self.tokenizer(
                    [p for p, _ in batch],
                    [h for _, h in batch],
                    truncation="only_first",  # the premise gives way, never the claim
                    max_length=self.max_length,
                    padding=True,
                    return_tensors="pt",
                )
                logits = self.model(**enc).logits.float()
                if self.roles.regression:
                    probs = torch.sigmoid(logits[:, :1])
                else:
                    probs = torch.softmax(logits, dim=-1)
                for row in probs.tolist():
                    sup = sum(row[i] for i in self.roles.supported)
                    con = sum(row[i] for i in self.roles.contradiction)
                    out.append((float(sup), float(con)))
        return out


def model_fingerprint(path: str | Path) -> str:
    """Identifies a model directory for run fingerprints without loading it: the config, and
    for each weight or tokenizer file its size and three 1 MiB samples (start, middle, end) —
    different weights differ everywhere, and hashing gigabytes on every run would not be cheap."""
    root = Path(path).expanduser()
    h = hashlib.sha256((root / "config.json").read_bytes())
    sample = 1 << 20
    for f in sorted(root.iterdir()):
        if f.suffix not in (".safetensors", ".bin", ".pt", ".json", ".model", ".txt"):
            continue
        size = f.stat().st_size
        h.update(f"{f.name}:{size}".encode())
        with f.open("rb") as fh:
            for at in (0, max(0, size // 2 - sample // 2), max(0, size - sample)):
                fh.seek(at)
                h.update(fh.read(sample))
    return h.hexdigest()[:16]


def chunk_sentences(sentences: Sequence[str], chunk_tokens: int) -> list[list[int]]:
    """Consecutive groups of sentence indices of at most `chunk_tokens` estimated tokens each
    (a longer single sentence is a chunk of its own; the tokenizer then truncates it)."""
    if chunk_tokens < 1:
        raise ValueError("chunk size must be >= 1 token")
    chunks: list[list[int]] = []
    cur: list[int] = []
    used = 0
    for i, s in enumerate(sentences):
        t = estimate_tokens(s) + 1
        if cur and used + t > chunk_tokens:
            chunks.append(cur)
            cur, used = [], 0
        cur.append(i)
        used += t
    if cur:
        chunks.append(cur)
    return chunks


def nli_chunk_scores(
    model: NLIModel, chunks: Sequence[str], claim: str
) -> list[tuple[float, float]]:
    """Score every chunk against the claim (premise = chunk, hypothesis = claim)."""
    return model.score([(c, claim) for c in chunks]) if chunks else []


class NLIJudge:
    """A `steps.VerdictGenerator` backed by an NLI model (``--judge nli:PATH``).

    The evidence items are segmented and packed into chunks of `chunk_tokens`; the claim is
    Fully Supported when the best chunk's P(supported) reaches `threshold`. Sub-claims are not
    used (the whole claim is the hypothesis). Inference runs in a worker thread so the run's
    other claims keep going.
    """

    def __init__(
        self,
        model: NLIModel,
        *,
        threshold: float = DEFAULT_THRESHOLD,
        chunk_tokens: int = DEFAULT_CHUNK_TOKENS,
    ) -> None:
        self.model = model
        self.threshold = threshold
        self.chunk_tokens = chunk_tokens

    @classmethod
    def from_path(cls, path: str | Path, **kw: Any) -> NLIJudge:
        """Load the model directory at `path`."""
        return cls(NLIModel(path), **kw)

    def chunks(self, evidence: Sequence[VerdictInput]) -> list[str]:
        """The premise chunks for `evidence` (chunks never span two evidence items)."""
        out: list[str] = []
        for item in evidence:
            sents = split_sentences(item.text) or [item.text.strip()]
            for group in chunk_sentences(sents, self.chunk_tokens):
                out.append(" ".join(sents[i] for i in group))
        return [c for c in out if c]

    async def judge(
        self,
        claim: Claim,
        subclaims: Sequence[str],
        evidence: Sequence[VerdictInput],
        *,
        sample: int = 0,
    ) -> VerdictOutcome:
        """Max P(supported) over the evidence chunks against the threshold."""
        chunks = self.chunks(evidence)
        if not chunks:
            return VerdictOutcome(Verdict.NOT_FULLY_SUPPORTED, "NLI: no evidence text")
        scores = await asyncio.to_thread(nli_chunk_scores, self.model, chunks, claim.text)
        best = max(range(len(scores)), key=lambda i: scores[i][0])
        sup, con = scores[best]
        verdict = Verdict.FULLY_SUPPORTED if sup >= self.threshold else Verdict.NOT_FULLY_SUPPORTED
        reasoning = (
            f"NLI ({self.model.path.name}): P(supported) {sup:.3f} on evidence chunk {best + 1} "
            f"of {len(chunks)} (threshold {self.threshold:g}); P(contradiction) {con:.3f}."
        )
        return VerdictOutcome(verdict, reasoning)


# --- the NLI chunk baseline as a detector ------------------------------------------------------


class NLIChunkDetector:
    """The NLI chunk baseline (see the module docstring): max P(supported) over root chunks."""

    kind = "nli"

    def __init__(
        self, name: str, model: Any, *, chunk_tokens: int = 350, threshold: float = 0.5
    ) -> None:
        self.name = name
        self.model = model  # an `NLIModel`
        self.chunk_tokens = chunk_tokens
        self.threshold = threshold
        # Chunks per DAG (several items may share one DAG file).
        self._chunk_cache: PerDag[tuple[list[tuple[str, list[int]]], list[str]]] = PerDag()

    def _chunks(
        self, dag: Dag, sentences: SentenceIndex
    ) -> tuple[list[tuple[str, list[int]]], list[str]]:
        def chunk(d: Dag) -> tuple[list[tuple[str, list[int]]], list[str]]:
            keys: list[tuple[str, list[int]]] = []
            texts: list[str] = []
            for nid in root_ids(d):
                sents = sentences.sentences(nid)
                for group in chunk_sentences(sents, self.chunk_tokens):
                    keys.append((nid, group))
                    texts.append(" ".join(sents[i] for i in group))
            return keys, texts

        return self._chunk_cache.get(dag, chunk)

    async def detect(
        self,
        dag: Dag,
        claims: Sequence[Claim],
        *,
        sentences: SentenceIndex | None = None,
        gold: Mapping[str, GoldClaim] | None = None,
    ) -> list[Detection]:
        """Score every claim against every root chunk, one claim at a time."""
        keys, texts = self._chunks(dag, sentences if sentences is not None else SentenceIndex(dag))
        n_roots = len(root_ids(dag))
        out: list[Detection] = []
        for c in claims:  # one claim at a time: the model is serialised anyway
            verdict: Verdict | None = None
            score: float | None = None
            evidence: frozenset[SentenceKey] = frozenset()
            error: str | None = None
            native: Any = None
            detail: dict[str, Any] = {"chunks": len(texts)}
            if not texts:
                verdict, score = Verdict.NOT_FULLY_SUPPORTED, 0.0
            else:
                try:
                    scores = await asyncio.to_thread(nli_chunk_scores, self.model, texts, c.text)
                    best = max(range(len(scores)), key=lambda i: scores[i][0])
                    score = scores[best][0]
                    verdict = (
                        Verdict.FULLY_SUPPORTED
                        if score >= self.threshold
                        else Verdict.NOT_FULLY_SUPPORTED
                    )
                    nid, group = keys[best]
                    evidence = frozenset((nid, i) for i in group)
                    detail["best_chunk"] = {"node": nid, "sentences": group}
                    native = scores
                except Exception as exc:  # noqa: BLE001 - one claim's failure is recorded
                    error, native = error_text(exc), exc
            out.append(
                Detection(
                    method=self.name,
                    claim_id=c.id,
                    verdict=verdict,
                    score=score,
                    evidence=evidence if error is None else None,
                    nodes_read=n_roots,
                    nodes_total=len(dag),
                    error=error,
                    detail=detail,
                    native=native,
                )
            )
        return out


# --- a tiny random model for tests and examples -------------------------------------------------

_TINY_TEXT = (
    "the council met on monday and approved the budget . the river flooded the village in march "
    ". nobody was hurt but the bridge was destroyed . alice signed the contract in paris . "
    "it rained all week and the roads were closed . the report says revenue grew by ten percent ."
)


def build_tiny_nli_model(
    path: str | Path,
    id2label: dict[int, str] | None = None,
    *,
    favour: int | None = None,
    seed: int = 0,
) -> Path:
    """Save a randomly initialised tiny BERT classifier and a word-level tokenizer trained
    in-process to `path` (no download; ~0.1 s). For tests and examples only: its outputs are
    noise, unless `favour` names an output index whose bias is set so high that it always wins
    (a deterministic model for checking label mapping end to end)."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers
    from transformers import BertConfig, BertForSequenceClassification, PreTrainedTokenizerFast

    labels = id2label or {0: "entailment", 1: "neutral", 2: "contradiction"}
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
    tok.train_from_iterator([_TINY_TEXT], trainers.WordLevelTrainer(special_tokens=specials))
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", 2), ("[SEP]", 3)],
    )
    fast: Any = PreTrainedTokenizerFast
    tokenizer = fast(
        tokenizer_object=tok,
        pad_token="[PAD]",
        unk_token="[UNK]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        model_max_length=128,
    )
    tokenizer.save_pretrained(out)
    bert_config: Any = BertConfig  # its **kwargs (num_labels, id2label) are not in the stubs
    cfg = bert_config(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
        num_labels=len(labels),
        id2label={int(k): v for k, v in labels.items()},
        label2id={v: int(k) for k, v in labels.items()},
    )
    torch.manual_seed(seed)
    bert: Any = BertForSequenceClassification
    model = bert(cfg)
    if favour is not None:
        with torch.no_grad():
            model.classifier.weight.zero_()
            model.classifier.bias.zero_()
            model.classifier.bias[favour] = 12.0
    with _no_progress_bars():
        model.save_pretrained(out)
    return out


# -- `--judge nli:PATH`: the built-in judge step, loaded by name by `run.plugins` --------------

_LOADED: dict[tuple[str, str], NLIModel] = {}
"""NLI models loaded by this process, by (directory, `model_fingerprint`): a batch builds its
steps once per job (and per Ray shard), which must not mean loading the weights each time. An
`NLIModel` is thread-safe and holds no state of a run."""


def _loaded_model(model_dir: str) -> tuple[NLIModel, str]:
    """The loaded model of `model_dir` (loaded once per process and model content) and its
    digest. `NLIModelError` (a ValueError) with the reason when it cannot be loaded."""
    path = Path(model_dir).expanduser().resolve()
    try:
        digest = model_fingerprint(path)
    except OSError:
        digest = ""  # no model there: NLIModel below says why
    nli = _LOADED.get((str(path), digest)) if digest else None
    if nli is None:
        nli = NLIModel(model_dir)
        digest = digest or nli.fingerprint
        _LOADED[(str(path), digest)] = nli
    return nli, digest


STEP_KIND = "judge"
"""The step kind `nli:PATH` names (`run.plugins.PREFIXED_STEPS`)."""


def load_prefixed_step(arg: str) -> tuple[NLIJudge, str, str, dict[str, str]]:
    """The judge of ``nli:ARG`` (ARG: a model directory), as `run.plugins` loads a prefixed
    step: (step, what it resolved to, digest of the model, extra identity fields)."""
    nli, digest = _loaded_model(arg)
    return NLIJudge(nli), f"nli:{nli.path}", digest, {"labels": str(nli.roles)}


def prefixed_step_digest(arg: str) -> str:
    """The digest of ``nli:ARG`` for the run fingerprint, without loading the model."""
    return model_fingerprint(arg)
