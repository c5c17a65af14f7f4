"""What `veritrail verify` prints before its first model reply, and a time left that holds still.

Through the CLI (`veritrail.cli.main.main`, in a thread, its stderr a line sink) against the
loopback fake server: the server holds its replies until the test has seen what the terminal
says while nothing was answered, so nothing races a sleep. The embedded model's start is the
provider's one test seam (`LocalProvider._start_blocking`), held the same way.
"""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any

import pytest

from veritrail.cli.main import main
from veritrail.lm import local_weights
from veritrail.lm.local import LocalProvider
from veritrail.run.progress import ProgressReporter, fmt_left
from veritrail.testing.fake_openai_server import FakeOpenAIServer
from veritrail.testing.overlap import loopback_env, responder

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart"


class Lines:
    """A stderr stand-in that lets a test wait for a line (not a terminal: plain progress)."""

    def __init__(self) -> None:
        self.text = ""
        self._changed = threading.Condition()

    def write(self, s: str) -> int:
        with self._changed:
            self.text += s
            self._changed.notify_all()
        return len(s)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    def wait_for(self, pattern: str, timeout: float = 60.0) -> str:
        """The first line matching `pattern`, once written (fails after `timeout` seconds)."""
        rx = re.compile(pattern)

        def found() -> str | None:
            return next((ln for ln in self.text.splitlines() if rx.search(ln)), None)

        with self._changed:
            assert self._changed.wait_for(lambda: found() is not None, timeout), self.text
            line = found()
        assert line is not None
        return line


def _run_cli(args: list[str]) -> tuple[threading.Thread, dict[str, Any]]:
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            main(args)
            box["code"] = 0
        except SystemExit as exc:
            box["code"] = exc.code or 0

    t = threading.Thread(target=target, daemon=True)
    t.start()
    return t, box


def _sink(monkeypatch: pytest.MonkeyPatch) -> Lines:
    # Set in the test's body: pytest puts its own capture back at the start of each phase.
    lines = Lines()
    monkeypatch.setattr("sys.stderr", lines)
    return lines


def _verify_args(tmp_path: Path) -> list[str]:
    return [
        "verify", str(QUICKSTART / "dag.json"), "--claims", str(QUICKSTART / "claims.json"),
        "--out", str(tmp_path / "report.json"), "--run-dir", str(tmp_path / "run"),
    ]  # fmt: skip


