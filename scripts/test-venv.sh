# Sourced by scripts/test-fast.sh and scripts/test.sh: the test suites run in virtualenvs of their
# own, never in the caller's active environment.
#
#   enter_test_venv NAME   activates $VERITRAIL_TEST_VENVS/NAME (default: `.venv-test/NAME` in
#                          the checkout, ignored by git), made from $VERITRAIL_TEST_PYTHON
#                          (default python3, >= 3.11); returns 1 when the virtualenv was just
#                          made, so the caller installs into it and then calls
#   mark_test_venv NAME    which records that it holds what pyproject.toml and the calling
#                          script ask for.
# A virtualenv is made again from nothing whenever pyproject.toml or the calling script changes,
# so a package left over from an older pyproject (or installed by hand) never hides a missing
# declaration. An install that fails half-way leaves no mark: the next run starts over.

_test_venv_dir() {
  echo "${VERITRAIL_TEST_VENVS:-$PWD/.venv-test}/$1"
}

_test_venv_stamp() {
  cat pyproject.toml "scripts/$(basename "$0")" | "${VERITRAIL_TEST_PYTHON:-python3}" -c \
    'import hashlib, sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest()[:16])'
}

enter_test_venv() {
  local dir stamp fresh=0
  dir="$(_test_venv_dir "$1")"
  stamp="$(_test_venv_stamp)"
  if [ ! -f "$dir/made-for-$stamp" ]; then
    rm -rf "$dir"
    "${VERITRAIL_TEST_PYTHON:-python3}" -m venv "$dir"
    fresh=1
  fi
  # shellcheck disable=SC1091
  source "$dir/bin/activate"
  hash -r
  [ "$fresh" = 0 ]
}

mark_test_venv() {
  touch "$(_test_venv_dir "$1")/made-for-$(_test_venv_stamp)"
}
