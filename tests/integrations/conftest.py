"""The framework tests need the real frameworks (`.[integrations-dev]`, which `scripts/test.sh`
installs). `scripts/test-fast.sh`, the contributor's quick check with only `.[dev]`, leaves out
the modules whose frameworks are missing; the full suite (`VERITRAIL_FULL_SUITE=1`, set by
`scripts/test.sh`) never does, so a missing install fails there instead of going unseen."""

from __future__ import annotations

import importlib.util
import os

_NEEDS = {
    "test_handler_contracts.py": ("langchain_core", "llama_index.core"),
    "test_langchain_guard.py": ("langchain_core",),
    "test_trace_langchain.py": (
        "langchain_core",
        "google.protobuf",
        "openinference.instrumentation.langchain",
        "opentelemetry.sdk",
    ),
    "test_trace_llamaindex.py": ("llama_index.core",),
    "test_trace_otel_sdk.py": ("google.protobuf", "opentelemetry.sdk"),
    "test_agent_langgraph.py": (
        "langchain_core",
        "langgraph.prebuilt",
        "google.protobuf",
        "openinference.instrumentation.langchain",
        "opentelemetry.sdk",
    ),
    "test_agent_llamaindex.py": (
        "llama_index.core.agent.workflow",
        "google.protobuf",
        "openinference.instrumentation.llama_index",
        "opentelemetry.sdk",
    ),
    "test_agent_openai_agents.py": (
        "agents",
        "google.protobuf",
        "openinference.instrumentation.openai_agents",
        "opentelemetry.sdk",
    ),
    "test_trace_example.py": (
        "langchain_core",
        "openinference.instrumentation.langchain",
        "opentelemetry.sdk",
        "llama_index.core",
    ),
}


def _missing(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is None
    except ModuleNotFoundError:  # a parent package is missing
        return True


collect_ignore = (
    []
    if os.environ.get("VERITRAIL_FULL_SUITE") == "1"
    else [name for name, mods in _NEEDS.items() if any(_missing(m) for m in mods)]
)
