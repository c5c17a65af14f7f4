"""A local Ray started by `veritrail batch` does not outlive it (issue 29, item 10).

Ray's `kill -9` fate-sharing covers the processes the driver starts itself (GCS, raylet, ...), not
the agents the raylet starts (`ray::DashboardAgent`, `ray::RuntimeEnvAgent`): they used to stay
alive as orphans after the driver was killed. The driver is a subprocess here, killed with
SIGKILL while a claim's model call is held by the fake server; the test then waits, bounded and
polling, until no process of that Ray session is left. The session's processes are found by the
driver's process group (the subprocess leads its own) and by the session directory named on
their command lines or in their open files, never by name: other Ray sessions on the machine are
not touched.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from batchkit import HeldResponder, recorded_ids, write_jobs

from veritrail.testing.fake_openai_server import FakeOpenAIServer

pytest.importorskip("ray")
psutil = pytest.importorskip("psutil")

pytestmark = pytest.mark.heavy

ENV = {"OPENAI_API_KEY": "sk-test", "VERITRAIL_PRICES": "", "VERITRAIL_CACHE": "0"}


def _session_dirs(driver: int) -> set[str]:
    """The Ray session directories named on the command lines of the driver's descendants."""
    found: set[str] = set()
    try:
        kids = psutil.Process(driver).children(recursive=True)
    except psutil.Error:
        return found
    for p in kids:
        try:
            for arg in p.cmdline():
                i = arg.find("/session_")
                if i >= 0:
                    rest = arg[i + 1 :]
                    found.add(arg[:i] + "/" + rest.split("/", 1)[0])
        except psutil.Error:
            continue
    return found


def _of_session(pgid: int, sessions: set[str]) -> list[str]:
    """Processes still alive in the driver's process group or using one of `sessions`."""
    left = []
    for p in psutil.process_iter(["pid", "name"]):
        try:
            if p.pid == os.getpid() or p.status() == psutil.STATUS_ZOMBIE:
                continue
            mine = os.getpgid(p.pid) == pgid
            if not mine and sessions:
                text = " ".join(p.cmdline())
                files = [f.path for f in p.open_files()]
                mine = any(s in text or any(f.startswith(s) for f in files) for s in sessions)
            if mine:
                left.append(f"{p.pid} {p.info['name']}")
        except (psutil.Error, ProcessLookupError, PermissionError):
            continue
    return left


def test_a_killed_driver_leaves_no_ray_process_behind(tmp_path: Path) -> None:
    manifest = write_jobs(tmp_path, 1, 3)
    held = HeldResponder("Item 9")  # the job's last claim waits: the batch is mid-run
    with FakeOpenAIServer(responder=held) as srv:
        args = [
            sys.executable, "-c", "from veritrail.cli.main import main; main()",
            "batch", str(manifest), "--executor", "ray", "--workers", "1",
            "--model", "openai/fake", "--base-url", srv.base_url, "--quiet",
        ]  # fmt: skip
        env = {**os.environ, **ENV}
        env.pop("RAY_ADDRESS", None)  # a local Ray, started by veritrail
        proc = subprocess.Popen(
            args,
            cwd=tmp_path,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its own process group: how its Ray processes are found
        )
        sessions: set[str] = set()
        try:
            deadline = time.monotonic() + 180
            # Every claim but the held one is recorded: the workers are up and running.
            while sum(recorded_ids(tmp_path / "runs").values()) < 2:
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                assert time.monotonic() < deadline, "the batch did not get going"
                time.sleep(0.1)
            sessions = _session_dirs(proc.pid)
            assert sessions, "no Ray session found under the driver"
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        finally:
            held.release()
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        # Ray's own agents give up on a dead raylet only after about a minute; veritrail's
        # watchdog ends them at once. Poll, bounded well below that minute.
        deadline = time.monotonic() + 30
        left = _of_session(proc.pid, sessions)
        while left and time.monotonic() < deadline:
            time.sleep(0.25)
            left = _of_session(proc.pid, sessions)
    assert not left, f"left running after the driver was killed: {left}"
