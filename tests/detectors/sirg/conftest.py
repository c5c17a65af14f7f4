"""Shared fixtures for the SIRG tests: tiny random models built in-process (no downloads)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from veritrail.detectors.sirg.models import LoadedLM, build_tiny  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def _one_thread() -> None:
    # The CI machine has 2 cores shared with other jobs; one thread is the fastest there.
    torch.set_num_threads(1)


@pytest.fixture(scope="session", params=["llama", "qwen2"])
def tiny_lm(request: pytest.FixtureRequest) -> LoadedLM:
    return build_tiny(request.param)
