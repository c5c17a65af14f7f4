#!/usr/bin/env bash
# The contributor's quick check: only `.[dev]` installed (no models, browser, Ray, torch or
# frameworks), lint, the dependency check, and the tests that need nothing more. Tests whose
# packages are missing are skipped here, and mypy is left out (strict typing needs the optional
# frameworks' own types); `bash scripts/test.sh` (what CI runs) installs everything, type-checks,
# skips nothing for a missing install, and runs the README's commands too.
set -euo pipefail
cd "$(dirname "$0")/.."

python -m pip install -q --disable-pip-version-check -e ".[dev]"
python -m ruff check src tests benchmarks examples scripts
python -m ruff format --check src tests benchmarks examples scripts
python -m deptry src
python -m pytest -q -m "not slow and not embedded and not browser and not heavy" "$@"
