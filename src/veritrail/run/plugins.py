"""Pluggable steps: load a decomposer, evidence selector or judge named on the command line.

A step spec (``--decomposer``, ``--selector``, ``--judge``, or the settings of the same names)
is one of:

* ``package.module:attribute`` — imported with the normal import system (the module must be
  importable: installed, or on ``PYTHONPATH``); the attribute may be dotted (``mod:Class.make``);
* ``path/to/file.py:attribute`` — a plugin file loaded from disk (relative to the working
  directory), for a checker that is not packaged;
* ``NAME`` — an installed entry point of group ``veritrail.steps`` (a package declares
  ``[project.entry-points."veritrail.steps"] NAME = "pkg.module:attribute"``);
* ``nli:PATH`` (judge only) — the built-in NLI judge over a local Hugging Face
  sequence-classification model directory (`veritrail.detectors.nli.NLIJudge`), found by name
  through `PREFIXED_STEPS` like any plugin (the run layer does not import the detectors).

The attribute is either a ready step object (it has the protocol's async method:
``decompose``, ``select`` or ``judge``; see `veritrail.method.steps`) or a factory — a class or function
— called with a `StepContext` when it takes an argument, or with none. Whatever it returns must
have the protocol method as an ``async def``; anything else is refused up front with a one-line
message (`PluginError`, exit 2 on the command line), before any model call.

Plugins change results, so each loaded step records a fingerprint (`LoadedStep.fingerprint`):
the spec, what it resolved to, and a digest — the SHA-256 of the plugin module's source file
(only that file, not what it imports), or for ``nli:`` of the model's config and weight sizes.
The run fingerprint includes it: another judge, or an edited plugin file, is another run.

A plugin is checked while it runs too (`plugged_steps`, the one way `verify`, `resume` and `batch`
build their steps): a step that returns what its protocol does not allow (a verdict that is not a
`Verdict`, ...) or calls ``sys.exit`` ends that claim in error, naming the plugin (`PluginStepError`),
and a plugin that calls ``sys.exit`` while it is imported or built is a `PluginError` like any
other load failure: loading a plugin never ends the run silently.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ..errors import InputProblem
from ..method.loop import StepFailure
from ..method.steps import (
    Decomposition,
    RawSelection,
    StepContext,
    VerdictOutcome,
)
from ..records import Verdict

if TYPE_CHECKING:
    from ..lm.model import Model
    from ..method.steps import EvidenceBatch, Steps, VerdictInput
    from ..records import Claim

GROUP = "veritrail.steps"
"""The entry-point group plugins register their steps under."""

METHODS: Mapping[str, str] = {"decomposer": "decompose", "selector": "select", "judge": "judge"}
"""Step kind -> the async method its protocol requires (`veritrail.method.steps`)."""

_STEPS_FIELD = {"decomposer": "decomposer", "selector": "selector", "judge": "judge"}


class PluginError(InputProblem, ValueError):
    """A step spec that cannot be loaded or does not implement its protocol."""


class PluginStepError(StepFailure):
    """A plugged step broke its protocol while verifying a claim (returned what the protocol
    does not allow, or called ``sys.exit``): that claim ends in error, the plugin named."""


def _why(exc: BaseException) -> str:
    """What a plugin did, for a message: its exception, or the ``sys.exit`` it called (a plugin
    that exits must not end veritrail with the plugin's status and no report)."""
    if isinstance(exc, SystemExit):
        return f"it called sys.exit({exc.code!r})"
    return f"{type(exc).__name__}: {exc}"


@dataclass(frozen=True, slots=True)
class LoadedStep:
    """A loaded step with what identifies it for run fingerprints."""

    kind: str
    spec: str
    step: Any
    source: str
    """What the spec resolved to, e.g. ``mypkg.judges:RulesJudge`` or an entry point's value."""
    digest: str = ""
    """Digest of the plugin's source file (or of the NLI model); empty when unknown."""
    extra: Mapping[str, str] = field(default_factory=dict)

    @property
    def fingerprint(self) -> dict[str, str]:
        """JSON-able identity of the step, for `result_config` and run fingerprints."""
        return {"spec": self.spec, "source": self.source, "digest": self.digest, **self.extra}


def _file_digest(path: str | None) -> str:
    if not path:
        return ""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]
    except OSError:
        return ""


