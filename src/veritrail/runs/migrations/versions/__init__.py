"""The index's Alembic revisions (module names start with a letter, so every one is an
importable module that the type checker reads)."""
