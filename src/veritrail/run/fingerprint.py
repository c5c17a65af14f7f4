"""What identifies a run: the hashes that decide whether a run directory is "this run".

A run's fingerprint (`run_fingerprint`) hashes the DAG file's bytes (`file_sha256`), the claims,
the model, the settings that change results (`result_config`) and the code that computes them
(`code_fingerprint` over `verify_code_files`). The same fingerprint resumes a run directory, a
different one is refused there (`run.store.RunStore.create_or_open`) and names a new default one
(`run.store.default_run_dir`). `stored_settings` is what run.json keeps of the settings beside
the fingerprint (all of them, no credentials).
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..records import Claim
from .store import RUN_FORMAT, RUN_VERSION, claims_to_json, redact

if TYPE_CHECKING:
    from .settings import Settings


def canonical_json(value: Any) -> str:
    """Sorted-key, compact JSON: the text every fingerprint hashes."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def file_sha256(path: str | Path) -> str:
    """Hex sha256 of a file's bytes, read in chunks (DAG files can be hundreds of MB)."""
    h = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# What decides what `veritrail verify` computes: the whole `method/` folder (its code and its prompt
# templates) plus the few files outside it that the method reads through (the DAG: its public face,
# model, validation and file reading; the fence, the domain records, the model wrapper's reply
# parsing). Detectors, pipelines, the CLI and display code are left out so that editing them does
# not orphan runs. Hashing the folder rather than a hand-kept list means a new method module is
# covered the day it is added.
_METHOD_DIR = "method"
_VERIFY_CODE_OUTSIDE_METHOD = (
    "dag.py",
    "dag_io.py",
    "dag_model.py",
    "dag_validate.py",
    "fencing.py",
    "records.py",
    "lm/jsonparse.py",
    "lm/model.py",
)


def verify_code_files() -> list[Path]:
    """Every file `code_fingerprint` hashes, sorted (for tests and docs/architecture.md): `method/`
    with its prompt templates, and `dag.py`, `dag_io.py`, `dag_model.py`, `dag_validate.py`,
    `fencing.py`, `records.py`, `lm/jsonparse.py` and `lm/model.py`."""
    root = Path(__file__).resolve().parent.parent
    method = root / _METHOD_DIR
    files = [*method.rglob("*.py"), *method.glob("prompts/*.md")]
    files += [root / name for name in _VERIFY_CODE_OUTSIDE_METHOD]
    return sorted(p for p in files if p.is_file() and "__pycache__" not in p.parts)


@functools.cache
def code_fingerprint() -> str:
    """Hash of the code that decides a run's results (`verify_code_files`).

    Part of the run fingerprint: a resumed run must be finished by the same code that started it,
    or its report would not equal an uninterrupted run's. It also keeps a developer's edited code
    from silently reusing results computed by the previous version.
    """
    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    for f in verify_code_files():
        h.update(f.relative_to(root).as_posix().encode("utf-8") + b"\0")
        h.update(f.read_bytes() + b"\0")
    return h.hexdigest()


def run_fingerprint(
    *, dag_sha256: str, claims: Sequence[Claim] | None, model: str, config: Mapping[str, Any]
) -> str:
    """Hash identifying "the same run": same DAG bytes, claims, model, result-affecting config
    and code (`code_fingerprint`).

    `claims=None` means the claims are extracted from the DAG by the run itself (then the DAG and
    the config determine them). Secrets are removed before hashing so a key rotation does not
    start a new run.
    """
    doc = {
        "format": RUN_FORMAT,
        "version": RUN_VERSION,
        "code": code_fingerprint(),
        "dag": dag_sha256,
        "claims": claims_to_json(claims) if claims is not None else None,
        "model": model,
        "config": redact(config),
    }
    return hashlib.sha256(canonical_json(doc).encode("utf-8")).hexdigest()


def result_config(settings: Settings, oracle_path: str | None) -> dict[str, Any]:
    """The settings that determine a run's results (the `config` part of `run_fingerprint`):
    `settings.RESULT_SETTINGS`, the oracle file's content hash, and a hash of the prompt
    overrides in `prompt_dir` (they change results as much as the packaged templates do).

    One definition for every command that creates runs (`verify`, `batch`), so the same inputs
    and settings give the same run directory whichever command started it.
    """
    from .settings import RESULT_SETTINGS

    d = settings.to_dict()
    out = {k: d[k] for k in RESULT_SETTINGS if k in d}
    # The key-term check (`method.keyterms`) only when set: left unset, the model decides (the
    # model is in the fingerprint), and the config part stays what it was before the setting.
    if out.get("term_check") is None:
        out.pop("term_check", None)
    if oracle_path is not None:
        out["oracle_sha256"] = file_sha256(oracle_path)
    if settings.prompt_dir:
        h = hashlib.sha256()
        for f in sorted(Path(settings.prompt_dir).glob("*.md")):
            h.update(f.name.encode("utf-8") + b"\0" + f.read_bytes() + b"\0")
        out["prompt_dir_sha256"] = h.hexdigest()
    plugged = {k: v for k in ("decomposer", "selector", "judge") if (v := d.get(k))}
    if plugged:
        # A different judge gives different results: the spec and its source file's (or NLI
        # model's) digest are part of the fingerprint. Only when set, so runs without plugins
        # keep the fingerprints they had.
        from .plugins import spec_fingerprint

        out["step_plugins"] = {k: spec_fingerprint(k, v) for k, v in plugged.items()}
    return out


def stored_settings(settings: Settings) -> dict[str, Any]:
    """Settings as run.json keeps them: all of them, the base URL without user and password."""
    from ..redaction import redact_url

    d = settings.to_dict()
    if d.get("base_url"):
        d["base_url"] = redact_url(str(d["base_url"]))
    return d
