"""GraphRAG index output → generation DAG (docs/adapters.md, "GraphRAG").

* `index`: reading an index output folder (v1 or current parquet file names) into records;
* `dag`: the DAG GraphRAG's dataflow implies (text units → descriptions → community reports),
  alone (`build_index_dag`) or ending in a captured global or local search's answer;
* `capture`: what is recorded from a GraphRAG query (the capture file formats and the callbacks
  that collect one from ``graphrag.api.global_search``).

Every public name is importable from here: ``from veritrail.adapters.graphrag import load_index``.
Reading an index needs pyarrow (``pip install 'veritrail[graphrag]'``); it is imported only when
a table is read.
"""

from .capture import (
    CaptureCallbacks,
    CapturedMap,
    GlobalSearchCapture,
    LocalSearchCapture,
    LocalSearchContext,
    report_ids_from_context,
)
from .dag import (
    IndexGraph,
    Stages,
    build_index_dag,
    build_local_query_dag,
    build_query_dag,
    default_terminal_report,
    entity_node,
    index_graph,
    relationship_node,
    report_node,
    stages_for,
    text_unit_node,
)
from .index import (
    Community,
    Entity,
    GraphRagIndex,
    GraphRagIndexError,
    Layout,
    RawExtraction,
    Relationship,
    Report,
    TextUnit,
    load_index,
)

__all__ = [
    "CaptureCallbacks",
    "CapturedMap",
    "Community",
    "Entity",
    "GlobalSearchCapture",
    "GraphRagIndex",
    "GraphRagIndexError",
    "IndexGraph",
    "Layout",
    "LocalSearchCapture",
    "LocalSearchContext",
    "RawExtraction",
    "Relationship",
    "Report",
    "Stages",
    "TextUnit",
    "build_index_dag",
    "build_local_query_dag",
    "build_query_dag",
    "default_terminal_report",
    "entity_node",
    "index_graph",
    "load_index",
    "relationship_node",
    "report_ids_from_context",
    "report_node",
    "stages_for",
    "text_unit_node",
]
