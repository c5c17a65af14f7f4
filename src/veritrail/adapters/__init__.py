"""Ways to get the generation DAG of a real pipeline run (docs/adapters.md).

* `graphrag` (a package: `index`, `dag`, `capture`): a GraphRAG index folder (and optionally a
  captured global or local search) → DAG;
* `booookscore`: BooookScore hierarchical and incremental summary traces → DAGs;
* `trace`: OpenTelemetry / OpenInference / Langfuse traces of a pipeline → DAG.

Each adapter is imported on its own (``from veritrail.adapters.graphrag import load_index``), so
optional dependencies such as pyarrow are only needed by the adapter that uses them. The
reference pipelines live in `veritrail.pipelines`, the recorder for any pipeline in
`veritrail.pipelines.recorder`.
"""
