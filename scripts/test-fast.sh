#!/usr/bin/env bash
# The fast tier, in a virtualenv of its own holding only `.[dev]` (no models, browser, Ray, torch,
# PostgreSQL or frameworks): lint, the dependency check, mypy on what `.[dev]` has
# (scripts/mypy_without_extras.py), and plain `pytest`, whose addopts (pyproject.toml) leave out
# the opt-in markers (docs/testing.md). Tests whose packages are missing are skipped here.
# `bash scripts/test.sh` (what CI runs) runs this first, then installs everything and runs every
# test. The virtualenv is `.venv-test/fast` (scripts/test-venv.sh). Arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/test-venv.sh

if ! enter_test_venv fast; then
  python -m pip install -q --disable-pip-version-check -e ".[dev]"
  mark_test_venv fast
fi

python -m ruff check src tests benchmarks examples scripts
python -m ruff format --check src tests benchmarks examples scripts
python -m deptry src
python scripts/mypy_without_extras.py
python -m pytest -q "$@"