def _import_file(path: Path) -> ModuleType:
    if not path.is_file():
        raise PluginError(f"plugin file {path} does not exist")
    name = "veritrail_plugin_" + hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
    got = sys.modules.get(name)
    if got is not None:
        return got
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise PluginError(f"cannot load plugin file {path}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses and pickling look modules up by name
    try:
        spec.loader.exec_module(mod)
    except (Exception, SystemExit) as exc:
        sys.modules.pop(name, None)
        raise PluginError(f"plugin file {path} failed to import: {_why(exc)}") from exc
    return mod


def _resolve_target(target: str) -> tuple[Any, str, str]:
    """``module:attr`` or ``file.py:attr`` -> (object, source, digest)."""
    mod_name, _, attr = target.rpartition(":")
    if not mod_name or not attr:
        raise PluginError(f"step spec {target!r} is not module:attribute")
    if mod_name.endswith(".py") or "/" in mod_name or "\\" in mod_name:
        path = Path(mod_name).expanduser()
        mod = _import_file(path)
        source = f"{path}:{attr}"
    else:
        try:
            mod = importlib.import_module(mod_name)
        except ImportError as exc:
            raise PluginError(f"cannot import plugin module {mod_name!r}: {exc}") from exc
        except (Exception, SystemExit) as exc:
            raise PluginError(f"plugin module {mod_name!r} failed to import: {_why(exc)}") from exc
        source = f"{mod_name}:{attr}"
    obj: Any = mod
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise PluginError(f"plugin {source}: {mod_name!r} has no attribute {attr!r}") from None
    return obj, source, _file_digest(getattr(mod, "__file__", None))


def _resolve_entry_point(name: str) -> tuple[Any, str, str]:
    found = [ep for ep in entry_points(group=GROUP) if ep.name == name]
    if not found:
        names = sorted({ep.name for ep in entry_points(group=GROUP)})
        known = ", ".join(names) if names else "none installed"
        raise PluginError(
            f"no step named {name!r}: give module:attribute, file.py:attribute, nli:PATH or an "
            f"entry point of group {GROUP} ({known})"
        )
    ep = found[0]
    try:
        obj = ep.load()
    except (Exception, SystemExit) as exc:
        raise PluginError(f"entry point {name!r} ({ep.value}) failed to load: {_why(exc)}") from exc
    dist = getattr(ep, "dist", None)
    source = ep.value + (f" ({dist.name} {dist.version})" if dist is not None else "")
    mod = sys.modules.get(ep.value.partition(":")[0])
    return obj, source, _file_digest(getattr(mod, "__file__", None))


def _instantiate(obj: Any, ctx: StepContext, source: str) -> Any:
    method = METHODS[ctx.kind]
    if not isinstance(obj, type) and hasattr(obj, method):
        return obj  # a ready step object
    if not callable(obj):
        raise PluginError(f"plugin {source} is neither a {ctx.kind} nor a factory")
    if isinstance(obj, type) and not hasattr(obj, method):
        raise _not_a(ctx.kind, source)  # a class whose instances cannot be steps: say so now
    try:
        params = [
            p
            for p in inspect.signature(obj).parameters.values()
            if p.default is inspect.Parameter.empty
            and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        params = []
    try:
        return obj(ctx) if params else obj()
    except PluginError:
        raise
    except (Exception, SystemExit) as exc:
        raise PluginError(f"plugin {source} failed to start: {_why(exc)}") from exc


def load_step(kind: str, spec: str, *, model: Model | None = None) -> LoadedStep:
    """Load one step (`kind` = decomposer / selector / judge) from its spec."""
    if kind not in METHODS:
        raise PluginError(f"unknown step kind {kind!r}: use {', '.join(METHODS)}")
    spec = spec.strip()
    if not spec:
        raise PluginError(f"--{kind}: empty step spec")
    prefixed = _prefixed(spec)
    if prefixed is not None:
        prefix, module = prefixed
        if kind != module.STEP_KIND:
            raise PluginError(f"{prefix}:PATH is a {module.STEP_KIND}, not a {kind}")
        step, source, digest, extra = module.load_prefixed_step(spec[len(prefix) + 1 :])
        return LoadedStep(kind, spec, step, source, digest, extra)
    if ":" in spec:
        obj, source, digest = _resolve_target(spec)
    else:
        obj, source, digest = _resolve_entry_point(spec)
    step = _instantiate(obj, StepContext(kind, model, spec), source)
    method = getattr(step, METHODS[kind], None)
    if method is None or not inspect.iscoroutinefunction(method):
        raise _not_a(kind, source)
    return LoadedStep(kind, spec, step, source, digest)


PREFIXED_STEPS: Mapping[str, str] = {"nli": "veritrail.detectors.nli"}
"""The package's own steps named ``PREFIX:ARG``: prefix -> the module that loads them. They are
found by name, as plugins are, so that the run layer never imports the detectors: the module
gives `STEP_KIND`, `load_prefixed_step(arg)` -> (step, source, digest, extra) and
`prefixed_step_digest(arg)` (for the run fingerprint, without loading anything heavy)."""


def _prefixed(spec: str) -> tuple[str, Any] | None:
    """(prefix, its module) when `spec` names one of `PREFIXED_STEPS`, else None."""
    prefix, sep, _ = spec.partition(":")
    name = PREFIXED_STEPS.get(prefix) if sep else None
    return (prefix, importlib.import_module(name)) if name is not None else None


def _not_a(kind: str, source: str) -> PluginError:
    return PluginError(
        f"plugin {source} does not implement the {kind} protocol: it needs an "
        f"'async def {METHODS[kind]}(...)' (see veritrail.method.steps)"
    )


def load_steps(
    specs: Mapping[str, str | None], *, model: Model | None = None
) -> dict[str, LoadedStep]:
    """Load the steps whose spec is given (kinds with None or "" are left out)."""
    return {k: load_step(k, v, model=model) for k, v in specs.items() if v}


def apply_steps(base: Steps, loaded: Mapping[str, LoadedStep]) -> Steps:
    """`base` with the loaded steps in place of its own."""
    return replace(base, **{_STEPS_FIELD[k]: s.step for k, s in loaded.items()})


def plugged_steps(
    base: Steps, specs: Mapping[str, str | None], *, model: Model | None = None
) -> Steps:
    """`base` with the steps `specs` name in its place, each checked while it runs
    (`checked_step`): the one way a run's plugged steps are built, by `veritrail verify` and
    `resume` (`run.job.build_steps`) and by both batch executors. Raises `PluginError` (before
    any model call) for a spec that cannot be loaded."""
    loaded = load_steps(specs, model=model)
    return replace(base, **{_STEPS_FIELD[k]: checked_step(s) for k, s in loaded.items()})


def portable_spec(spec: str) -> str:
    """`spec` as another process loads it the same way: a plugin file's path made absolute
    (against this process's working directory, as `load_step` reads it here); module, entry
    point and ``nli:`` specs are returned as they are."""
    spec = spec.strip()
    if spec.startswith("nli:") or ":" not in spec:
        return spec
    mod_name, _, attr = spec.rpartition(":")
    if mod_name.endswith(".py") or "/" in mod_name or "\\" in mod_name:
        return f"{Path(mod_name).expanduser().resolve()}:{attr}"
    return spec


def checked_step(loaded: LoadedStep) -> Any:
    """The loaded step wrapped so that a broken protocol ends the claim, not the run: what the
    step returns is checked against its protocol, and a ``sys.exit`` inside it is caught; either
    raises `PluginStepError` naming the plugin (the loop records it as the claim's error).
    Every other attribute is the step's own (`model`, `concurrency`, ...)."""
    wrapper = {"decomposer": _CheckedDecomposer, "selector": _CheckedSelector}.get(
        loaded.kind, _CheckedJudge
    )
    return wrapper(loaded)


class _Checked:
    """What the three checked steps share: the plugin's name and attribute access."""

    def __init__(self, loaded: LoadedStep) -> None:
        self._inner = loaded.step
        self._what = f"{loaded.kind} plugin {loaded.spec}"

    def __getattr__(self, item: str) -> Any:
        if item.startswith("__") or item == "_inner":
            raise AttributeError(item)  # no recursion before __init__ (copy, pickle)
        return getattr(self._inner, item)

    def _broke(self, problem: str) -> PluginStepError:
        return PluginStepError(f"{self._what} {problem}")

    def _exited(self, exc: SystemExit) -> PluginStepError:
        return self._broke(f"ended the claim: {_why(exc)}")


def _shown(value: Any) -> str:
    return f"{value!r}"[:200] + f" ({type(value).__name__})"


class _CheckedDecomposer(_Checked):
    async def decompose(self, claim: Claim, text: str) -> Sequence[str] | Decomposition:
        """The plugin's parts of `text`, checked: a `Decomposition` or a list of strings."""
        try:
            got = await self._inner.decompose(claim, text)
        except SystemExit as exc:
            raise self._exited(exc) from None
        if isinstance(got, Decomposition):
            parts: list[Any] = list(got.parts)
        elif isinstance(got, str | bytes) or not isinstance(got, Iterable):
            raise self._broke(f"returned {_shown(got)}, not a list of strings or a Decomposition")
        else:
            parts = list(got)  # any iterable of parts, read once
        bad = next((p for p in parts if not isinstance(p, str)), None)
        if bad is not None:
            raise self._broke(f"returned the part {_shown(bad)}: not a list of strings")
        return got if isinstance(got, Decomposition) else parts


class _CheckedSelector(_Checked):
    async def select(
        self, claim: Claim, subclaims: Sequence[str], batch: EvidenceBatch, *, sample: int = 0
    ) -> RawSelection:
        """The plugin's selection for `batch`, checked: a `RawSelection` with a text summary."""
        try:
            got = await self._inner.select(claim, subclaims, batch, sample=sample)
        except SystemExit as exc:
            raise self._exited(exc) from None
        if not isinstance(got, RawSelection):
            raise self._broke(f"returned {_shown(got)}, not a RawSelection")
        if not isinstance(got.summary, str):
            raise self._broke(f"returned the summary {_shown(got.summary)}, not a string")
        return got


class _CheckedJudge(_Checked):
    async def judge(
        self,
        claim: Claim,
        subclaims: Sequence[str],
        evidence: Sequence[VerdictInput],
        *,
        sample: int = 0,
    ) -> VerdictOutcome:
        """The plugin's verdict, checked: a `VerdictOutcome` whose verdict is a `Verdict` (or
        None with `error` set, an unreadable reply) and whose reasoning is a string."""
        try:
            got = await self._inner.judge(claim, subclaims, evidence, sample=sample)
        except SystemExit as exc:
            raise self._exited(exc) from None
        if not isinstance(got, VerdictOutcome):
            raise self._broke(f"returned {_shown(got)}, not a VerdictOutcome")
        if got.verdict is not None and not isinstance(got.verdict, Verdict):
            raise self._broke(
                f"returned the verdict {_shown(got.verdict)}, not a Verdict "
                f"({', '.join(f'Verdict.{v.name}' for v in Verdict)})"
            )
        if not isinstance(got.reasoning, str):
            raise self._broke(f"returned the reasoning {_shown(got.reasoning)}, not a string")
        return got


def fingerprints(loaded: Mapping[str, LoadedStep]) -> dict[str, dict[str, str]]:
    """Kind -> fingerprint of each loaded step (empty when every step is the default)."""
    return {k: s.fingerprint for k, s in sorted(loaded.items())}


def spec_fingerprint(kind: str, spec: str) -> dict[str, str]:
    """What identifies a step spec for the run fingerprint, found without running the plugin:
    the spec and the digest of its source file (or NLI model). A spec that cannot be resolved
    gets an empty digest here; loading it (`load_step`) then fails with the reason."""
    spec = spec.strip()
    digest = ""
    try:
        prefixed = _prefixed(spec)
        if prefixed is not None:
            digest = prefixed[1].prefixed_step_digest(spec[len(prefixed[0]) + 1 :])
        elif ":" in spec:
            mod_name = spec.rpartition(":")[0]
            if mod_name.endswith(".py") or "/" in mod_name or "\\" in mod_name:
                digest = _file_digest(str(Path(mod_name).expanduser()))
            else:
                found = importlib.util.find_spec(mod_name)
                digest = _file_digest(found.origin if found is not None else None)
        else:
            for ep in entry_points(group=GROUP):
                if ep.name == spec:
                    found = importlib.util.find_spec(ep.value.partition(":")[0])
                    dist = getattr(ep, "dist", None)
                    version = f"{dist.name} {dist.version}:" if dist is not None else ""
                    file_digest = _file_digest(found.origin if found is not None else None)
                    digest = f"{version}{ep.value}:{file_digest}"
                    break
    except (ImportError, OSError, ValueError):
        digest = ""
    return {"kind": kind, "spec": spec, "digest": digest}
