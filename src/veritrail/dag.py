"""The generation DAG (docs/dag-format.md): loading, validation, stages and traversal helpers.

The module to import every DAG name from; the code lives in three modules, one concern each:

* `veritrail.dag_model`: `Node`, `Dag` (stages, traversal) and `PerDag`;
* `veritrail.dag_validate`: the checks, `ProblemCode`, `DagProblem` and `DagValidationError`;
* `veritrail.dag_io`: `load_dag`, `iter_node_records`, `save_dag` and `dag_schema`.

File formats (documented in docs/dag-format.md, schema in `schemas/dag.schema.json`):

* JSON: ``{"nodes": [{"id": "n1", "text": "...", "sources": ["n0"], "stage": 1}, ...]}``
  (an optional top-level ``"meta"`` object is kept as-is; a bare array of nodes is accepted too);
* JSON Lines: one node object per line; blank lines and lines starting with ``//`` are ignored,
  and the first line may be ``{"meta": {...}}``.

Validation never repairs anything: every problem found is reported with the ids at fault, all at
once, as a `DagValidationError`. A file that cannot be read is reported the same way (codes
``unreadable``, ``bad_encoding``, ``bad_json``, ``too_deep``) so that callers handle one exception.
Files are read under the input rules of `veritrail.textio` (UTF-8, an optional UTF-8 BOM, strict
JSON, bounded nesting).
"""

from __future__ import annotations

from .dag_io import dag_schema, iter_node_records, load_dag, save_dag
from .dag_model import Dag, Node, PerDag
from .dag_validate import DagProblem, DagValidationError, ProblemCode

__all__ = [
    "Dag",
    "DagProblem",
    "DagValidationError",
    "Node",
    "PerDag",
    "ProblemCode",
    "dag_schema",
    "iter_node_records",
    "load_dag",
    "save_dag",
]
