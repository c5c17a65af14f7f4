"""Read plans: which nodes a round reads, in which order and prompts (docs/method.md#evidence-selection, #candidates-and-termination).

A plan depends on the set of nodes to read and the run's batching settings, never on the claim,
so a run shares the plans of its large rounds between claims (`ReadPlans`, held by the run's
`context.RunContext`: two runs never share one).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator
from collections.abc import Set as AbstractSet

from ..dag import Dag
from .config import VerifyConfig
from .evidence import batch_items, node_items
from .segment import SentenceIndex


class ReadPlan:
    """The claim-independent part of a round: the nodes read (in read order), their prompts, and
    the union of their sources (the candidates after a Not Fully Supported verdict).

    Immutable once built (`sources` is computed on first use and kept).
    """

    __slots__ = ("_dag", "_sources", "batches", "roots", "to_read")

    def __init__(
        self, dag: Dag, sentences: SentenceIndex, nodes: Iterable[str], config: VerifyConfig
    ):
        self._dag = dag
        self.to_read: tuple[str, ...] = tuple(dag.read_order(nodes))
        roots, nonroots = dag.split_roots(self.to_read)
        self.roots: frozenset[str] = frozenset(roots)
        self.batches = batch_items(
            node_items(sentences, roots), node_items(sentences, nonroots), config
        )
        self._sources: frozenset[str] | None = None

    def sources(self) -> frozenset[str]:
        """`src(v)` of every node read."""
        if self._sources is None:
            self._sources = self._dag.sources_of_all(self.to_read)
        return self._sources

    def iter_sources(self) -> Iterator[str]:
        """The same sources, lazily (with repeats): for checks that can stop early."""
        if self._sources is not None:
            return iter(self._sources)
        dag = self._dag
        return (s for n in self.to_read for s in dag.sources(n))


PLAN_MIN_NODES = 256
"""Rounds of fewer nodes are planned directly, not cached (see `ReadPlans`)."""


class ReadPlans:
    """One run's cache of read plans for large rounds.

    Which nodes a round reads depends on the claim only through earlier verdicts, and many claims
    read exactly the same sets: every claim's first round is the terminal's sources, and every
    claim that gets Not Fully Supported there widens to the same next set. At GraphRAG scale such
    a round holds thousands of nodes (sorting, batching and the union of sources cost ~5 µs a
    node), so plans of at least `min_nodes` nodes are built once and shared (they hold the run's
    cached sentence tuples, no copies); the `max_plans` most recently used are kept. Smaller
    rounds are planned directly: their plans are cheap and rarely repeat.
    """

    def __init__(
        self,
        dag: Dag,
        sentences: SentenceIndex,
        config: VerifyConfig,
        *,
        min_nodes: int | None = None,
        max_plans: int = 8,
    ) -> None:
        self._dag, self._sentences, self._config = dag, sentences, config
        self.min_nodes = PLAN_MIN_NODES if min_nodes is None else min_nodes
        self.max_plans = max_plans
        self._plans: OrderedDict[frozenset[str], ReadPlan] = OrderedDict()
        self.hits = 0

    def plan(self, nodes: AbstractSet[str]) -> ReadPlan:
        """The plan for reading `nodes`."""
        if len(nodes) < self.min_nodes:
            return ReadPlan(self._dag, self._sentences, nodes, self._config)
        key = frozenset(nodes)
        got = self._plans.get(key)
        if got is not None:
            self.hits += 1
            self._plans.move_to_end(key)
            return got
        got = ReadPlan(self._dag, self._sentences, key, self._config)
        self._plans[key] = got
        if len(self._plans) > self.max_plans:
            self._plans.popitem(last=False)
        return got
