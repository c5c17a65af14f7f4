"""The pluggable steps of the method (docs/method.md) and the records they exchange.

Three interfaces: `Decomposer`, `EvidenceSelector`, `VerdictGenerator`. The LM-based
implementations (`subclaims.LMDecomposer`, `evidence.LMEvidenceSelector`,
`verdict.LMVerdictGenerator`) are the default; `oracle.Oracle` answers from a JSON file.
The engine owns everything around them: batching, prompt-unique ids and id validation
(`evidence`), verdict input assembly and compression (`verdict`), candidates and termination
(`rounds`), the run's shared state (`context`) and the loop that ties them (`loop`).

Any object with the protocol's async method can replace a step: in Python through `Steps`, on the
command line and in settings through ``--decomposer``, ``--selector`` and ``--judge`` (a
``module:attribute``, a ``file.py:attribute``, an entry point of group ``veritrail.steps``, or
``nli:PATH`` for the NLI judge); see `veritrail.run.plugins`, docs/plugins.md and the complete example
examples/plugins/overlap_steps.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ..records import Claim, IssueKind, SelectionIssue, Step, Verdict

if TYPE_CHECKING:
    from ..lm.base import GenerateConfig
    from ..lm.model import Model


@dataclass(frozen=True, slots=True)
class ExcerptSentence:
    """A sentence placed in an evidence prompt under a prompt-unique id."""

    prompt_id: int
    sentence_index: int
    text: str


@dataclass(frozen=True, slots=True)
class Excerpt:
    """One node's text (or a slice of it, for nodes larger than a batch) in an evidence prompt.

    Sentences are kept as two aligned sequences that share the run's segmentation (no copy per
    prompt): `indices` (0-based sentence indices within the node; a `range` for a whole node) and
    `texts`. The k-th sentence has the prompt id `first_id + k`.
    """

    label: int  # 1-based excerpt label within the prompt
    node_id: str
    is_root: bool
    first_id: int
    indices: Sequence[int]
    texts: Sequence[str]
    ends_node: bool = True
    """False when the node continues in the next prompt (a node larger than a batch)."""

    def __len__(self) -> int:
        return len(self.indices)

    @property
    def last_id(self) -> int:
        """The prompt id of the excerpt's last sentence."""
        return self.first_id + len(self.indices) - 1

    @property
    def sentences(self) -> tuple[ExcerptSentence, ...]:
        """The sentences with their prompt ids (built on demand)."""
        return tuple(
            ExcerptSentence(self.first_id + k, i, t)
            for k, (i, t) in enumerate(zip(self.indices, self.texts, strict=True))
        )

    def at(self, prompt_id: int) -> ExcerptSentence:
        """The sentence with this prompt id (which must lie in the excerpt)."""
        k = prompt_id - self.first_id
        return ExcerptSentence(prompt_id, self.indices[k], self.texts[k])

    def prompt_id(self, sentence_index: int) -> int | None:
        """The prompt id of a node sentence, or None when it is not in this excerpt."""
        if sentence_index not in self.indices:
            return None
        return self.first_id + self.indices.index(sentence_index)


@dataclass(frozen=True, slots=True)
class EvidenceBatch:
    """The content of one evidence-selection prompt; prompt ids run 1..size without gaps."""

    excerpts: tuple[Excerpt, ...]

    @property
    def size(self) -> int:
        """Number of sentences in the prompt."""
        return sum(len(e) for e in self.excerpts)

    def locate(self, prompt_id: int) -> tuple[Excerpt, ExcerptSentence] | None:
        """The excerpt and sentence a prompt id names, or None if it was not assigned."""
        for e in self.excerpts:
            if e.first_id <= prompt_id <= e.last_id:
                return e, e.at(prompt_id)
        return None


@dataclass(frozen=True, slots=True)
class RawSelection:
    """What a selector returned for one batch, before id validation.

    `ids` are as given (ints, strings, or ranges such as "5-10"); the engine validates them.
    `summary` describes the selected sentences; `error` is set when the reply could not be read
    (then `raw` keeps the reply), which the engine records instead of reading it as "no evidence".
    """

    ids: tuple[str | int, ...]
    summary: str
    error: str | None = None
    raw: str = ""
    node_summaries: tuple[tuple[str, str], ...] = ()
    """Optional per-node summaries (node id, text); when given they replace the batch summary."""
    unreadable: tuple[str, ...] = ()
    """One line per unreadable reply met on the way (also when a re-ask then succeeded); the
    engine records each as an `unparseable_reply` issue on the claim."""


@dataclass(frozen=True, slots=True)
class VerdictInput:
    """One item of verdict evidence: a root node's full text, or a non-root evidence summary."""

    node_ids: tuple[str, ...]
    is_root: bool
    text: str
    sentence_count: int | None = None
    """How many sentences `text` holds, when the builder knows it (a node's selected sentences
    joined); None: counted by splitting `text` when the verdict's size is checked."""


