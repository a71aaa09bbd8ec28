"""What the sandbox conformance suite knows of the backends it runs on: their documented
differences, what a test does to their sandboxes from outside the contract, and the
engines the Docker backend is run on. Which backends it runs on, each declares in a
module of its own in tests/under_test/.

`fake` is host processes (`orsbox.sandbox.fake`). `runc` runs on the engine
tests/conftest.py's `docker_client` reaches. `runsc` (gVisor) runs on a private engine
(scripts/start-runsc-engine.sh, at `RUNSC_ENGINE`), `podman` on Podman's Docker-compatible
API (scripts/start-podman-engine.sh, at `PODMAN_ENGINE`), both through the same Docker
backend with only the engine address (and the runtime) changed. CI starts both and sets
ORSBOX_REQUIRE_RUNSC=1 and ORSBOX_REQUIRE_PODMAN=1, so a missing one fails there instead
of skipping.

Each is a `BackendUnderTest` (tests/under_test/: `UNDER_TEST`): the conformance tests
receive it as the `under_test` fixture and never ask which backend they have. A test
that cannot hold on one calls `under_test.differs(name)`, a skip naming the difference,
from the tables below; where a backend answers otherwise but still holds the contract, the test asks
`under_test.has(name)` for the named difference, or the backend's `capabilities`. What a
test does from outside (kill the sandbox as a crash would, read its process table, enter
it as an operator does) is the backend's `Outside`. A new backend joins with a module of
its own in tests/under_test/, declaring its differences and its `Outside` there.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import anyio
import docker
import pytest

from orsbox.sandbox import Sandbox, SandboxBackend
from orsbox.sandbox.capabilities import BackendCapabilities
from orsbox.sandbox.docker import DockerBackend
from orsbox.sandbox.docker.config import DockerConfig, is_gvisor
from orsbox.sandbox.docker.diagnosis import INITS  # noqa: F401 (re-exported)
from orsbox.sandbox.docker.engine import engine_product
from orsbox.sandbox.fake import MARKER, FakeSandbox, marked
from orsbox.sandbox.host import owner as L
from orsbox.sandbox.labels import label_value

RUNSC_ENGINE = "unix://" + os.environ.get("ORSBOX_RUNSC_SOCKET", "/var/run/orsbox-runsc.sock")
REQUIRE_RUNSC = "ORSBOX_REQUIRE_RUNSC"  # scripts/test.sh (CI) sets it to 1
PODMAN_ENGINE = "unix://" + os.environ.get("ORSBOX_PODMAN_SOCKET", "/var/run/orsbox-podman.sock")
REQUIRE_PODMAN = "ORSBOX_REQUIRE_PODMAN"  # scripts/test.sh (CI) sets it to 1
LOAD_TIMEOUT_S = 600  # an 843 MB image (orsbox/env-swe) takes ~20 s, far more under load

FAKE_DIFFERENCES = {
    "timeout-keeps-state": "a timeout restarts the fake's shell: its state is lost",
    "users": "the fake runs everything as the test's own user",
    "limits": "the fake enforces no limits (memory, pids, network, mounts, read-only root)",
    "paths": "the fake's absolute paths are the host's (no /workspace; /etc is the host's)",
    "shell-messages": "the fake's shell, killed or restarted under a running command, "
    "reports that the shell exited and a fresh one started",
    "sentinel": "the fake's shell protocol is its own (no __orsbox_p to forge)",
    "no-container": "the fake has no container to inspect from outside",
    "cleared-environment": "the fake finds a sandbox's processes by a marker in their "
    "environment: a process started with `env -i` escapes it",
    "image-steps": "the fake's image builds run no steps (RUN, COPY): they record the "
    "recipe and its labels, and fail only for a missing parent image",
}
PODMAN_DIFFERENCES = {
    "guarded-network": "Podman's networks do not hold the egress guard (sandboxes on one network "
    "reach each other; netavark's forwarding rules pass traffic before the guard's): a "
    "sandbox gets no network but the host's, one asking for more is refused at start",
}

# What holds under runc but not under gVisor, by name (docs/gvisor.md says more).
GVISOR_DIFFERENCES = {
    "network": "runsc runs with --network=none (gVisor issue 10704): no network at all",
    "oom": "gVisor has no OOM killer inside: one process allocating past the sandbox's "
    "memory fails its allocation (RLIMIT_AS) rather than being killed; processes that "
    "together pass it are killed by the agent's memory watch (largest first), and what "
    "it cannot free ends the whole sandbox (reported as OOM)",
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
    "read-only-mount-error": "writing to a read-only host mount fails with EACCES "
    "(permission denied) under gVisor, EROFS (read-only file system) under Linux",
    "proc-status": "gVisor's /proc/self/status has no NoNewPrivs line and shows gVisor's "
    "own capability set (the flag and the bound hold all the same)",
}

# What holds on the fake but not on an engine here: the machine reaches no registry.
ENGINE_DIFFERENCES = {
    "no-registry": "an engine pulls a missing parent image from a registry, and this "
    "machine reaches none (the fake fails such a build at once)",
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


@functools.cache
def _podman_answers() -> str | None:
    """None when Podman's service answers at `PODMAN_ENGINE`; else why not."""
    try:
        client = docker.DockerClient(base_url=PODMAN_ENGINE, timeout=10)
        try:
            version = client.version()
        finally:
            client.close()
    except docker.errors.DockerException as e:
        return f"no engine answers at {PODMAN_ENGINE}: {e}"
    if not engine_product(version).startswith("Podman"):
        return f"the engine at {PODMAN_ENGINE} is not Podman but {engine_product(version)}"
    return None


