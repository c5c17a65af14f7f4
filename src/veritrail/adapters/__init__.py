"""Ways to get the generation DAG of a real pipeline run (docs/adapters.md).

* `graphrag`: a GraphRAG index folder (and optionally a global-search query) → DAG;
* `graphrag_search`: our own GraphRAG-style global search over an index, recording its DAG;
* `booookscore`: BooookScore hierarchical and incremental summary traces → DAGs.

Each module is imported on its own (``from veritrail.adapters.graphrag import load_index``), so
optional dependencies such as pyarrow are only needed by the adapter that uses them. The
reference pipelines live in `veritrail.pipelines`, the recorder for any pipeline in
`veritrail.pipelines.recorder`.
"""
