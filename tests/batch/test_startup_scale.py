"""CI guard for a batch's start-up (issue 38, item 5): the work before the first model call grows
linearly with the jobs.

`veritrail batch` checks every job before any call (`batch.prepare_jobs`: settings, DAG, the run's
identity, then every output and run directory against every input and output of the manifest).
Compared pair by pair that check was quadratic: at 200 check-layout jobs the first model call came
31-65 s after start (524,402 `same_file` calls). CPU time at 50 and 200 jobs, as a ratio
(`scalekit.assert_linear`: linear 4, quadratic 16, bound 8), so machine load cannot flake it.
The full-size figure is in benchmarks/README.md (`benchmarks/bench_batch_startup.py`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from scalekit import assert_linear
from veritrail.batch import load_manifest, prepare_jobs
from veritrail.batch.jobs import _FileIndex
from veritrail.dag import Dag, save_dag
from veritrail.run.inputs import same_file


def check_layout_manifest(root: Path, n: int) -> Path:
    """`n` jobs as `veritrail check` lays them out (source paragraphs -> the answer), claims to be
    extracted (`"claims": null`), a report each."""
    root.mkdir(parents=True)
    lines = []
    for k in range(n):
        recs: list[dict[str, object]] = [
            {"id": f"s{p}", "text": f"Paragraph {p} of answer {k}. The orchard grows pear {p}."}
            for p in range(3)
        ]
        recs.append(
            {
                "id": "answer",
                "text": " ".join(f"The orchard {k} grows pear {i}." for i in range(5)),
                "sources": ["s0", "s1", "s2"],
            }
        )
        save_dag(Dag.from_records(recs), root / f"dag{k}.json")
        lines.append(
            json.dumps(
                {"id": f"j{k}", "dag": f"dag{k}.json", "claims": None, "out": f"out/j{k}.json"}
            )
        )
    manifest = root / "manifest.jsonl"
    manifest.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return manifest


def test_jobs_are_prepared_in_linear_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("VERITRAIL_MODEL", "openai/loopback")
    monkeypatch.setenv("VERITRAIL_BASE_URL", "http://127.0.0.1:9/v1")  # never called
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-loopback")
    monkeypatch.setenv("VERITRAIL_CACHE", "0")

    def make(n: int) -> Callable[[], object]:
        manifest = check_layout_manifest(tmp_path / f"m{n}", n)
        entries = load_manifest(manifest)

        def work() -> object:
            jobs = prepare_jobs(
                manifest,
                entries,
                flags={"runs_dir": str(tmp_path / f"runs{n}")},
                config_path=None,
                html=True,
                summary_dir=tmp_path / f"m{n}",
            )
            assert len(jobs) == n
            return jobs

        work()  # the model's imports and the code fingerprint, once, before timing
        return work

    assert_linear("prepare_jobs of check-layout jobs", make, 50, repeat=2)


def test_the_file_index_agrees_with_same_file(tmp_path: Path) -> None:
    a = tmp_path / "a.json"
    a.write_text("{}")
    (tmp_path / "d").mkdir()
    link = tmp_path / "link.json"
    link.symlink_to(a)
    hard = tmp_path / "d" / "hard.json"
    hard.hardlink_to(a)
    paths = [
        a,
        tmp_path / "d" / ".." / "a.json",
        link,
        hard,
        tmp_path / "missing.json",
        tmp_path / "d" / ".." / "missing.json",
        tmp_path / "d",
    ]
    index = _FileIndex()
    for p in paths:
        index.add(p)
    for p in paths:
        assert index.matches(p) == [i for i, q in enumerate(paths) if same_file(p, q)], p
