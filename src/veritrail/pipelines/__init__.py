"""Reference pipelines that record their generation DAG (docs/adapters.md, "Reference pipelines").

Each runs with any `veritrail.lm.model.Model` (the embedded model, an HTTP provider, or the
scripted fake in tests) and returns a `PipelineResult` whose `dag` is validated and ready for
`veritrail verify`:

* `summarize_hierarchical`: chunk → summarize chunks → merge level by level (BooookScore-style);
* `summarize_incremental`: a running summary updated chunk by chunk (a chain);
* `answer_map_reduce`: one answer per document chunk, then reduced into the final answer.
"""

from ._common import PipelineError, PipelineResult, chunk_text, group_to_fit
from .hierarchical import HierarchicalConfig, summarize_hierarchical
from .incremental import IncrementalConfig, summarize_incremental
from .qa import NO_INFO, QAConfig, answer_map_reduce

__all__ = [
    "NO_INFO",
    "HierarchicalConfig",
    "IncrementalConfig",
    "PipelineError",
    "PipelineResult",
    "QAConfig",
    "answer_map_reduce",
    "chunk_text",
    "group_to_fit",
    "summarize_hierarchical",
    "summarize_incremental",
]
