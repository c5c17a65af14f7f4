"""Alembic's environment for the index: migrations always run on the connection `runs.db`
passes in ``config.attributes["connection"]`` (never from a URL in a file, so a password never
sits in a configuration file)."""

from __future__ import annotations

from alembic import context

from veritrail.runs.schema import metadata

connection = context.config.attributes.get("connection")
if connection is None:  # pragma: no cover - only when someone runs the alembic CLI by hand
    raise RuntimeError("veritrail's index migrations run through veritrail.runs.db.migrate")

context.configure(
    connection=connection,
    target_metadata=metadata,
    render_as_batch=connection.dialect.name == "sqlite",  # SQLite alters tables by copying
)
with context.begin_transaction():
    context.run_migrations()