def test_the_log_says_it_waits_for_the_first_reply(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sink = _sink(monkeypatch)
    with FakeOpenAIServer(responder=responder) as srv:
        for k, v in loopback_env(srv).items():
            monkeypatch.setenv(k, v)
        srv.hold()
        t, box = _run_cli(_verify_args(tmp_path))
        assert srv.wait_for_requests(1)
        line = sink.wait_for("waiting for the model's first reply")
        assert line.startswith("[veritrail] 0/4 claims") and "calls 0 " in line
        srv.release()
        t.join(120)
    assert box.get("code") == 0, sink.text
    lines = sink.text.splitlines()
    waiting = next(i for i, ln in enumerate(lines) if "first reply" in ln)
    assert lines.index("[veritrail] verifying 4 claims") < waiting
    # Said once; the closing line has answered calls and no waiting text.
    assert sum("first reply" in ln for ln in lines) == 1
    last = [ln for ln in lines if ln.startswith("[veritrail] 4/4")][-1]
    assert "first reply" not in last and "calls 0 " not in last


def test_the_embedded_model_start_is_said_before_any_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sink = _sink(monkeypatch)
    # The weights need not be installed: their start is the held seam below.
    monkeypatch.setattr(local_weights, "missing_model", lambda name: None)
    monkeypatch.setenv("VERITRAIL_CACHE", "0")
    monkeypatch.setenv("VERITRAIL_PREFIX_STORE", "off")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    loaded = threading.Event()
    with FakeOpenAIServer(responder=responder) as srv:

        def held_start(self: LocalProvider) -> tuple[Any, str, str]:
            assert loaded.wait(60)
            return object(), srv.base_url, "sk-test-loopback"

        monkeypatch.setattr(LocalProvider, "_start_blocking", held_start)
        t, box = _run_cli([*_verify_args(tmp_path), "--model", "local/qwen2.5-coder-1.5b"])
        line = sink.wait_for(r"^\[veritrail\] 0/4 claims .*starting the embedded model")
        assert "local/qwen2.5-coder-1.5b" in line and "1.1 GB" in line
        assert srv.count == 0  # nothing asked of the model yet
        loaded.set()
        t.join(120)
    assert box.get("code") == 0, sink.text
    assert re.search(r"veritrail: the embedded model is ready \(\d+ s to load\)", sink.text)
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert report["summary"]["claims"] == 4


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_time_left_holds_still_where_the_plain_pace_swung() -> None:
    # 20 claims one at a time: 60 s of start-up inside the first call, then claims of 8 or 12 s
    # in turn. The plain pace (elapsed / done × left) said 23 min after the first claim and
    # saw-toothed after; the shown estimate must stay near the true time left throughout.
    clock = Clock()
    p = ProgressReporter(clock=clock)
    p.start(20)
    plain: list[float] = []
    misses: list[float] = []
    durations = [8.0 if i % 2 else 12.0 for i in range(20)]
    end = 60 + sum(durations)
    t = 0.0
    for i, d in enumerate(durations):
        p.claim_started(f"c{i}")
        if i == 0:
            clock.t = 60.0
            p.call(_Call(f"c{i}"))  # the first answer comes after the model started
            t = 60.0
        for step in range(int(d)):  # watch it every second while the claim runs
            clock.t = t + step
            shown = p.eta()
            if shown is not None:
                true = end - clock.t
                misses.append(abs(shown - true) / max(true, 40.0))
        t += d
        clock.t = t
        p.call(_Call(f"c{i}"))
        p.claim_finished(_result(f"c{i}"))
        done = i + 1
        if done < 20:
            plain.append(clock.t / done * (20 - done))
    assert max(plain) > 20 * 60 and min(plain) < 4 * 60  # the swing being fixed
    assert len(misses) > 150, "an estimate is shown from the second claim on"
    assert max(misses) < 0.25  # within a quarter of the true time left (or 10 s near the end)
    assert p.eta() is None  # all done


def test_no_estimate_from_one_claim_nor_past_its_countdown() -> None:
    clock = Clock()
    p = ProgressReporter(clock=clock)
    p.start(5)

    def answer(t: float, claim: str) -> None:
        clock.t = t
        p.call(_Call(claim))

    answer(5, "c0")  # the pace counts from here
    answer(10, "c0")
    p.claim_finished(_result("c0"))
    assert p.eta() is None  # one claim is no pace
    answer(15, "c1")
    answer(20, "c1")
    p.claim_finished(_result("c1"))
    # 4 calls in 15 s; 3 claims left at 2 calls each: 6 calls of 3.75 s.
    assert p.eta() == pytest.approx(22.5)
    clock.t = 30
    assert p.eta() == pytest.approx(12.5)  # counted down, not recomputed
    clock.t = 43
    assert p.eta() is None  # ran out: none until the next claim finishes
    answer(45, "c2")
    answer(50, "c2")
    p.claim_finished(_result("c2"))
    assert p.eta() == pytest.approx(45 / 6 * 4)  # fresh: nothing left of the old one to average


def test_claims_in_flight_together_are_counted_in_calls() -> None:
    # The quick start on the embedded model: 4 claims in flight at once on one slot, their calls
    # answered in turn (60 s each), 5 calls a claim, so they all finish within the last 4 calls.
    # Seconds per finished claim said ~18 min left at the second one; 2 calls (2 min) were left.
    clock = Clock()
    p = ProgressReporter(clock=clock)
    p.start(4)
    claims = [f"c{i}" for i in range(4)]
    for c in claims:
        p.claim_started(c)
    made = dict.fromkeys(claims, 0)
    seen: list[tuple[float, float]] = []
    for n in range(20):
        c = claims[n % 4]
        clock.t = 60.0 * (n + 1)
        p.call(_Call(c))
        made[c] += 1
        if made[c] == 5:
            p.claim_finished(_result(c))
            eta = p.eta()
            if eta is not None:
                seen.append((eta, 60.0 * (20 - n - 1)))
    # (Paced from the first answer: the first call's own minute is not seen, hence ~6% short.)
    assert [(round(eta), true) for eta, true in seen] == [(113, 120.0), (55, 60.0)]


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(3, "10s"), (44, "40s"), (89, "90s"), (90, "2 min"), (150, "2 min"), (3599, "60 min"),
     (3900, "1h05m")],
)  # fmt: skip
def test_time_left_reads_steadily(seconds: float, text: str) -> None:
    assert fmt_left(seconds) == text


class _Call:
    def __init__(self, claim: str) -> None:
        self.step = "verdict"
        self.claim = claim
        self.cached = False
        self.input_tokens = 10
        self.output_tokens = 1
        self.dollars = 0.0
        self.error: str | None = None


def _result(cid: str) -> Any:
    from veritrail.records import Claim, ClaimResult, Cost, ErrorStageStatus, Termination, Verdict

    return ClaimResult(
        claim=Claim(cid, f"claim {cid}"),
        subclaims=(),
        verdict=Verdict.FULLY_SUPPORTED,
        reasoning="",
        termination=Termination.ROOTS_ONLY,
        iterations=(),
        provenance=(),
        error_stages=(),
        error_stage_status=ErrorStageStatus.NOT_APPLICABLE,
        cost=Cost(lm_calls=1, input_tokens=10, output_tokens=1, dollars=0.0, nodes_read=1,
                  nodes_read_share=1.0),
    )  # fmt: skip
