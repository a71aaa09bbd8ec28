"""Allow-listed networks (docs/network.md): a sandbox whose only way out is its own
squid. The allowed and the refused host are both test servers on this machine: names
resolved to loopback through the proxy's hosts file, which the operator's
`egress_allow` must name (the proxy runs on the host, so loopback is "the host's own")."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from orsbox.sandbox import SandboxLimits, SandboxSpec
from orsbox.sandbox.docker import DockerBackend, DockerSandbox
from orsbox.sandbox.docker.config import DockerConfig
from orsbox.sandbox.host.egress import chain_rules
from tests.network.hosts import probe, serve_http
from tests.servers import ROOT

# serial: it counts every egress proxy on the host (pgrep) and runs `orsbox gc`
pytestmark = [pytest.mark.docker, pytest.mark.anyio, pytest.mark.serial]

ALLOWED, REFUSED = "allowed.orsbox.test", "refused.orsbox.test"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def local_port() -> Iterator[int]:
    with serve_http("127.0.0.1") as port:
        yield port


@pytest.fixture
def hosts_file(tmp_path: Path) -> str:
    path = tmp_path / "hosts"
    path.write_text(f"127.0.0.1 {ALLOWED} {REFUSED}\n")
    return str(path)


async def backend_for(hosts_file: str, allow: list[str]) -> DockerBackend:
    config = DockerConfig(egress_allow=allow, egress_proxy_hosts_file=hosts_file)
    return DockerBackend("test-allowlist", config=config)


@pytest.fixture
async def backend(hosts_file: str) -> AsyncIterator[DockerBackend]:
    backend = await backend_for(hosts_file, ["127.0.0.1/32"])
    yield backend
    await backend.close()
    assert_nothing_left(backend)


def assert_nothing_left(backend: DockerBackend) -> None:
    assert chain_rules("iptables", backend.allowlist.chain) == []
    names = backend.engine.client.api.networks(names=[backend.allowlist.name])
    assert [n for n in names if n["Name"] == backend.allowlist.name] == []
    squids = subprocess.run(["pgrep", "-f", "orsbox-proxy-"], capture_output=True, text=True)
    assert squids.stdout == ""


async def listed(backend: DockerBackend, image: str, *hosts: str) -> DockerSandbox:
    limits = SandboxLimits(network="allowlist", allowed_hosts=hosts)
    return await backend.start(SandboxSpec(image=image, limits=limits))


def direct(url: str) -> str:
    """`probe` without the proxy settings: a direct connection."""
    return "no_proxy='*' " + probe(url)


async def test_listed_host_answers_and_another_is_refused_by_the_proxy(
    backend: DockerBackend, base_image: str, local_port: int
) -> None:
    sandbox = await listed(backend, base_image, ALLOWED)
    allowed = await sandbox.shell(probe(f"http://{ALLOWED}:{local_port}/"))
    assert allowed.output.strip() == "200", allowed.output
    refused = await sandbox.shell(probe(f"http://{REFUSED}:{local_port}/"))
    assert refused.output.strip() == "403", refused.output
    proxy = backend.allowlist.proxy_of(sandbox.id)
    assert proxy is not None
    log = proxy.access_log()
    # Refused before any lookup: no hierarchy (HIER_NONE), no server address.
    assert "TCP_DENIED/403 " in log and f"http://{REFUSED}:{local_port}/ - HIER_NONE/-" in log
    assert "HIER_DIRECT/127.0.0.1" in log  # the listed one was fetched
    # Whatever the env says, there is no way out but the proxy.
    gone = await sandbox.shell(direct(f"http://{backend.allowlist.gateway}:{local_port}/"))
    assert gone.output.strip() == "timeout", gone.output  # dropped by the host


async def test_listed_name_of_the_hosts_own_address_is_refused_unless_the_operator_allows(
    hosts_file: str, base_image: str, local_port: int
) -> None:
    backend = await backend_for(hosts_file, [])
    try:
        sandbox = await listed(backend, base_image, ALLOWED)
        answer = await sandbox.shell(probe(f"http://{ALLOWED}:{local_port}/"))
        assert answer.output.strip() == "403", answer.output
    finally:
        await backend.close()


async def test_a_sandbox_cannot_use_another_sandboxes_proxy(
    backend: DockerBackend, base_image: str, local_port: int
) -> None:
    owner = await listed(backend, base_image, ALLOWED)
    other = await listed(backend, base_image, "example.invalid")
    proxy = backend.allowlist.proxy_of(owner.id)
    assert proxy is not None
    borrowed = await other.shell(
        f"http_proxy={proxy.url} " + probe(f"http://{ALLOWED}:{local_port}/")
    )
    assert borrowed.output.strip() == "timeout", borrowed.output


async def test_set_network_switches_between_modes(
    backend: DockerBackend, base_image: str, local_port: int
) -> None:
    sandbox = await backend.start(SandboxSpec(image=base_image))
    url = f"http://{ALLOWED}:{local_port}/"
    await sandbox.set_network("allowlist", [ALLOWED])
    assert (await sandbox.shell(probe(url))).output.strip() == "200"
    assert (await sandbox.exec(["python3", "-c", PROXY_OF_EXEC])).output.startswith("http://")
    await sandbox.set_network(False)
    assert (await sandbox.shell("ls /sys/class/net")).output.split() == ["lo"]
    assert (await sandbox.exec(["python3", "-c", PROXY_OF_EXEC])).output.strip() == "none"
    assert (await sandbox.shell("echo ${http_proxy:-none}")).output.strip() == "none"
    assert backend.allowlist.proxy_of(sandbox.id) is None


PROXY_OF_EXEC = "import os; print(os.environ.get('http_proxy') or 'none')"


KILLED_OWNER = """
import sys, anyio
from orsbox.sandbox import SandboxLimits, SandboxSpec
from orsbox.sandbox.docker import DockerBackend

async def main():
    backend = DockerBackend("test-allowlist-killed")
    limits = SandboxLimits(network="allowlist", allowed_hosts=("example.invalid",))
    await backend.start(SandboxSpec(image=sys.argv[1], limits=limits))
    print(backend.allowlist.chain, backend.allowlist.name, flush=True)
    await anyio.sleep(600)

anyio.run(main)
"""


def test_a_killed_servers_proxy_network_and_rules_are_removed_by_gc(
    base_image: str, tmp_path: Path
) -> None:
    script = tmp_path / "owner.py"
    script.write_text(KILLED_OWNER)
    owner = subprocess.Popen(
        [sys.executable, str(script), base_image], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        assert owner.stdout is not None
        chain, network = owner.stdout.readline().split()
    finally:
        owner.kill()
        owner.wait()
    squids = subprocess.run(["pgrep", "-f", "orsbox-proxy-"], capture_output=True, text=True)
    assert squids.stdout.strip(), "the killed server's proxy should still run"
    assert chain_rules("iptables", chain)
    done = subprocess.run(
        [sys.executable, "-m", "orsbox.cli.main", "gc"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "1 egress proxy(ies) of dead servers stopped" in done.stdout, done.stdout
    assert chain_rules("iptables", chain) == []
    assert subprocess.run(["pgrep", "-f", "orsbox-proxy-"], capture_output=True).stdout == b""
    left = subprocess.run(["docker", "network", "ls", "-q", "-f", f"name=^{network}$"],
                          capture_output=True, text=True)  # fmt: skip
    assert left.stdout.strip() == "", "the dead server's network should be gone"
