"""A batch extracts the claims of all its jobs at once (issue 38, item 5), under its one budget:
one job after the other, 200 answers spent minutes in extraction round trips before any claim
was verified."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from test_startup_scale import check_layout_manifest

from veritrail.batch import load_manifest, open_states, prepare_jobs
from veritrail.testing import FakeOpenAIServer
from veritrail.testing.overlap import loopback_env, responder


def test_jobs_extract_their_claims_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every job's claim extraction is in flight together (under the batch's budget), not one job
    after the other: with the server holding its replies, requests of every job arrive."""
    n = 4
    manifest = check_layout_manifest(tmp_path / "m", n)
    monkeypatch.chdir(tmp_path)
    with FakeOpenAIServer(responder=responder) as srv:
        for k, v in loopback_env(srv).items():
            monkeypatch.setenv(k, v)
        jobs = prepare_jobs(
            manifest,
            load_manifest(manifest),
            flags={"runs_dir": str(tmp_path / "runs")},
            config_path=None,
            html=False,
        )
        srv.hold()
        got: list[object] = []
        t = threading.Thread(target=lambda: got.append(open_states(jobs, concurrency=16)))
        t.start()
        try:
            # Requests arrive and wait: one job after the other, only the first job's would.
            seen: set[int] = set()
            while seen != set(range(n)) and srv.wait_for_requests(srv.count + 1, timeout=60):
                seen = {
                    k
                    for r in srv.requests
                    for k in range(n)
                    if f"The orchard {k} grows" in json.dumps(r["messages"])
                }
        finally:
            srv.release()
            t.join(timeout=120)
    assert seen == set(range(n))
    (states,) = got
    assert isinstance(states, list) and [s.job.id for s in states] == [j.id for j in jobs]
    for s in states:
        assert s.store.claims  # every job's claims were extracted
        s.store.unlock()
