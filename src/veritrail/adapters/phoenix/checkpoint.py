"""The checkpoint file of `veritrail watch`: which traces are finished, and where to look next.

One JSON file, replaced atomically (a complete copy written beside it, fsync'ed, then renamed:
`veritrail.textio.atomic_write_text`) each time a trace is finished, so `kill -9` at any moment
leaves either the old or the new file, never half of one. It holds:

* ``traces``: every trace taken so far, by trace id: ``annotated`` (verified and written back,
  with its run directory) or ``skipped`` (with the reason: no generating span, no valid DAG, ...).
  A restarted watcher never takes these again;
* ``watermark``: the start time of the oldest trace not yet finished (or of the newest one seen
  when all are), so a restart lists traces from there (minus the look-back) and misses none;
* the watch's identity (project, sample rate, filters): a checkpoint is refused by a watch with
  another identity, since "finished" would not mean the same.

Traces the sample or the filters leave out are not recorded: sampling is a pure function of the
trace id (`sampling`), so they are left out again after a restart.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ...errors import InputProblem
from ...redaction import redact_obj
from ...textio import InputError, atomic_write_text, fsync_dir, read_input_text

FORMAT = "veritrail-watch-checkpoint"
VERSION = 1


class CheckpointError(InputProblem):
    """The checkpoint file cannot be used (unreadable, another format, another watch)."""


@dataclass
class Checkpoint:
    """The watch's durable state (see the module docstring); `save()` after every change."""

    path: Path
    identity: Mapping[str, Any]
    traces: dict[str, dict[str, Any]] = field(default_factory=dict)
    watermark: str | None = None

    @classmethod
    def open(cls, path: str | Path, identity: Mapping[str, Any]) -> Checkpoint:
        """Load `path`, or start an empty checkpoint there (written at the first `save`)."""
        p = Path(path)
        if not p.exists():
            if not p.parent.is_dir():
                raise CheckpointError(f"checkpoint {p}: the folder {p.parent} does not exist")
            return cls(p, dict(identity))
        try:
            doc = json.loads(read_input_text(p, "checkpoint file"))
        except InputError as exc:
            raise CheckpointError(str(exc)) from None
        except ValueError as exc:
            raise CheckpointError(f"checkpoint {p}: not JSON ({exc})") from None
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise CheckpointError(f"checkpoint {p}: not a veritrail watch checkpoint")
        if doc.get("version") != VERSION:
            raise CheckpointError(f"checkpoint {p}: version {doc.get('version')} is not {VERSION}")
        _check_types(p, doc)
        theirs = doc.get("watch") or {}
        differ = sorted(k for k in identity if theirs.get(k) != identity[k])
        if differ:
            shown = ", ".join(f"{k} {theirs.get(k)!r} (now {identity[k]!r})" for k in differ)
            raise CheckpointError(
                f"checkpoint {p} belongs to another watch: {shown}; give another --checkpoint"
            )
        return cls(p, dict(identity), dict(doc.get("traces") or {}), doc.get("watermark"))

    def done(self, trace_id: str) -> bool:
        """Whether the trace is finished (annotated or skipped)."""
        return trace_id in self.traces

    def record(self, trace_id: str, status: str, **info: Any) -> None:
        """Mark a trace finished and save at once."""
        self.traces[trace_id] = {
            "status": status,
            "at": datetime.now(UTC).isoformat(timespec="seconds"),
            **info,
        }
        self.save()

    def move_watermark(self, watermark: str | None, forget_before: str | None = None) -> None:
        """Set the watermark and drop finished traces that started before `forget_before`
        (they are never listed again); saved with the next `record` or `save`."""
        self.watermark = watermark
        if forget_before is not None:
            limit = _time(forget_before)
            self.traces = {
                t: v
                for t, v in self.traces.items()
                if not v.get("start_time") or _time(str(v["start_time"])) >= limit
            }

    def save(self) -> None:
        """Write the file atomically (and the folder entry durably)."""
        doc = {
            "format": FORMAT,
            "version": VERSION,
            "watch": dict(self.identity),
            "watermark": self.watermark,
            "traces": self.traces,
        }
        atomic_write_text(self.path, json.dumps(redact_obj(doc), indent=1, ensure_ascii=False))
        fsync_dir(self.path.parent)

    def counts(self, statuses: Sequence[str] = ("annotated", "skipped")) -> dict[str, int]:
        """Finished traces by status."""
        return {s: sum(1 for v in self.traces.values() if v.get("status") == s) for s in statuses}


def _check_types(p: Path, doc: Mapping[str, Any]) -> None:
    """Refuse (`CheckpointError`, exit 2) a checkpoint whose fields have the wrong types, before
    anything reads them: a hand-edited or foreign file must not fail later with a traceback in
    the middle of a poll. (Refusing, not starting afresh: starting afresh would verify and
    annotate again every trace the file says is finished.)"""

    def bad(field: str, why: str) -> CheckpointError:
        return CheckpointError(f"checkpoint {p}: {field!r} {why}; fix or delete the file")

    if not isinstance(doc.get("watch") or {}, dict):
        raise bad("watch", "is not an object")
    watermark = doc.get("watermark")
    if watermark is not None and not (isinstance(watermark, str) and _is_time(watermark)):
        raise bad("watermark", "is not an ISO 8601 time")
    traces = doc.get("traces") or {}
    if not isinstance(traces, dict):
        raise bad("traces", "is not an object")
    for trace_id, entry in traces.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("status"), str):
            raise bad("traces", f"entry {trace_id!r} is not an object with a status")
        start = entry.get("start_time")
        if start is not None and not (isinstance(start, str) and _is_time(start)):
            raise bad("traces", f"entry {trace_id!r} has a start_time that is not a time")


def _is_time(text: str) -> bool:
    try:
        _time(text)
    except ValueError:
        return False
    return True


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


__all__ = ["FORMAT", "VERSION", "Checkpoint", "CheckpointError"]
