"""`orsbox doctor`, `ps` and `gc` against the real engine."""

from __future__ import annotations

import contextlib
import os
import re
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from orsbox.sandbox.docker import DockerBackend
from orsbox.sandbox.docker.diagnosis import release_check
from orsbox.sandbox.host import owner as L
from orsbox.sandbox.procfs import process_start_time
from tests.environments.conftest import orsbox
from tests.runtimes import PODMAN_ENGINE, RUNSC_ENGINE, runtime_available


def test_doctor_finds_everything_in_order(bundled_images: None) -> None:
    done = orsbox("doctor")
    assert done.returncode == 0, done.stdout
    for line in (
        "ok   Docker engine: Docker ",
        "image orsbox/swe:latest: present",
        "memory limit: enforced",
        "pids limit: enforced",
        "cpu limit: enforced",
        "no network: interfaces: lo",
    ):
        assert line in done.stdout
    # Debian 12's docker.io (20.10.24) lacks a deadlock fix: a warning that does not fail
    release = docker.from_env().version()["Version"]
    known_bug = release_check(f"Docker {release}").warning
    mark = "warn" if known_bug else "ok  "
    assert f"{mark} engine release: Docker {release.split('+')[0]}" in done.stdout
    assert done.stdout.rstrip().endswith(", 1 warning." if known_bug else "All good.")


def owned_by(pid: int, start: str, label_format: str = "current") -> dict[str, str]:
    """Owner labels as this release writes them, or as the one before did ("former":
    the pid namespace as /proc names it, ids with colons and past 63 characters), which
    Kubernetes would refuse but the sweep must still find for one release."""
    labels = {
        L.ORSBOX: "1",
        L.SERVER: f"test-gc-{uuid.uuid4().hex[:8]}",
        L.SESSION: "s",
        L.HOST: socket.gethostname(),
        L.PID: str(pid),
        L.PID_START: start,
        "orsbox.environment": "gc-test",
    }
    if label_format == "former":
        labels[L.SERVER] = f"test-gc:{uuid.uuid4().hex}:" + "former-" * 8
        labels[L.SESSION] = f"{uuid.uuid4()}.cell:1"
        labels[L.PID_NAMESPACE] = os.readlink("/proc/self/ns/pid")  # `pid:[4026531836]`
    return labels


def orsbox_container_names(client: docker.DockerClient) -> set[str]:
    """From the engine's listing alone: `containers.list` inspects each container it
    lists, and one another test removes meanwhile fails it with a 404."""
    listed = client.api.containers(all=True, filters={"label": "orsbox=1"})
    return {name.lstrip("/") for c in listed for name in c["Names"]}


@pytest.fixture(params=["current", "former"])
def leftovers(
    request: pytest.FixtureRequest, docker_client: docker.DockerClient, base_image: str
) -> Iterator[dict[str, str]]:
    """Two sandboxes-to-be: one whose owner died, one whose owner (this process) runs,
    labelled in this release's format or the former one."""
    me, label_format = os.getpid(), request.param
    owners = {
        "dead": owned_by(2**22 + 17, "1", label_format),
        "alive": owned_by(me, process_start_time(me) or "", label_format),
    }
    names = {state: f"orsbox-test-{state}-{uuid.uuid4().hex[:8]}" for state in owners}
    for state, labels in owners.items():
        # the API's create alone: `containers.create` inspects what it made, and another
        # test's server sweeping the shared engine may have removed the dead one by then
        docker_client.api.create_container(
            base_image, ["sleep", "infinity"], labels=labels, name=names[state]
        )
    yield names
    for name in names.values():
        with contextlib.suppress(docker.errors.NotFound):
            docker_client.api.remove_container(name, force=True)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_the_startup_sweep_removes_what_dead_owners_left(
    leftovers: dict[str, str], docker_client: docker.DockerClient
) -> None:
    """What a server does as it starts (`SandboxBackend.sweep`), on either label format.
    (Another server's sweep on the shared engine may remove the dead one first.)"""
    backend = DockerBackend(f"test-sweep-{uuid.uuid4().hex[:8]}")
    try:
        owners = {info.name: info.owner for info in await backend.list(all_servers=True)}
        assert owners[leftovers["alive"]] == "alive"
        assert owners.get(leftovers["dead"], "dead") == "dead"
        await backend.sweep()
    finally:
        await backend.close()
    names = orsbox_container_names(docker_client)
    assert leftovers["dead"] not in names and leftovers["alive"] in names


