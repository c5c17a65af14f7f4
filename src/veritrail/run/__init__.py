"""One verification run as a library object (docs/api.md, docs/running.md).

`job` prepares, executes and resumes a run and writes its reports; it raises typed errors
(`JobError` and its subclasses) instead of exiting, so the CLI, the Python API
(`veritrail.verify`, `veritrail.check`) and the pytest helper share one implementation.
`sources` turns an answer and its source texts into the two-stage DAG of `veritrail check`.
"""
