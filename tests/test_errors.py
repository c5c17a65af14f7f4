"""One error hierarchy (issue 15): every error veritrail reports is a `VeritrailError`.

Every exception class the package defines either derives from `VeritrailError` (through
`InputProblem`, exit 2, or `RunFailure`, exit 3) or is on the short allow-list of internal ones
below; each keeps its built-in base, so `except ValueError` elsewhere still catches it. The CLI
reports them in one place (`cli/main.py`): one redacted `error: ...` line and the error's exit code.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest
from click.testing import CliRunner

import veritrail
from veritrail.cli.main import cli, error_line
from veritrail.errors import InputProblem, RunFailure, VeritrailError
from veritrail.redaction import MASK
from veritrail.testing import FakeOpenAIServer
from veritrail.testing.fake_openai_server import Fault

# Exceptions that never reach a user as such: each is caught inside the package and turned into
# something else (a recorded claim failure, a re-ask, a failed task's record) or is test-only.
INTERNAL = {
    # an unreadable model reply: the loop records the claim as failed (`unparseable_reply` issues)
    "veritrail.method.evidence.SelectionFailed",
    "veritrail.method.subclaims.DecompositionError",
    "veritrail.method.loop.StepFailure",
    # a plugged step answered outside its protocol: a StepFailure, recorded on the claim
    "veritrail.run.plugins.PluginStepError",
    # no JSON / no usable tree in a reply: the model layer or G2L re-asks, then records it
    "veritrail.lm.jsonparse.JsonReplyError",
    "veritrail.lm.jsonparse.CutReplyError",
    "veritrail.detectors.g2l.tree.TreeError",
    # the scripted provider ran out of replies: a bug in a test, meant to fail loudly
    "veritrail.lm.fake.ScriptExhaustedError",
    # a FIFO, socket or device where a run directory's file belongs: an OSError, which the
    # readers of run directories treat as they treat an unreadable file
    "veritrail.textio.NotRegularFile",
    # a warning (assert_supported: the embedded or a demonstration model judged), not an error
    "veritrail.testing.assertions.NotAJudgeWarning",
    # a shard task's engine stopped; the Ray executor records it on the job
    "veritrail.batch.ray_worker._TaskFailed",
    # `veritrail watch`: a verifier's "skip this trace" (recorded in the checkpoint with its
    # reason, never shown as an error) and the endpoint's fatal stop, reported by the watch
    "veritrail.adapters.phoenix.watch.TraceSkipped",
    "veritrail.adapters.phoenix.watch._Fatal",
}


def _exception_classes() -> dict[str, type[BaseException]]:
    """Every exception class defined in the package, by qualified name (every module imported:
    the package is installed with all its extras in the test environment)."""
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(veritrail.__path__, "veritrail."):
        if info.name == "veritrail.runs.migrations.env":
            continue  # Alembic's environment script: Alembic runs it inside a migration only
        try:
            mod = importlib.import_module(info.name)
        except ModuleNotFoundError as exc:  # an extra not installed (scripts/test-fast.sh)
            pytest.skip(f"could not import {exc.name!r}, needed by {info.name}")
        for obj in vars(mod).values():
            if (
                inspect.isclass(obj)
                and issubclass(obj, BaseException)
                and obj.__module__ == mod.__name__
            ):
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return found


def test_every_error_class_is_a_veritrail_error_or_listed_as_internal() -> None:
    classes = _exception_classes()
    outside = {name for name, cls in classes.items() if not issubclass(cls, VeritrailError)}
    assert outside == INTERNAL, "derive new errors from InputProblem or RunFailure (errors.py)"
    for name, cls in classes.items():
        if issubclass(cls, InputProblem):
            assert cls.exit_code == 2, name
        elif issubclass(cls, RunFailure):
            assert cls.exit_code == 3, name
        elif issubclass(cls, VeritrailError):
            assert cls.exit_code in (2, 3), name


def test_errors_keep_their_builtin_base() -> None:
    from veritrail.dag import DagValidationError
    from veritrail.lm.base import EndpointError, ProviderError, TransientError
    from veritrail.method.oracle import OracleError
    from veritrail.run.job import ClaimExtractionError, JobError, JobInputError
    from veritrail.textio import InputError
    from veritrail.textio import InputFault as ProblemKind

    assert issubclass(DagValidationError, ValueError) and issubclass(
        DagValidationError, InputProblem
    )
    assert issubclass(OracleError, RuntimeError) and issubclass(OracleError, InputProblem)
    assert issubclass(JobInputError, ValueError) and issubclass(JobInputError, JobError)
    assert JobInputError("x").exit_code == 2 and isinstance(JobInputError("x"), InputProblem)
    assert ClaimExtractionError("x").exit_code == 3 and isinstance(
        ClaimExtractionError("x"), RunFailure
    )
    # The model layer's failures are run failures, fatal or not (retries exhausted): exit 3.
    assert issubclass(ProviderError, RunFailure)
    assert EndpointError.exit_code == 3 and TransientError("x").exit_code == 3
    with pytest.raises(ValueError):  # still caught where a ValueError was caught
        raise InputError("input file x: not found", ProblemKind.UNREADABLE, "x")
    assert veritrail.VeritrailError is VeritrailError


def test_error_line_is_redacted() -> None:
    key = "sk-" + "a1b2c3d4" * 4
    line = error_line(InputProblem(f"settings file s.toml: api_key {key} is not allowed here"))
    assert line.startswith("error: settings file s.toml: ")
    assert key not in line and MASK in line


def test_the_cli_reports_an_error_nothing_caught_on_one_line_with_exit_2() -> None:
    # `prompts show` does not catch `PromptError`: the group reports it.
    res = CliRunner().invoke(cli, ["prompts", "show", "no-such-template"])
    assert res.exit_code == 2
    assert res.stderr == "error: no prompt template named 'no-such-template'\n"
    assert res.exception is None or isinstance(res.exception, SystemExit)


def test_a_model_failure_nothing_caught_exits_3_without_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "dag.json").write_text(
        '{"nodes": [{"id": "r", "text": "Marley was dead."},'
        ' {"id": "t", "text": "Marley had died.", "sources": ["r"]}]}',
        encoding="utf-8",
    )
    key = "sk-" + "k9" * 12
    with FakeOpenAIServer(responder=lambda req: Fault.unauthorized(echo_key=True)) as srv:
        env = {"VERITRAIL_BASE_URL": srv.base_url, "OPENAI_API_KEY": key, "VERITRAIL_CACHE": "0"}
        res = CliRunner(env=env).invoke(
            cli, ["extract", "dag.json", "--model", "openai/test-model", "--out", "c.json"]
        )
    assert res.exit_code == 3, res.output
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: the endpoint refused the run: HTTP 401")
    assert key not in res.output
    assert not (tmp_path / "c.json").exists()
