"""G2LDetect's records: its settings, the outcome of each step, and its answer for one claim.

Frozen dataclasses and an enum, built by `g2l.method`, adapted to the package's `Detection` by
`g2l.detector` and written out by `g2l.report`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from ...records import Claim, Verdict
from .tree import TreeNode


class G2LStatus(StrEnum):
    """Outcome of one detection."""

    PASSED = "passed"  # every path supported
    FAILED = "failed"  # at least one path not supported
    UNDETERMINED = "undetermined"  # no path failed, but some could not be checked
    TREE_FAILED = "tree_failed"  # no usable tree after the bounded re-asks


@dataclass(frozen=True, slots=True)
class G2LConfig:
    """Settings of G2LDetect.

    `reference_tokens`: token budget (`veritrail.method.tokens.estimate_tokens`) for the reference text
    of one check prompt; set it to the model's context window minus room for the instructions,
    the path and the reply. `max_depth` / `max_nodes` bound what counts as a usable tree (a deeper
    or bigger one is re-asked, then recorded as failed). `max_parallel` bounds concurrent path
    checks. `tree_max_tokens` caps the tree reply.
    """

    reference_tokens: int = 3000
    max_depth: int = 8
    max_nodes: int = 300
    max_parallel: int | None = 8
    tree_max_tokens: int | None = 2048
    check_max_tokens: int | None = 512

    def __post_init__(self) -> None:
        if self.reference_tokens < 1:
            raise ValueError("reference_tokens must be >= 1")
        if self.max_depth < 1 or self.max_nodes < 1:
            raise ValueError("max_depth and max_nodes must be >= 1")
        if self.max_parallel is not None and self.max_parallel < 1:
            raise ValueError("max_parallel must be >= 1 (or None for no bound)")


@dataclass(frozen=True, slots=True)
class PathCheck:
    """The verdict on one root-to-leaf path.

    `supported` is None when no reply could be read; `chunk` is the 0-based reference chunk whose
    answer decided it (the supporting one, or the last one checked).
    """

    index: int
    nodes: tuple[str, ...]
    supported: bool | None
    reason: str
    chunk: int | None
    chunks_checked: int
    error: str | None = None
    raw: str = ""

    @property
    def leaf(self) -> str:
        """The detail the path leads to."""
        return self.nodes[-1]


@dataclass(frozen=True, slots=True)
class G2LResult:
    """Everything one detection produced."""

    status: G2LStatus
    tree: TreeNode | None
    paths: tuple[PathCheck, ...]
    chunks: int
    tree_attempts: int
    tree_error: str | None = None
    tree_raw: str = ""

    @property
    def passed(self) -> bool | None:
        """True / False for a decided text, None when it could not be decided."""
        if self.status is G2LStatus.PASSED:
            return True
        if self.status is G2LStatus.FAILED:
            return False
        return None

    @property
    def failing_paths(self) -> tuple[PathCheck, ...]:
        """Paths the references do not support."""
        return tuple(p for p in self.paths if p.supported is False)

    @property
    def score(self) -> float | None:
        """Share of checked paths that are supported (a soft score; None with nothing checked)."""
        decided = [p for p in self.paths if p.supported is not None]
        if not decided:
            return None
        return sum(1 for p in decided if p.supported) / len(decided)


@dataclass(frozen=True, slots=True)
class TreeOutcome:
    """The tree step: the tree, or None with the error and the last raw reply."""

    tree: TreeNode | None
    attempts: int
    error: str | None = None
    raw: str = ""


@dataclass(frozen=True, slots=True)
class G2LClaimOutcome:
    """G2LDetect's answer for one claim, in the verifier's vocabulary (for `veritrail eval`)."""

    claim: Claim
    verdict: Verdict | None
    score: float | None
    result: G2LResult


__all__ = [
    "G2LClaimOutcome",
    "G2LConfig",
    "G2LResult",
    "G2LStatus",
    "PathCheck",
    "TreeOutcome",
]
