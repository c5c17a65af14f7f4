"""`veritrail.verify` / `check` refuse arguments of the wrong type, None included, with a
`VeritrailError` naming the call and the argument, before anything is read or any model is
called (issue 29, item 8): no TypeError or AttributeError from deep inside, and no source
verified as the text "None"."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import veritrail as vt
from loopback_model import FakeOpenAIServer, loopback
from veritrail.api import ArgumentTypeError
from veritrail.errors import InputProblem, VeritrailError

QS = Path(__file__).resolve().parents[2] / "examples" / "quickstart"
ANSWER = "The Harbour Museum opened in 1921. It has a roof garden."
MUSEUM = "The Harbour Museum opened in 1921. It was founded by Marta Reyes."


@pytest.fixture
def qs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "qs"
    shutil.copytree(QS, d)
    monkeypatch.chdir(tmp_path)  # whatever a call would write lands in tmp_path
    return d


@pytest.fixture
def srv(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAIServer]:
    # Every model points at the loopback server: a call that got through would be counted.
    with loopback(monkeypatch) as s:
        yield s


def _refused(exc: pytest.ExceptionInfo[BaseException], *words: str) -> None:
    err = exc.value
    assert isinstance(err, ArgumentTypeError)
    # A user-facing error (exit 2, like any bad input) that old `except TypeError` code and
    # `except ValueError` (JobInputError) code both still catch.
    assert isinstance(err, vt.JobInputError) and isinstance(err, InputProblem)
    assert isinstance(err, TypeError) and isinstance(err, ValueError)
    assert isinstance(err, VeritrailError) and err.exit_code == 2
    for w in words:
        assert w in str(err), (w, str(err))


def _argument_id(value: object) -> str:
    """A test id: the argument the expected message names (the other parameters: none)."""
    if not isinstance(value, list):
        return ""
    return str(value[0]).split(" must")[0].split(": ")[-1].split("[")[0]


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (lambda qs: vt.verify(None), ["verify(): dag must be", "not None"]),
        (lambda qs: vt.verify(42), ["dag must be", "not int"]),
        (lambda qs: vt.verify(b"dag.json"), ["dag must be", "not bytes"]),
        (lambda qs: vt.verify(qs / "dag.json", 5), ["claims must be", "not int"]),
        # A dict would have been read as its keys: claims named after the dict's keys.
        (lambda qs: vt.verify(qs / "dag.json", {"c1": "x"}), ["claims must be", "not dict"]),
        (lambda qs: vt.verify(qs / "dag.json", {"a claim"}), ["claims must be", "not set"]),
        (lambda qs: vt.verify(qs / "dag.json", oracle=3), ["oracle must be", "not int"]),
        (lambda qs: vt.verify(qs / "dag.json", out=True), ["out must be", "not bool"]),
        (lambda qs: vt.verify(qs / "dag.json", html=1.5), ["html must be", "not float"]),
        (lambda qs: vt.verify(qs / "dag.json", run_dir=[]), ["run_dir must be", "not list"]),
        (lambda qs: vt.verify(qs / "dag.json", config=0), ["config must be", "not int"]),
        (lambda qs: vt.verify(qs / "dag.json", progress="yes"), ["progress must be", "not str"]),
    ],
    ids=_argument_id,
)
def test_verify_refuses_wrong_types(
    qs: Path, srv: FakeOpenAIServer, call: Any, words: list[str]
) -> None:
    with pytest.raises(ArgumentTypeError) as exc:
        call(qs)
    _refused(exc, *words)
    assert srv.count == 0


@pytest.mark.parametrize(
    ("args", "kwargs", "words"),
    [
        ((None, {"m": MUSEUM}), {}, ["check(): answer must be", "not None"]),
        ((b"bytes", {"m": MUSEUM}), {}, ["answer must be", "not bytes"]),
        ((7, {"m": MUSEUM}), {}, ["answer must be", "not int"]),
        ((ANSWER, None), {}, ["check(): sources must be", "not None"]),
        ((ANSWER, 3), {}, ["sources must be", "not int"]),
        # A set has no order, so positional names (source1, ...) would change between runs.
        ((ANSWER, {MUSEUM}), {}, ["sources must be", "not set"]),
        ((ANSWER, [None]), {}, ["sources[0] must be a text (str) or a pathlib.Path", "not None"]),
        ((ANSWER, [MUSEUM, 12]), {}, ["sources[1] must be", "not int"]),
        ((ANSWER, {"m": None}), {}, ["sources['m'] must be a text (str)", "not None"]),
        ((ANSWER, {"m": Path("museum.txt")}), {}, ["sources['m'] must be a text (str)"]),
        ((ANSWER, {1: MUSEUM}), {}, ["names of sources", "must be str, not int"]),
        ((ANSWER, MUSEUM), {"claims": 1}, ["claims must be", "not int"]),
        ((ANSWER, MUSEUM), {"chunk_sentences": "3"}, ["chunk_sentences must be", "not str"]),
        ((ANSWER, MUSEUM), {"chunk_tokens": True}, ["chunk_tokens must be", "not bool"]),
        ((ANSWER, MUSEUM), {"out": 1}, ["out must be", "not int"]),
    ],
    ids=_argument_id,
)
def test_check_refuses_wrong_types(
    qs: Path, srv: FakeOpenAIServer, args: tuple[Any, ...], kwargs: dict[str, Any], words: list[str]
) -> None:
    with pytest.raises(ArgumentTypeError) as exc:
        vt.check(*args, **kwargs)
    _refused(exc, *words)
    assert srv.count == 0


def test_source_none_is_never_verified_as_the_text_none(qs: Path, srv: FakeOpenAIServer) -> None:
    # Before: str(None) became a source chunk "None" and the run went on to the model.
    with pytest.raises(ArgumentTypeError, match=r"sources\[1\]"):
        vt.check(ANSWER, [MUSEUM, None], oracle=qs / "oracle.json", claims=["It opened in 1921."])
    assert srv.count == 0


def test_async_twins_check_the_same(qs: Path, srv: FakeOpenAIServer) -> None:
    import asyncio

    with pytest.raises(ArgumentTypeError, match="dag must be"):
        asyncio.run(vt.averify(None))
    with pytest.raises(ArgumentTypeError, match="sources must be"):
        asyncio.run(vt.acheck(ANSWER, None))
    assert srv.count == 0


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"q": "3"}, ["verify(): q = '3'"]),
        ({"q": -1}, ["verify(): q must not be negative"]),
        ({"model": 5}, ["verify(): model = 5"]),
        ({"nonsense": 1}, ["verify(): unknown setting 'nonsense'"]),
    ],
)
def test_settings_are_named_as_arguments_not_options(
    qs: Path, srv: FakeOpenAIServer, kwargs: dict[str, Any], words: list[str]
) -> None:
    """A bad setting's message names the call, not a command-line option (`option --q`)."""
    with pytest.raises(vt.JobInputError) as exc:
        vt.verify(qs / "dag.json", qs / "claims.json", **kwargs)
    for w in words:
        assert w in str(exc.value)
    assert "option --" not in str(exc.value)
    assert srv.count == 0


def test_documented_forms_still_work(qs: Path) -> None:
    """What docs/api.md accepts keeps working: str and Path paths, lists and tuples, dicts,
    Claims, None for "not given"."""
    claims = [vt.Claim("c1", "Scrooge was Marley's sole executor.", ())]
    r1 = vt.verify(str(qs / "dag.json"), claims, oracle=qs / "oracle.json", q=None, progress=False)
    r2 = vt.verify(
        vt.load_dag(qs / "dag.json"), (qs / "claims.json"), oracle=str(qs / "oracle.json")
    )
    assert len(r1.claims) == 1 and len(r2.claims) == 4
    (qs / "museum.txt").write_text(MUSEUM, encoding="utf-8")
    by_tuple = vt.check(
        ANSWER,
        (MUSEUM, qs / "museum.txt"),
        oracle=qs / "oracle.json",
        claims=["x"],
        chunk_sentences=None,
    )
    assert by_tuple.claims[0].claim.text == "x"