# backend -> (why its engine is missing, the script that starts it, the CI variable)
ENGINE_CHECKS = {
    "runsc": (_runsc_answers, "scripts/start-runsc-engine.sh", REQUIRE_RUNSC),
    "podman": (_podman_answers, "scripts/start-podman-engine.sh", REQUIRE_PODMAN),
}


def runtime_available(runtime: str) -> None:
    """Skip (fail in CI) when `runtime`'s engine is missing."""
    if runtime not in ENGINE_CHECKS:
        return
    check, script, required = ENGINE_CHECKS[runtime]
    why = check()
    if why is None:
        return
    message = f"{why} (start one with {script})"
    if os.environ.get(required) == "1":
        pytest.fail(message)
    pytest.skip(message)


def docker_backend(runtime: str, **options: object) -> DockerBackend:
    """A backend for `runtime`: gVisor's (`runsc`, or `runsc-ptrace`, which the runsc
    engine also offers for benchmarks but tests/under_test/ leaves out: CI runs systrap
    only)
    on the runsc engine, `podman` on Podman's, anything else on the main engine."""
    if is_gvisor(runtime):
        config = DockerConfig(engine=RUNSC_ENGINE, runtime=runtime)
        return DockerBackend(config=config, **options)  # type: ignore[arg-type]
    if runtime == "podman":
        return DockerBackend(config=DockerConfig(engine=PODMAN_ENGINE), **options)  # type: ignore[arg-type]
    return DockerBackend(**options)  # type: ignore[arg-type]


ENGINES = {"runsc": RUNSC_ENGINE, "podman": PODMAN_ENGINE}  # the private engines' addresses


def backend_setting(runtime: str) -> str:
    """`ORSBOX_BACKEND` for a server whose sandboxes run as `docker_backend(runtime)`'s."""
    config: dict[str, str] = {"type": "docker"}
    if runtime in ENGINES:
        config["engine"] = ENGINES[runtime]
    if is_gvisor(runtime):
        config["runtime"] = runtime
    return json.dumps(config)


def load_images(images: Sequence[str], runtimes: Sequence[str] | None = None) -> None:
    """Copy `images` from the main engine into the private engines of `runtimes` (None:
    every one) that answer (one `docker save`, loaded by each at once: an 843 MB image
    costs an engine 20-50 s here), as the start scripts copy orsbox/base; an engine that
    holds the same image already is skipped (one that does not answer: its tests skip
    or fail, naming it). `orsbox serve --engine` copies what it needs the same way
    (tests/adversarial/test_gvisor_from_nothing.py)."""
    for image in images:
        wanted = _image_id(None, image)
        missing = [
            address
            for address in _answering(runtimes)
            if _image_id(address, image) not in (wanted, wanted.removeprefix("sha256:"))
        ]
        if missing:
            _copy(image, missing)


