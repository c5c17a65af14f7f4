"""The embedded model's llama.cpp server: its start, its slot states, its stop.

The prebuilt `xllamacpp` wheel runs llama.cpp's OpenAI-compatible `llama-server` inside this
process. `start_server` starts it on a free loopback port with a random API key (so other local
users cannot borrow it), with the slots, context, threads and prompt cache `LocalProvider`
chose; `load_prefix` puts a system prompt's state into the slot through the server's slot
save/restore endpoints (`lm.prefix_store`); `stop_server` stops it. Talking to the server's
OpenAI API is `OpenAIProvider`'s job, in `lm.local`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import environment
from . import local_host
from . import prefix_store as _ps
from .base import FatalError
from .local_weights import open_gguf
from .prefix_store import PrefixStore

PROMPT_CACHE_MIB = (256, 2048)
"""Bounds of llama.cpp's host-memory prompt cache (MiB): an eighth of the available memory."""


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """What the server is started with (`LocalProvider`'s choices)."""

    model: str
    """The `local/<name>` model's name."""
    sha256: str
    """The weights' pinned hash (part of the prefix store's identity)."""
    model_dir: Path | None
    n_ctx: int
    """Context window of one slot."""
    parallel: int
    threads: int
    max_tokens: int
    store_dir: Path | None
    """The prefix store's folder, or None for no store."""


@dataclass(frozen=True, slots=True)
class StartedServer:
    """A running server: the `xllamacpp.Server`, its OpenAI base URL, its key, its store."""

    server: Any
    url: str
    key: str
    store: PrefixStore | None
    """The prefix store the server saves to and restores from, if it is usable."""


