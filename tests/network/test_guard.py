"""The egress guard (issue 29, docs/network.md): a networked sandbox reaches the internet
(here: the Debian mirror the machine's apt uses) but not the host, other sandboxes, or
private ranges unless the operator allows them. No traffic leaves this machine: the
hosts a sandbox is tried against are test servers on the host's bridge address, in
another sandbox, or in a network namespace the test creates; the private and link-local
ranges are checked by listing the rules, never by sending to them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from orsbox.sandbox import SandboxLimits, SandboxSpec
from orsbox.sandbox.docker import DockerBackend, DockerSandbox
from orsbox.sandbox.docker.config import DockerConfig
from orsbox.sandbox.docker.guarded import NETWORK, remove_if_unused
from orsbox.sandbox.host.egress import BLOCKED, chain_rules, chain_suffix, guard_rules
from tests.network.hosts import NamespaceHost, probe, serve_http
from tests.servers import ROOT, start_server

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

NETWORKED = SandboxLimits(network=True)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def backend() -> AsyncIterator[DockerBackend]:
    backend = DockerBackend("test-guard")
    yield backend
    await backend.close()


async def networked(backend: DockerBackend, image: str) -> DockerSandbox:
    return await backend.start(SandboxSpec(image=image, limits=NETWORKED))


async def gateway_of(backend: DockerBackend, sandbox: DockerSandbox) -> str:
    networks = (await backend.engine.inspect(sandbox.id))["NetworkSettings"]["Networks"]
    return networks[NETWORK]["Gateway"]


async def address_of(backend: DockerBackend, sandbox: DockerSandbox) -> str:
    networks = (await backend.engine.inspect(sandbox.id))["NetworkSettings"]["Networks"]
    return networks[NETWORK]["IPAddress"]


def forward_rules(server_id: str) -> list[str]:
    return chain_rules("iptables", f"ORSBOX-F-{chain_suffix(server_id)}")


async def test_sandbox_joins_the_guarded_bridge_and_reaches_the_mirror_by_name(
    backend: DockerBackend, base_image: str
) -> None:
    sandbox = await networked(backend, base_image)
    networks = (await backend.engine.inspect(sandbox.id))["NetworkSettings"]["Networks"]
    assert list(networks) == [NETWORK]  # not Docker's default bridge
    info = await backend.engine.run("inspect", backend.engine.client.api.inspect_network, NETWORK)
    assert info["Options"]["com.docker.network.bridge.enable_icc"] == "false"
    # DNS through Docker's embedded resolver, then the machine's own apt mirror.
    fetched = await sandbox.shell(probe("http://deb.debian.org/debian/dists/bookworm/Release"))
    assert fetched.output.strip() == "200", fetched.output


async def test_host_on_the_gateway_address_is_unreachable(
    backend: DockerBackend, base_image: str
) -> None:
    sandbox = await networked(backend, base_image)
    gateway = await gateway_of(backend, sandbox)
    with serve_http(gateway) as port:
        answer = await sandbox.shell(probe(f"http://{gateway}:{port}/"))
    assert answer.output.strip() == "timeout", answer.output  # dropped, not refused
    # The same probe reaches a server inside the sandbox: the probe itself works.
    await sandbox.shell("python3 -m http.server 8000 --bind 127.0.0.1 >/dev/null 2>&1 &")
    local = await sandbox.shell(probe("http://127.0.0.1:8000/", retries=20))
    assert local.output.strip() == "200", local.output


async def test_orsbox_server_on_all_addresses_is_unreachable_through_the_gateway(
    backend: DockerBackend, base_image: str, tmp_path: Path
) -> None:
    server = start_server(
        ["tests/fixture_envs/container_envs.py:Sandboxed"],
        tmp_path,
        host="0.0.0.0",
        allow_network=1,
        server_id="test-guard-server",
    )
    try:
        sandbox = await networked(backend, base_image)
        gateway = await gateway_of(backend, sandbox)
        port = server.url.rsplit(":", 1)[1]
        answer = await sandbox.shell(probe(f"http://{gateway}:{port}/health"))
        assert answer.output.strip() == "timeout", answer.output
        # The server is up and answers on the host: only the sandbox is kept off.
        assert subprocess.run(["curl", "-sf", f"{server.url}/health"]).returncode == 0
    finally:
        server.stop()


async def test_second_sandbox_is_unreachable(backend: DockerBackend, base_image: str) -> None:
    first, second = await networked(backend, base_image), await networked(backend, base_image)
    await second.shell("python3 -m http.server 8000 >/dev/null 2>&1 &")
    address = await address_of(backend, second)
    own = await second.shell(probe(f"http://{address}:8000/", retries=20))
    assert own.output.strip() == "200", own.output  # it listens on its bridge address
    answer = await first.shell(probe(f"http://{address}:8000/"))
    assert answer.output.strip() == "timeout", answer.output


@pytest.fixture
def namespace_host() -> Iterator[NamespaceHost]:
    with NamespaceHost.create() as host:
        yield host


# serial: every live server's guard applies on the shared bridge (orsbox.sandbox.host.egress), and another
# server's, allowing nothing private, would drop what this one allows
@pytest.mark.serial
async def test_private_address_reachable_only_when_allowed(
    base_image: str, namespace_host: NamespaceHost
) -> None:
    url = f"http://{namespace_host.address}:{namespace_host.port}/"
    for allow, expected in (([], "timeout"), ([namespace_host.cidr], "200")):
        backend = DockerBackend("test-guard-allow", config=DockerConfig(egress_allow=allow))
        try:
            sandbox = await networked(backend, base_image)
            answer = await sandbox.shell(probe(url))
            assert answer.output.strip() == expected, (allow, answer.output)
        finally:
            await backend.close()


async def test_rules_listed_while_running_and_gone_after_close(base_image: str) -> None:
    backend = DockerBackend("test-guard-rules")
    await backend.prepare_network()
    try:
        rules = forward_rules("test-guard-rules")
        for cidr in BLOCKED["iptables"]:
            assert f"-A ORSBOX-F-{chain_suffix('test-guard-rules')} -d {cidr} -j DROP" in rules
        jumps = [r for r in guard_rules() if r.owner["orsbox.server"] == "test-guard-rules"]
        assert {r.line.split()[1] for r in jumps} >= {"DOCKER-USER", "INPUT"}
    finally:
        await backend.close()
    assert forward_rules("test-guard-rules") == []
    assert not [r for r in guard_rules() if r.owner["orsbox.server"] == "test-guard-rules"]


@pytest.mark.serial  # any server's startup sweep removes dead servers' rules too
def test_rules_of_a_killed_server_are_removed_by_gc(tmp_path: Path) -> None:
    server = start_server(
        ["tests/fixture_envs/container_envs.py:Sandboxed"],
        tmp_path,
        allow_network=1,
        server_id="test-guard-killed",
    )
    server.stop(signal.SIGKILL)
    owned = [r for r in guard_rules() if r.owner["orsbox.server"] == "test-guard-killed"]
    try:
        assert len(owned) >= 2 and forward_rules("test-guard-killed")  # left behind
        done = subprocess.run(
            [sys.executable, "-m", "orsbox.cli.main", "gc"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert "egress guard rule" in done.stdout
        assert not [r for r in guard_rules() if r.owner["orsbox.server"] == "test-guard-killed"]
        assert forward_rules("test-guard-killed") == []
        assert "network(s) of dead servers removed" in done.stdout
    finally:
        from orsbox.sandbox.host.egress import EgressRules

        EgressRules("test-guard-killed", "unused", [], []).remove()


def test_doctor_proves_the_guard_and_says_what_it_blocks() -> None:
    env = {**os.environ, "COLUMNS": "300", "ORSBOX_EGRESS_ALLOW": "10.213.0.0/16"}
    done = subprocess.run(
        [sys.executable, "-m", "orsbox.cli.main", "doctor"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    guard = next(line for line in done.stdout.splitlines() if "egress guard" in line)
    assert guard.startswith("ok") and "cannot reach the host" in guard, done.stdout
    assert (
        "link-local (cloud metadata)" in guard and "10/8" in guard and "carrier-grade NAT" in guard
    )
    assert "allowed: 10.213.0.0/16" in guard
    assert "egress proxy (allow-lists): Squid" in done.stdout
    assert not [r for r in guard_rules() if r.owner["orsbox.server"].startswith("doctor-")]


@pytest.mark.serial  # it removes the engine's guarded network first, which others share
def test_servers_making_the_guarded_network_at_once_all_get_it() -> None:
    """Several servers of one engine starting together: each one's create either makes
    the network or finds it made (Docker may answer "same bridge name" to a racing one)."""
    import contextlib
    import threading

    import docker

    from orsbox.sandbox.docker.engine import Engine
    from orsbox.sandbox.docker.guarded import GuardedNetwork

    engine = Engine()
    networks = [GuardedNetwork(engine, f"test-guard-race-{n}", []) for n in range(6)]
    with contextlib.suppress(docker.errors.NotFound):
        remove_if_unused(engine, NETWORK)
    start, errors = threading.Barrier(len(networks)), []

    def ensure(network: GuardedNetwork) -> None:
        start.wait()
        try:
            network._ensure_network()
        except Exception as e:  # every one is reported
            errors.append(e)

    threads = [threading.Thread(target=ensure, args=(n,)) for n in networks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert errors == []
        found = engine.client.api.networks(names=[NETWORK])
        assert [n["Name"] for n in found if n["Name"] == NETWORK] == [NETWORK]
    finally:
        remove_if_unused(engine, NETWORK)
        engine.client.close()


@pytest.mark.serial  # it removes the engine's guarded network, which others share
async def test_a_start_whose_network_another_server_removed_starts_again(
    base_image: str,
) -> None:
    """Docker removes a network a created container waits to join, and that start then
    fails with "network ... not found" (a fresh-clone run's failure). A closing server
    no longer removes it while any container names it; one that checked just before the
    create and removes it just after is the race left, and the starter starts again."""
    backend = DockerBackend("test-guard-vanish")
    api = backend.engine.client.api
    create = backend.engine.create
    removed: list[str] = []

    async def create_then_lose_the_network(options: dict[str, object]) -> str:
        container_id = await create(options)
        if not removed:
            assert not remove_if_unused(backend.engine, NETWORK)  # it names the network
            api.remove_network(NETWORK)  # as a remove that checked a moment before would
            removed.append(container_id)
        return container_id

    backend.engine.create = create_then_lose_the_network  # type: ignore[method-assign]
    try:
        sandbox = await networked(backend, base_image)
        assert removed and sandbox.id != removed[0]
        assert NETWORK in (await backend.engine.inspect(sandbox.id))["NetworkSettings"]["Networks"]
        assert (await sandbox.exec("echo up")).output == "up\n"
        assert not api.containers(all=True, filters={"id": removed[0]})  # the lost one is gone
        await sandbox.close()
    finally:
        await backend.close()
