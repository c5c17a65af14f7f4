"""The index's Alembic migrations, shipped in the package (`runs.db.migrate` runs them; no
alembic.ini: the configuration is built in code). `env.py` is Alembic's environment script,
`versions/` the revisions, oldest first."""
