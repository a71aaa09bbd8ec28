"""The runtimes the sandbox tests run under, and their documented differences.

runc runs on the engine tests/conftest.py's `docker_client` reaches. runsc (gVisor)
runs on a private engine (scripts/start-runsc-engine.sh, at `RUNSC_ENGINE`): CI starts
it and sets ORSBOX_REQUIRE_RUNSC=1, so a missing one fails there instead of skipping.
"""

from __future__ import annotations

import functools
import os

import docker
import pytest

from orsbox.sandbox import DockerConfig
from orsbox.sandbox.docker import DockerBackend

RUNTIMES = ["runc", "runsc"]
RUNSC_ENGINE = "unix://" + os.environ.get("ORSBOX_RUNSC_SOCKET", "/var/run/orsbox-runsc.sock")
REQUIRE_RUNSC = "ORSBOX_REQUIRE_RUNSC"  # scripts/test.sh (CI) sets it to 1

# What holds under runc but not under gVisor, by name (docs/gvisor.md says more).
GVISOR_DIFFERENCES = {
    "network": "runsc runs with --network=none (gVisor issue 10704): no network at all",
    "oom": "gVisor has no OOM killer inside: one process allocating past the sandbox's "
    "memory fails its allocation (RLIMIT_AS) rather than being killed, and processes "
    "that together run out of memory end the whole sandbox (reported as OOM)",
    "docker-view": "docker sees gVisor's host processes (docker top, exec ids), not the guest's",
    "host-mounts": "the private runsc engine's tests mount no host folders",
    "privileged": "privileged mode and host networking are not offered under gVisor",
    "fork-bomb-memory": "RLIMIT_NPROC stops a fork bomb at the pids limit, but every guest "
    "process also costs gVisor host memory: with a small memory limit the sandbox may "
    "run out of memory first (reported as OOM)",
    "sighup-to-shell-group": "gVisor sends SIGHUP (and SIGCONT) to a process group that has "
    "a stopped member whenever one of its processes exits (Linux only when the group "
    "becomes orphaned): when a timeout sweep has the shell or a command's processes "
    "stopped (killing a setsid'd process, a fork loop, a bomb) the shell survives, it "
    "catches HUP, but its earlier background jobs that do not ignore SIGHUP end",
}


def runsc_engine() -> str:
    return RUNSC_ENGINE


@functools.cache
def _runsc_answers() -> str | None:
    """None when the runsc engine answers and has runsc; else why not."""
    try:
        client = docker.DockerClient(base_url=RUNSC_ENGINE, timeout=10)
        try:
            runtimes = client.info().get("Runtimes", {})
        finally:
            client.close()
    except docker.errors.DockerException as e:
        return f"no engine answers at {RUNSC_ENGINE}: {e}"
    if "runsc" not in runtimes:
        return f"the engine at {RUNSC_ENGINE} has no runsc runtime"
    return None


def runtime_available(runtime: str) -> None:
    """Skip (fail in CI) when `runtime`'s engine is missing."""
    if runtime != "runsc":
        return
    why = _runsc_answers()
    if why is None:
        return
    message = f"{why} (start one with scripts/start-runsc-engine.sh)"
    if os.environ.get(REQUIRE_RUNSC) == "1":
        pytest.fail(message)
    pytest.skip(message)


def docker_backend(runtime: str, **options: object) -> DockerBackend:
    if runtime == "runsc":
        config = DockerConfig(engine=RUNSC_ENGINE, runtime="runsc")
        return DockerBackend(config=config, **options)  # type: ignore[arg-type]
    return DockerBackend(**options)  # type: ignore[arg-type]


def differs(backend: DockerBackend, name: str) -> None:
    """Skip a test that cannot hold under this backend's runtime, naming the difference."""
    if backend.config.runtime == "runsc":
        pytest.skip(f"gVisor difference {name!r}: {GVISOR_DIFFERENCES[name]}")
