"""The index's tables (SQLAlchemy Core). The migrations in `migrations/versions/` create them;
tests/runs/test_migrations.py checks that the migrations and these tables agree.

* ``runs``: one row per run directory of an index root: where it is, what it ran (DAG name,
  pipeline, model, fingerprint), when and how it stands (status, times), its figures (claims per
  verdict, unsupported share with and without reviews, reviews, cost) and the signature of its
  files that `refresh` compares.
* ``claims``: one row per claim of a run, in report order: id, text, stable key
  (`keys.claim_text_key`), sources, the model's verdict and error stages, the effective review.

Times are seconds since the epoch (floats): the same on SQLite and PostgreSQL, no time zones.
Lists (sources, sentence indices, error stages) are JSON text.
"""

from __future__ import annotations

from sqlalchemy import (
    Boolean,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(column_0_label)s",
        "uq": "uq_%(table_name)s_%(column_0_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

runs = Table(
    "runs",
    metadata,
    Column("pk", Integer, primary_key=True, autoincrement=True),
    Column("root", Text, nullable=False),
    Column("name", Text, nullable=False),
    Column("path", Text, nullable=False),
    Column("fingerprint", String(64), nullable=False),
    Column("dag", Text, nullable=False),
    Column("pipeline", Text),
    Column("dag_path", Text),
    Column("model", Text, nullable=False),
    Column("status", String(32), nullable=False),
    Column("created", Float, nullable=False),
    Column("updated", Float, nullable=False),
    Column("claims", Integer, nullable=False),
    Column("verified", Integer, nullable=False),
    Column("supported", Integer, nullable=False),
    Column("not_supported", Integer, nullable=False),
    Column("inconclusive", Integer, nullable=False),
    Column("errors", Integer, nullable=False),
    Column("unsupported_share", Float),
    Column("reviewed", Integer, nullable=False),
    Column("reviewed_unsupported_share", Float),
    Column("dollars", Float, nullable=False),
    Column("lm_calls", Integer, nullable=False),
    Column("has_report", Boolean, nullable=False),
    Column("signature", Text, nullable=False),
    Column("indexed", Float, nullable=False),
    UniqueConstraint("root", "name", name="uq_runs_root_name"),
    Index("ix_runs_root_created", "root", "created"),
)

claims = Table(
    "claims",
    metadata,
    Column("pk", Integer, primary_key=True, autoincrement=True),
    Column(
        "run_pk",
        Integer,
        ForeignKey("runs.pk", ondelete="CASCADE", name="fk_claims_run_pk_runs"),
        nullable=False,
    ),
    Column("position", Integer, nullable=False),
    Column("claim_id", Text, nullable=False),
    Column("text", Text, nullable=False),
    Column("key", String(32), nullable=False),
    Column("sources", Text, nullable=False),
    Column("sentence_indices", Text, nullable=False),
    Column("verdict", String(32)),
    Column("termination", String(32)),
    Column("error_stages", Text, nullable=False),
    Column("error_stage_status", String(32)),
    Column("score", Float),
    Column("review_verdict", String(32)),
    Column("review_reason", Text),
    Column("review_author", Text),
    Column("review_time", String(40)),
    Column("review_count", Integer, nullable=False),
    Index("ix_claims_run_pk_position", "run_pk", "position"),
    Index("ix_claims_key", "key"),
)

__all__ = ["claims", "metadata", "runs"]
