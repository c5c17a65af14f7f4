"""The first index: runs and their claims.

Revision ID: v0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "v0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Create the ``runs`` and ``claims`` tables and their indexes."""
    op.create_table(
        "runs",
        sa.Column("pk", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("root", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("dag", sa.Text(), nullable=False),
        sa.Column("pipeline", sa.Text(), nullable=True),
        sa.Column("dag_path", sa.Text(), nullable=True),
        sa.Column("model", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("created", sa.Float(), nullable=False),
        sa.Column("updated", sa.Float(), nullable=False),
        sa.Column("claims", sa.Integer(), nullable=False),
        sa.Column("verified", sa.Integer(), nullable=False),
        sa.Column("supported", sa.Integer(), nullable=False),
        sa.Column("not_supported", sa.Integer(), nullable=False),
        sa.Column("inconclusive", sa.Integer(), nullable=False),
        sa.Column("errors", sa.Integer(), nullable=False),
        sa.Column("unsupported_share", sa.Float(), nullable=True),
        sa.Column("reviewed", sa.Integer(), nullable=False),
        sa.Column("reviewed_unsupported_share", sa.Float(), nullable=True),
        sa.Column("dollars", sa.Float(), nullable=False),
        sa.Column("lm_calls", sa.Integer(), nullable=False),
        sa.Column("has_report", sa.Boolean(), nullable=False),
        sa.Column("signature", sa.Text(), nullable=False),
        sa.Column("indexed", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("pk", name="pk_runs"),
        sa.UniqueConstraint("root", "name", name="uq_runs_root_name"),
    )
    op.create_index("ix_runs_root_created", "runs", ["root", "created"])
    op.create_table(
        "claims",
        sa.Column("pk", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("run_pk", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("claim_id", sa.Text(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("key", sa.String(length=32), nullable=False),
        sa.Column("sources", sa.Text(), nullable=False),
        sa.Column("sentence_indices", sa.Text(), nullable=False),
        sa.Column("verdict", sa.String(length=32), nullable=True),
        sa.Column("termination", sa.String(length=32), nullable=True),
        sa.Column("error_stages", sa.Text(), nullable=False),
        sa.Column("error_stage_status", sa.String(length=32), nullable=True),
        sa.Column("score", sa.Float(), nullable=True),
        sa.Column("review_verdict", sa.String(length=32), nullable=True),
        sa.Column("review_reason", sa.Text(), nullable=True),
        sa.Column("review_author", sa.Text(), nullable=True),
        sa.Column("review_time", sa.String(length=40), nullable=True),
        sa.Column("review_count", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_pk"], ["runs.pk"], name="fk_claims_run_pk_runs", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("pk", name="pk_claims"),
    )
    op.create_index("ix_claims_run_pk_position", "claims", ["run_pk", "position"])
    op.create_index("ix_claims_key", "claims", ["key"])


def downgrade() -> None:
    """Drop both tables."""
    op.drop_index("ix_claims_key", table_name="claims")
    op.drop_index("ix_claims_run_pk_position", table_name="claims")
    op.drop_table("claims")
    op.drop_index("ix_runs_root_created", table_name="runs")
    op.drop_table("runs")