@pytest.mark.serial  # every server's startup sweep removes the dead owner's container too
def test_ps_and_gc(leftovers: dict[str, str], docker_client: docker.DockerClient) -> None:
    listing = orsbox("ps", env={**os.environ, "COLUMNS": "250"}).stdout
    for state, name in leftovers.items():
        line = next(line for line in listing.splitlines() if name in line)
        assert "gc-test" in line and state in line

    done = orsbox("gc")
    assert done.returncode == 0, done.stderr
    assert f"removed {leftovers['dead']} (owner dead)" in done.stdout
    assert leftovers["alive"] not in done.stdout and "--all removes them" in done.stdout
    names = orsbox_container_names(docker_client)
    assert leftovers["dead"] not in names and leftovers["alive"] in names


def test_doctor_probes_each_runtime_the_engine_offers(bundled_images: None) -> None:
    """On the private runsc engine (tests/runtimes.py): runc shares the host's kernel,
    runsc shows gVisor's own. (Its other checks may fail there: it holds one image.)"""
    runtime_available("runsc")
    done = orsbox("doctor", env={**os.environ, "DOCKER_HOST": RUNSC_ENGINE, "COLUMNS": "250"})
    assert "runtimes: runc, runsc" in done.stdout, done.stdout
    assert f"runtime runc: shares the host's kernel {os.uname().release}" in done.stdout
    runsc = next(line for line in done.stdout.splitlines() if "runtime runsc:" in line)
    assert "its own kernel" in runsc and "gVisor" in runsc, runsc


def test_doctor_names_podman_and_that_it_ignores_runtimes() -> None:
    """On Podman's service (scripts/start-podman-engine.sh): doctor says which engine
    answers, sees Podman's init, and fails a configured runtime, which Podman's
    Docker-compatible API would silently not apply. (It holds only the base image.)"""
    runtime_available("podman")
    env = {**os.environ, "DOCKER_HOST": PODMAN_ENGINE, "COLUMNS": "250"}
    done = orsbox("doctor", env=env)
    assert re.search(rf"ok   Docker engine: Podman 4\.\d+\.\d+ at {PODMAN_ENGINE}", done.stdout)
    assert "ok   init process: PID 1 is podman-init" in done.stdout, done.stdout
    assert "ok   no network: interfaces: lo" in done.stdout
    assert "ok   runtimes: Podman runs every container under its default OCI runtime" in done.stdout
    # its networks do not hold the guard: none is offered, so none is proven
    assert "ok   egress guard: not needed: the backend gives sandboxes no network" in done.stdout
    gvisor = {**env, "ORSBOX_BACKEND": '{"type": "docker", "runtime": "runsc"}'}
    done = orsbox("doctor", env=gvisor)
    assert done.returncode == 1
    assert "FAIL runtime runsc: configured, but ignored" in done.stdout, done.stdout


def table_row(stdout: str, name: str) -> list[str]:
    """The columns after `name` in doctor's table of host limits."""
    line = next(line for line in stdout.splitlines() if line.strip().startswith(name + " "))
    return line.strip()[len(name) :].split()


def test_doctor_tables_the_host_limits_with_their_real_values(bundled_images: None) -> None:
    """The table's values are this host's (read here from /proc, not known to the test
    beforehand), its headroom their arithmetic, and a limit is named as the first."""
    done = orsbox("doctor", env={**os.environ, "COLUMNS": "250"})
    assert "host limits that live episodes use" in done.stdout, done.stdout
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    value, in_use, cost, more = table_row(done.stdout, "kernel.pid_max")
    assert int(value) == pid_max and int(in_use) > 0 and float(cost) > 10
    # the cost is printed to 4 digits: its floor may differ by one from the exact one
    assert abs(int(more) - (pid_max - int(in_use)) // float(cost)) <= 1
    dockerd = Path("/var/run/docker.pid").read_text().split()[0]
    limits = Path(f"/proc/{dockerd}/limits").read_text().splitlines()
    soft = next(line.split()[3] for line in limits if line.startswith("Max open files"))
    value, in_use, cost, more = table_row(done.stdout, "dockerd open files")
    assert value == soft and int(in_use) > 0
    room = next(line for line in done.stdout.splitlines() if "room for 1000 more episodes" in line)
    assert re.search(
        r"(ok  |FAIL) room for 1000 more episodes: \S.* stops them first, at \d+", room
    )
