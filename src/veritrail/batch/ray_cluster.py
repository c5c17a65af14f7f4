"""Reaching Ray for `--executor ray`: importing it, joining a cluster or starting a local Ray, and
a local Ray that ends with its driver.

* **Joining:** a cluster to join (`--ray-address`, `RAY_ADDRESS`, `auto`) is reached first,
  before any model call (`RayUnreachableError`, exit 3, within `PROBE_SECONDS`, instead of Ray's
  retries for many minutes).
* **A local Ray** started here ends with the driver, even after `kill -9`: a watchdog process
  (`Watchdog`, running `_WATCHDOG_SOURCE` with `python -c`) ends what Ray's own fate-sharing
  leaves running (the raylet's agents).

`ray` is an optional dependency (`pip install 'veritrail[ray]'`); it is imported only here
(`import_ray`), as is psutil (the `ray` extra's) for the watchdog.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import InputProblem, RunFailure
from ..redaction import redact


class RayUnavailableError(InputProblem, RuntimeError):
    """`ray` is not installed, or a local Ray cannot be started (exit 2)."""


class RayUnreachableError(RunFailure, RuntimeError):
    """The Ray cluster named (`--ray-address`, `RAY_ADDRESS`, or `auto`'s latest cluster)
    cannot be reached: found up front, before any model call, instead of waiting for Ray's own
    retries, which go on for many minutes (exit 3: the run could not go on)."""


PROBE_SECONDS = 10.0
"""How long the driver tries to open a connection to the cluster's address before it gives up."""


def import_ray() -> Any:
    """The `ray` module; `RayUnavailableError` saying which extra to install without it."""
    try:
        import ray
    except ImportError:
        raise RayUnavailableError(
            "--executor ray needs Ray: pip install 'veritrail[ray]' (or pip install ray)"
        ) from None
    return ray


def connect_ray(address: str | None, num_cpus: int | None) -> tuple[bool, Watchdog | None]:
    """Connect to (or start) Ray: (True when this call started or joined it, the watchdog of a
    local Ray it started, if any). (False, None) when this process is connected already.

    A cluster to join is reached up front (`RayUnreachableError`, within `PROBE_SECONDS`).
    A local Ray started here gets a watchdog (`Watchdog`) that ends its processes if this
    process dies without shutting it down (`kill -9`)."""
    ray = import_ray()
    if ray.is_initialized():
        return False, None
    kwargs: dict[str, Any] = {"include_dashboard": False, "logging_level": "WARNING"}
    if address:
        kwargs["address"] = address
    elif num_cpus is not None:
        kwargs["num_cpus"] = num_cpus
    target = _cluster_address(address)
    if target is not None:
        _probe(target)
    before = _child_pids()
    try:
        ray.init(**kwargs)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        if target is not None:
            raise RayUnreachableError(
                f"cannot reach the Ray cluster at {target.shown}: {redact(str(exc))}"
            ) from None
        raise RayUnavailableError(f"cannot start Ray: {redact(str(exc))}") from None
    watchdog = None
    if target is None:
        started = sorted(_child_pids() - before)
        if started:  # none: `ray.init` joined a cluster it found itself
            watchdog = Watchdog.start(ray, started)
    return True, watchdog


# -- reaching a cluster, and a local Ray that dies with its driver ---------------------------------


@dataclass(frozen=True, slots=True)
class _Target:
    """The address of the cluster `ray.init` would join."""

    host: str
    port: int
    shown: str
    """The address as the user gave it (and as Ray resolves it, when that differs)."""


def _parse_address(hostport: str, shown: str) -> _Target:
    host, sep, port = hostport.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise RayUnavailableError(f"Ray address {shown!r} is not host:port (or ray://host:port)")
    return _Target(host.strip("[]"), int(port), shown)


def _cluster_address(address: str | None) -> _Target | None:
    """Where `ray.init(address=address)` would connect; None when it would start a local Ray.

    `RAY_ADDRESS` and `auto` (the latest `ray start` cluster) are resolved as Ray resolves them
    (`ray._private.services.canonicalize_bootstrap_address`; when this Ray has no such function,
    only an address given as such is probed)."""
    given = address or os.environ.get("RAY_ADDRESS") or None
    if given is not None and given.startswith("ray://"):
        return _parse_address(given[len("ray://") :], given)
    try:
        services: Any = __import__("ray._private.services", fromlist=["services"])
        canonicalize = services.canonicalize_bootstrap_address
    except (ImportError, AttributeError):
        canonicalize = None
    if canonicalize is None:
        if given is None or given == "auto":
            return None
        return _parse_address(given, given)
    try:
        found = canonicalize(address)
    except ConnectionError as exc:  # `auto`, and no cluster is running
        raise RayUnreachableError(f"cannot reach a Ray cluster ({given}): {exc}") from None
    except ValueError as exc:
        raise RayUnavailableError(f"Ray address {given!r}: {exc}") from None
    if not found:
        return None
    found = str(found)
    shown = found if given in (None, "auto", found) else f"{given} ({found})"
    if given is None:
        shown += " (the latest cluster started with `ray start`)"
    return _parse_address(found, shown)


def _probe(target: _Target) -> None:
    """Open (and close) a connection to the cluster's address; `RayUnreachableError` naming the
    cause when that fails. A refused port or an unknown host is seen at once, a host that does
    not answer after `PROBE_SECONDS`: `ray.init` would keep retrying for many minutes."""
    import socket

    try:
        with socket.create_connection((target.host, target.port), timeout=PROBE_SECONDS):
            pass
    except OSError as exc:
        why = (
            f"no answer within {PROBE_SECONDS:.0f} s"
            if isinstance(exc, TimeoutError)
            else (exc.strerror or str(exc) or type(exc).__name__)
        )
        raise RayUnreachableError(
            f"cannot reach the Ray cluster at {target.shown}: {why}. Is it running (`ray status` "
            "on its head node)? Check --ray-address (or RAY_ADDRESS)"
        ) from None


def _child_pids() -> set[int]:
    """The process ids of this process's children (psutil is in the `ray` extra)."""
    import psutil

    try:
        return {int(p.pid) for p in psutil.Process().children()}
    except psutil.Error:  # only a guard's input: without it there is no guard
        return set()


# Runs as `python -c` beside the driver (argv: the read end of a pipe from the driver, the pids
# Ray started). Ray kills the processes the driver started when the
# driver dies (`PR_SET_PDEATHSIG`), but not what those started in turn: the raylet's agents
# (`ray::DashboardAgent`, `ray::RuntimeEnvAgent`) wait about a minute for the dead GCS before
# they exit. The watchdog keeps a list of Ray's processes and their descendants (each second);
# when the driver is gone (the pipe ends: the driver closed it after `ray.shutdown`, or died, even
# by `kill -9`; or the watchdog's parent changed), it ends what is left of them: SIGTERM, then
# SIGKILL after 5 s. psutil's process objects are checked against pid reuse.
_WATCHDOG_SOURCE = """
import os, signal, sys, threading
signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: outlive it
import psutil  # declared by the `ray` extra
fd = int(sys.argv[1])
roots = [int(x) for x in sys.argv[2:]]
parent = os.getppid()
seen = {}
def look():
    for pid in roots:
        try:
            top = psutil.Process(pid)
            for p in [top, *top.children(recursive=True)]:
                seen.setdefault(p.pid, p)
        except psutil.Error:
            pass
gone = threading.Event()
def wait():
    try:
        while os.read(fd, 1):
            pass
    finally:
        gone.set()
threading.Thread(target=wait, daemon=True).start()
look()
while not gone.wait(1.0) and os.getppid() == parent:
    look()
left = []
for p in seen.values():
    try:
        if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
            p.terminate()
            left.append(p)
    except psutil.Error:
        pass
_, alive = psutil.wait_procs(left, timeout=5)
for p in alive:
    try:
        p.kill()
    except psutil.Error:
        pass
"""


class Watchdog:
    """The watchdog process of a local Ray this driver started (see `_WATCHDOG_SOURCE`)."""

    def __init__(self, proc: subprocess.Popen[bytes], fd: int) -> None:
        self._proc = proc
        self._fd: int | None = fd

    @classmethod
    def start(cls, ray: Any, pids: Sequence[int]) -> Watchdog | None:
        """Watch the processes `pids` (what `ray.init` started) and their descendants; None
        where there is no watchdog (not POSIX, or it cannot be started: Ray's own cleanup
        then applies)."""
        if os.name != "posix":
            return None
        r, w = os.pipe()  # not inherited by what this process starts later (close-on-exec)
        try:
            proc = subprocess.Popen(
                [sys.executable, "-c", _WATCHDOG_SOURCE, str(r), *map(str, pids)],
                pass_fds=(r,),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        except OSError:
            os.close(w)
            return None
        finally:
            os.close(r)
        return cls(proc, w)

    def stop(self) -> None:
        """After `ray.shutdown()`: let the watchdog end what is left, and wait for it."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
        try:
            self._proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