def _answering(runtimes: Sequence[str] | None = None) -> list[str]:
    """The addresses of the private engines (of `runtimes`; None: all) that answer."""
    chosen = ENGINES if runtimes is None else runtimes
    return [ENGINES[r] for r in chosen if ENGINE_CHECKS[r][0]() is None]


def _copy(image: str, engines: Sequence[str]) -> None:
    """`docker save IMAGE`, its stream fed to a `docker load` on each of `engines`."""
    loads = [_loader(engine) for engine in engines]
    with subprocess.Popen(["docker", "save", image], stdout=subprocess.PIPE) as save:
        assert save.stdout is not None
        while chunk := save.stdout.read(1 << 20):
            for load in loads:
                with contextlib.suppress(BrokenPipeError):  # it failed: said below
                    load.stdin.write(chunk)  # type: ignore[union-attr]
    for load in loads:
        with contextlib.suppress(BrokenPipeError):
            load.stdin.close()  # type: ignore[union-attr]
        errors = load.stderr.read().decode(errors="replace")  # type: ignore[union-attr]
        assert load.wait(timeout=LOAD_TIMEOUT_S) == 0, f"{image}: {errors}"
    assert save.returncode == 0, f"docker save {image} failed"


def _loader(engine: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "DOCKER_HOST": engine}
    argv = ["docker", "load", "-q"]
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.DEVNULL, "stderr": subprocess.PIPE}
    return subprocess.Popen(argv, env=env, **pipes)  # type: ignore[call-overload]


def _image_id(engine: str | None, image: str) -> str:
    env = {**os.environ, "DOCKER_HOST": engine} if engine else None
    argv = ["docker", "image", "inspect", "--format", "{{.Id}}", image]
    return subprocess.run(argv, capture_output=True, text=True, env=env).stdout.strip()


def remove_images(images: Sequence[str]) -> None:
    """Remove `images` from every private engine that answers (what `load_images`
    copied for one test run); nothing on the main engine."""
    for address in _answering():
        client = docker.DockerClient(base_url=address, timeout=120)
        try:
            for image in images:
                with contextlib.suppress(docker.errors.ImageNotFound):
                    client.images.remove(image)
        finally:
            client.close()


def containers_of(runtime: str, server_id: str) -> list[str]:
    """The containers server `server_id` left on `runtime`'s engine (the no-leftover
    check of tests/conftest.py watches the main engine only)."""
    address = ENGINES.get(runtime)
    client = docker.DockerClient(base_url=address, timeout=60) if address else docker.from_env()
    try:
        mine = f"{L.SERVER}={label_value(server_id)}"
        found = client.api.containers(all=True, filters={"label": mine})
    finally:
        client.close()
    return [c["Id"] for c in found]


class Outside(Protocol):
    """What a test does to a backend's sandboxes from outside the contract."""

    async def kill(self, backend: SandboxBackend, sandbox: Sandbox) -> None:
        """End the sandbox as a crash or an operator would, behind the backend's back."""

    async def processes(self, sandbox: Sandbox) -> str:
        """The sandbox's process table (`ps -o pid,ppid,stat,args`, header included)."""

    async def enter(self, backend: SandboxBackend, sandbox: Sandbox, argv: list[str]) -> None:
        """Start `argv` in the sandbox as an operator's `docker exec` does (no parent in
        it); the difference `no-container` where there is nothing to enter."""

    async def execs(self, backend: SandboxBackend, sandbox: Sandbox) -> list[str]:
        """The engine's exec sessions into the sandbox (none for the guest: it is the
        container's own command)."""

    def left_behind(self, sandbox: Sandbox) -> list[int]:
        """Processes of a closed sandbox still running on the host (what the container
        engine would remove with the container)."""