def _count(body: Any, key: str) -> int:
    """`body[key]` when it is a whole number, else 0 (a server reply is never trusted)."""
    value = body.get(key) if isinstance(body, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def start_server(config: ServerConfig) -> StartedServer:
    """Start the server (blocking: run it off the event loop); `FatalError` if it cannot."""
    try:
        import xllamacpp
    except ImportError:
        raise FatalError(
            "the embedded model needs the xllamacpp package: pip install 'veritrail[local]'"
        ) from None
    params = xllamacpp.CommonParams()
    # Without a unified KV cache llama.cpp splits n_ctx evenly over the slots.
    params.n_ctx = config.n_ctx * config.parallel
    params.n_parallel = config.parallel
    params.kv_unified = False
    params.cont_batching = True
    params.cache_prompt = True
    memory = local_host.available_memory()
    if memory is not None:
        lo, hi = PROMPT_CACHE_MIB
        params.cache_ram_mib = max(lo, min(hi, memory // 8 // (1 << 20)))
    params.n_predict = config.max_tokens
    params.cpuparams.n_threads = config.threads
    params.cpuparams_batch.n_threads = config.threads
    params.port = 0  # a free port, read back from listening_address
    params.hostnames = ["127.0.0.1"]
    params.warmup = False
    params.ui = False
    params.verbosity = 0 if environment.get("VERITRAIL_LLAMA_LOG") else -1
    key = secrets.token_hex(16)
    params.api_keys = [key]
    store = _open_store(xllamacpp, config)
    if store is not None:
        # llama.cpp joins the folder and the file name without a separator.
        params.slot_save_path = str(store.directory) + os.sep
        params.endpoint_slots = True
    box: dict[str, Any] = {}

    def start() -> None:
        # llama.cpp's server threads inherit this thread's signal mask; blocking SIGINT and
        # SIGTERM here keeps them delivered to Python's main thread (Ctrl-C, kill).
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        try:
            box["server"] = xllamacpp.Server(params)
        except Exception as exc:  # noqa: BLE001 - reported to the caller with context
            box["error"] = exc

    # The weights' path is valid while the server loads them (joined in memory, it is a file
    # descriptor of this process); llama.cpp keeps its own mapping of them after that.
    with open_gguf(config.model, config.model_dir) as path:
        params.model.path = str(path)
        mode = getattr(xllamacpp, "llama_load_mode", None)
        if str(path).startswith("/proc/") and mode is not None:
            # Mapped, as its default does with a file: the mapping shares the memory file's pages
            # (read into buffers or direct I/O, the weights would be in memory twice).
            params.load_mode = mode.LLAMA_LOAD_MODE_MMAP
        t = threading.Thread(target=start, name=f"veritrail-llama-{config.model}", daemon=True)
        t.start()
        t.join()
    if "error" in box:
        raise FatalError(f"could not start the embedded model: {box['error']}")
    server = box["server"]
    return StartedServer(server, f"{server.listening_address}/v1", key, store)


def _open_store(xllamacpp: Any, config: ServerConfig) -> PrefixStore | None:
    if config.store_dir is None:
        return None
    build = getattr(xllamacpp, "__version__", "unknown")
    identity = f"{config.sha256}|xllamacpp {build}|threads {config.threads}|kv f16"
    store = PrefixStore(config.store_dir, identity)
    return store if store.ready() else None


async def load_prefix(
    base_url: str,
    key: str,
    timeout: float,
    store: PrefixStore,
    system: str,
    *,
    served: bool,
    states: dict[str, int],
) -> None:
    """Put `system`'s state into slot 0 of the server at `base_url`: restored from `store`, or
    computed by a priming request and saved there for the next run. `served`: whether the slot
    holds a call's state (then worth keeping before a restore). Counts the outcome in `states`
    ("restored", "saved", "failed"). Never raises: the store only saves time."""
    # httpx2 is the openai SDK's own HTTP library (openai >= 3) and a declared dependency.
    import httpx2 as httpx

    root = base_url.removesuffix("/v1")
    headers = {"Authorization": f"Bearer {key}"}
    path = store.path(system)
    async with httpx.AsyncClient(timeout=timeout, headers=headers) as http:

        async def slot(action: str, name: str) -> dict[str, Any] | None:
            try:
                r = await http.post(
                    f"{root}/slots/0", params={"action": action}, json={"filename": name}
                )
                body = r.json() if r.status_code == 200 else None
            except (httpx.HTTPError, ValueError):
                return None
            return body if isinstance(body, dict) else None

        if path.is_file():
            if served:
                # A restore replaces the slot's state without handing it to llama.cpp's
                # host-memory prompt cache, as a new request would; a one-token request
                # hands it over, so the calls that shared it can still load it later.
                with contextlib.suppress(httpx.HTTPError):
                    await http.post(f"{root}/v1/completions", json={"prompt": ".", "max_tokens": 1})
            got = await slot("restore", path.name)
            if _count(got, "n_restored") > 0:
                store.touch(path)
                states["restored"] += 1
                return
            store.forget(path)  # unreadable here: computed and saved again below
        try:
            r = await http.post(
                f"{root}/v1/chat/completions",
                json={
                    "messages": [
                        {"role": "system", "content": system},
                        {"role": "user", "content": _ps.PRIME_USER},
                    ],
                    "max_tokens": 1,
                    "temperature": 0.0,
                },
            )
            body = r.json() if r.status_code == 200 else None
            primed = _count(body.get("usage") if isinstance(body, dict) else None, "prompt_tokens")
        except (httpx.HTTPError, ValueError):
            primed = 0
        if not primed:
            states["failed"] += 1
            return
        temp = store.temp_name()
        got = await slot("save", temp)
        saved = _count(got, "n_saved")
        # The slot holds the priming prompt and at most the one token generated after it;
        # anything else is not ours to keep.
        if primed <= saved <= primed + 1 and store.commit(temp, system):
            states["saved"] += 1
        else:
            store.discard(temp)
            states["failed"] += 1


async def stop_server(box: list[Any]) -> None:
    """Stop the server held in `box` by dropping the last reference to it, off the event loop:
    its destructor joins llama.cpp's loop."""
    await asyncio.to_thread(box.clear)


__all__ = [
    "PROMPT_CACHE_MIB",
    "ServerConfig",
    "StartedServer",
    "load_prefix",
    "start_server",
    "stop_server",
]