@dataclass(frozen=True, slots=True)
class VerdictOutcome:
    """A verdict with its reasoning; `error` set when the reply could not be read."""

    verdict: Verdict | None
    reasoning: str
    error: str | None = None
    raw: str = ""
    unreadable: tuple[str, ...] = ()
    """One line per unreadable reply met on the way (see `RawSelection.unreadable`)."""


@dataclass(frozen=True, slots=True)
class Decomposition:
    """What a decomposer may return instead of a bare list of parts: the parts, plus one line
    per unreadable reply met on the way (recorded as issues on the claim)."""

    parts: tuple[str, ...]
    unreadable: tuple[str, ...] = ()


def unreadable_issues(step: Step, unreadable: Sequence[str]) -> tuple[SelectionIssue, ...]:
    """The `unparseable_reply` issues for the unreadable replies of one call of `step`."""
    return tuple(SelectionIssue(IssueKind.UNPARSEABLE_REPLY, f"{step}: {u}") for u in unreadable)


class Decomposer(Protocol):
    """Splits a claim (or a sub-claim) into parts in one call; one part means "final"."""

    async def decompose(self, claim: Claim, text: str) -> Sequence[str] | Decomposition:
        """Return the parts of `text` (which is `claim.text` or one of its sub-claims), bare or
        as a `Decomposition` that also reports unreadable replies."""
        ...


class EvidenceSelector(Protocol):
    """Selects the sentences of one batch that bear on the claim or its sub-claims."""

    async def select(
        self, claim: Claim, subclaims: Sequence[str], batch: EvidenceBatch, *, sample: int = 0
    ) -> RawSelection:
        """Return the selected prompt ids and a summary for `batch`."""
        ...


class VerdictGenerator(Protocol):
    """Decides Fully Supported / Not Fully Supported / Inconclusive over the assembled evidence."""

    async def judge(
        self,
        claim: Claim,
        subclaims: Sequence[str],
        evidence: Sequence[VerdictInput],
        *,
        sample: int = 0,
    ) -> VerdictOutcome:
        """Return the verdict for `claim` given `evidence` (never empty)."""
        ...


@dataclass(frozen=True, slots=True)
class Steps:
    """The three steps a run uses, and the models whose usage ledgers hold their costs."""

    decomposer: Decomposer
    selector: EvidenceSelector
    judge: VerdictGenerator
    models: tuple[Model, ...] = ()
    """Models the steps call (`loop.lm_steps` records its model here; `dataclasses.replace` of one
    step keeps it). The run's costs are read from these models' usage ledgers, together with the
    `model` attribute of any step that has one (`RunContext`), so a caller never names the model
    a second time to get the costs."""

    def ledger_models(self) -> tuple[Model, ...]:
        """`models` plus each step's own `model` attribute when it is a `Model`, each model
        once (by identity), in that order."""
        from ..lm.model import Model

        seen: dict[int, Model] = {id(m): m for m in self.models}
        for step in (self.decomposer, self.selector, self.judge):
            m = getattr(step, "model", None)
            if isinstance(m, Model):
                seen.setdefault(id(m), m)
        return tuple(seen.values())


class LMStep:
    """What the LM-based steps share: a model, and temperatures for hard and sampled calls.

    Hard prediction calls run at `temperature`; soft-prediction samples (docs/method.md#soft-prediction, `sample` > 0
    or any sample when k > 1) at `sample_temperature`, with the sample index in the cache key so
    the k samples are k different calls.
    """

    def __init__(
        self, model: Model, temperature: float = 0.0, sample_temperature: float = 0.2
    ) -> None:
        self.model = model
        self.temperature = temperature
        self.sample_temperature = sample_temperature

    @property
    def concurrency(self) -> int:
        """Calls the model runs at once: the most prompts of a round worth having in progress."""
        return self.model.concurrency

    @property
    def concise(self) -> bool:
        """Whether to ask for the concise reply format (`Model.concise_replies`: small local
        models, where every generated token is expensive)."""
        return bool(getattr(self.model, "concise_replies", False))

    def sample_config(self, sample: int) -> GenerateConfig:
        """The request parameters for sample number `sample` (0 = the hard-prediction call)."""
        from ..lm.base import GenerateConfig

        return GenerateConfig(
            temperature=self.temperature if sample == 0 else self.sample_temperature,
            sample_index=sample,
        )


@dataclass(frozen=True, slots=True)
class StepContext:
    """What a plugin factory is given."""

    kind: str
    """``decomposer``, ``selector`` or ``judge``."""
    model: Model | None = None
    """The run's language model when one is configured (a plugin may wrap the LM steps)."""
    spec: str = ""


def text_field(max_chars: int | None) -> dict[str, Any]:
    """The schema of a free-text reply field, bounded to `max_chars` characters when given.

    The bound is what makes a concise reply format concise: a grammar-constrained server
    (llama.cpp turns `maxLength` into its grammar) cannot run past it, where an instruction to
    be brief is often ignored by a small model. The prompts stay the same.
    """
    field: dict[str, Any] = {"type": "string"}
    if max_chars is not None:
        field["maxLength"] = max_chars
    return field