class FakeOutside:
    """Host processes: the sandbox's are those carrying its marker."""

    async def kill(self, backend: SandboxBackend, sandbox: Sandbox) -> None:
        fake(sandbox).crash()

    async def processes(self, sandbox: Sandbox) -> str:
        pids = ",".join(map(str, marked(MARKER, sandbox.id)))
        return (await sandbox.exec(["ps", "-o", "pid,ppid,stat,args", "-p", pids])).output

    async def enter(self, backend: SandboxBackend, sandbox: Sandbox, argv: list[str]) -> None:
        raise AssertionError("the fake has no container to enter: differs('no-container')")

    async def execs(self, backend: SandboxBackend, sandbox: Sandbox) -> list[str]:
        raise AssertionError("the fake has no engine: differs('no-container')")

    def left_behind(self, sandbox: Sandbox) -> list[int]:
        return marked(MARKER, fake(sandbox).id)


class EngineOutside:
    """A container of an engine serving the Docker API (Docker, the runsc engine, Podman)."""

    async def kill(self, backend: SandboxBackend, sandbox: Sandbox) -> None:
        await engine_backend(backend).engine.kill(sandbox.id)

    async def processes(self, sandbox: Sandbox) -> str:
        return (await sandbox.exec(["ps", "-eo", "pid,ppid,stat,args"])).output

    async def enter(self, backend: SandboxBackend, sandbox: Sandbox, argv: list[str]) -> None:
        container = engine_backend(backend).engine.client.containers.get(sandbox.id)
        await anyio.to_thread.run_sync(lambda: container.exec_run(argv, detach=True))

    async def execs(self, backend: SandboxBackend, sandbox: Sandbox) -> list[str]:
        container = engine_backend(backend).engine.client.containers.get(sandbox.id)
        return list(container.attrs.get("ExecIDs") or [])

    def left_behind(self, sandbox: Sandbox) -> list[int]:
        return []  # the container is gone: tests/conftest.py's no_leftover_containers


def fake(sandbox: Sandbox) -> FakeSandbox:
    assert isinstance(sandbox, FakeSandbox), sandbox
    return sandbox


def engine_backend(backend: SandboxBackend) -> DockerBackend:
    assert isinstance(backend, DockerBackend), backend
    return backend


@dataclass(frozen=True)
class BackendUnderTest:
    """One backend of the conformance suite: `name` as tests/under_test/ declares it,
    `who` in messages, `make` (after `fixtures`, e.g. the base image built), the
    `differences` it documents, what tests do from `outside`, and `backend`, the type
    of the factory's backend it runs (`BackendConfig.tag`)."""

    name: str
    who: str
    make: Callable[[], SandboxBackend]
    differences: Mapping[str, str]
    outside: Outside
    backend: str
    fixtures: tuple[str, ...] = ("base_image",)
    marks: tuple[pytest.MarkDecorator, ...] = field(default=(pytest.mark.docker,))

    def has(self, name: str) -> bool:
        """Whether this backend documents the difference `name` (one some backend under
        test documents: a name no backend knows is a mistake)."""
        assert name in known_differences(), f"no difference {name!r}"
        return name in self.differences

    def differs(self, name: str) -> None:
        """Skip a test that cannot hold on this backend, naming the difference."""
        if self.has(name):
            pytest.skip(f"{self.who} difference {name!r}: {self.differences[name]}")

    async def processes(self, sandbox: Sandbox) -> str:
        return await self.outside.processes(sandbox)


@functools.cache
def known_differences() -> frozenset[str]:
    """Every difference a backend under test documents (tests/under_test/)."""
    from tests.under_test import UNDER_TEST

    return frozenset(name for entry in UNDER_TEST.values() for name in entry.differences)


def engine_maker(name: str) -> Callable[[], SandboxBackend]:
    """`make` for the Docker backend on `name`'s engine (skipped, or failed in CI, when
    that engine does not answer)."""

    def make() -> SandboxBackend:
        runtime_available(name)
        return docker_backend(name)

    return make


# What a Docker backend configured with runsc answers: no network, no switching; for the
# policy's unit tests.
GVISOR_CAPABILITIES = BackendCapabilities(
    isolated=True,
    network_modes=frozenset({False}),
    switch_network=False,
    runtime_choice=True,
    snapshots=True,
    runtime="runsc",
)
