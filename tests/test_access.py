"""Access control, capacity limits, the operator's sandbox policy and /health."""

from __future__ import annotations

import asyncio
import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest
from fastapi.testclient import TestClient
from ors.client import ORS

from orsbox.authoring import SingleTask
from orsbox.authoring.standard_tools import BashTool
from orsbox.clock import ManualClock
from orsbox.errors import PolicyViolation
from orsbox.sandbox import HostMount, SandboxLimits, create_backend
from orsbox.server import create_app
from orsbox.server.health import PROBE_TIMEOUT_S
from orsbox.settings import Settings
from tests.conftest import PROTOCOL_ENVS
from tests.fixture_envs.protocol_envs import Protocol
from tests.servers import LiveServer, start_server
from tests.waiting import wait_until

TOKEN = "tok-" + uuid.uuid4().hex


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = start_server(PROTOCOL_ENVS, tmp_path_factory.mktemp("auth"), token=TOKEN, max_sessions=3)
    yield live
    live.stop()


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer wrong"}, {"X-API-Key": "wrong"}, {"Authorization": TOKEN}],
)
def test_every_endpoint_but_health_needs_the_token(
    guarded: LiveServer, headers: dict[str, str]
) -> None:
    for method, path in [
        ("GET", "/list_environments"),
        ("GET", "/protocol/tools"),
        ("POST", "/create"),
        ("POST", "/protocol/call"),
        ("POST", "/delete"),
        ("GET", "/openapi.json"),
    ]:
        r = httpx.request(method, f"{guarded.url}{path}", headers=headers)
        assert r.status_code == 401, (path, r.status_code)
        assert "API token" in r.json()["detail"] and r.headers["www-authenticate"] == "Bearer"
    assert httpx.get(f"{guarded.url}/health").status_code == 200
    assert TOKEN not in guarded.log()


@pytest.mark.parametrize("headers", [{"Authorization": f"Bearer {TOKEN}"}, {"X-API-Key": TOKEN}])
def test_the_token_is_accepted_in_either_header(
    guarded: LiveServer, headers: dict[str, str]
) -> None:
    r = httpx.get(f"{guarded.url}/list_environments", headers=headers)
    assert r.status_code == 200 and r.json() == ["protocol", "second_env"]


def test_the_ors_sdk_client_sends_its_api_key(
    guarded: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ORS_API_KEY", TOKEN)
    with ORS(base_url=guarded.url) as client:
        env = client.environment("protocol")
        with env.session(split="train", index=1) as session:
            assert session.call_tool("submit", {"answer": "2"}).reward == 1.0


def test_capacity_limit_is_503_with_retry_after(guarded: LiveServer) -> None:
    auth = {"X-API-Key": TOKEN}
    sids = [uuid.uuid4().hex for _ in range(4)]
    answers = [
        httpx.post(
            f"{guarded.url}/create", headers={**auth, "X-Session-ID": sid}, json={"task_spec": {}}
        )
        for sid in sids
    ]
    assert [r.status_code for r in answers] == [200, 200, 200, 503]
    assert answers[3].headers["retry-after"] == "5"
    assert "at capacity: 3 live sessions (max 3)" in answers[3].json()["detail"]
    httpx.post(f"{guarded.url}/delete", headers={**auth, "X-Session-ID": sids[0]})
    again = httpx.post(
        f"{guarded.url}/create", headers={**auth, "X-Session-ID": sids[3]}, json={"task_spec": {}}
    )
    assert again.status_code == 200
    for sid in sids:
        httpx.post(f"{guarded.url}/delete", headers={**auth, "X-Session-ID": sid})


def test_sessions_starting_at_once_are_bounded() -> None:
    app = create_app([Protocol], Settings(max_starting=2, setup_wait_s=0))
    with TestClient(app) as client:
        codes = [
            client.post(
                "/create", headers={"X-Session-ID": f"s{i}"}, json={"task_spec": {"setup_s": 5}}
            ).status_code
            for i in range(3)
        ]
        assert codes == [200, 200, 503]
        for i in range(3):
            client.post("/delete", headers={"X-Session-ID": f"s{i}"})


def test_health_counts_sessions_in_setup_as_they_start_end_fail_and_go() -> None:
    """The `starting` count /health reports (and /create bounds by `max_starting`) is
    kept as sessions change: up at /create, down when setup ends, fails, or the session
    is deleted mid-setup."""
    app = create_app([Protocol], Settings(max_starting=3, setup_wait_s=0))
    specs = {"slow": {"setup_s": 30}, "quick": {}, "broken": {"fail_setup": True}}
    with TestClient(app) as client:

        def load() -> dict[str, int]:
            return client.get("/health").json()

        for sid, spec in specs.items():
            r = client.post("/create", headers={"X-Session-ID": sid}, json={"task_spec": spec})
            assert r.status_code == 200, r.text
        settled = wait_until(lambda: load()["starting"] == 1 and load(), 10, message="setups end")
        assert settled["sessions"] == 3  # the failed one is still a session until deleted
        other = client.post("/create", headers={"X-Session-ID": "next"}, json={"task_spec": {}})
        assert other.status_code == 200  # room again under max_starting=3
        wait_until(lambda: load()["starting"] == 1, 10, message="the new session setup ends")
        client.post("/delete", headers={"X-Session-ID": "slow"})  # mid-setup
        assert load()["starting"] == 0 and load()["sessions"] == 3
        for sid in ("quick", "broken", "next"):
            client.post("/delete", headers={"X-Session-ID": sid})
        assert load()["sessions"] == 0 and load()["starting"] == 0


class Networked(SingleTask, BashTool):
    limits = SandboxLimits(network=True)


class Capable(Networked):
    limits = SandboxLimits(cap_add=("NET_ADMIN",))


def test_policy_refuses_networks_and_capabilities_unless_allowed() -> None:
    with pytest.raises(
        PolicyViolation, match=r"'networked' asks for a network.*ORSBOX_ALLOW_NETWORK"
    ):
        create_app([Networked], Settings(), sandbox_backend=FakeHealth(None))
    create_app([Networked], Settings(allow_network=True), sandbox_backend=FakeHealth(None))
    with pytest.raises(PolicyViolation, match="capabilities NET_ADMIN"):
        create_app([Capable], Settings(), sandbox_backend=FakeHealth(None))
    create_app([Capable], Settings(allow_cap_add=["NET_ADMIN"]), sandbox_backend=FakeHealth(None))


def refusal(limits: SandboxLimits, settings: Settings | None = None) -> str | None:
    """The load-time error for an environment asking for `limits`, or None if allowed;
    its sandboxes would start on the backend `settings` configure (never started here:
    the policy asks what it can do, `capabilities`)."""
    settings = settings or Settings()
    env = type("Asking", (Networked,), {"limits": limits})
    try:
        create_app([env], settings, sandbox_backend=create_backend(settings.backend))
    except PolicyViolation as e:
        return str(e)
    return None


def test_policy_refuses_host_network_and_privileged_mode_unless_allowed() -> None:
    host = SandboxLimits(network="host")
    assert "the host's network" in (refusal(host) or "")
    assert "ORSBOX_ALLOW_HOST_NETWORK=1" in (refusal(host, Settings(allow_network=True)) or "")
    assert refusal(host, Settings(allow_host_network=True)) is None
    listed = SandboxLimits(network="allowlist", allowed_hosts=("pypi.org",))
    assert "ORSBOX_ALLOW_NETWORK_ALLOWLIST=1" in (refusal(listed) or "")
    assert refusal(listed, Settings(allow_network_allowlist=True)) is None
    assert refusal(listed, Settings(allow_network=True)) is None  # narrower than the internet
    privileged = SandboxLimits(privileged=True)
    assert "'asking' asks for privileged mode" in (refusal(privileged) or "")
    assert refusal(privileged, Settings(allow_privileged=True)) is None


def mount(source: Path | str, read_only: bool = True) -> SandboxLimits:
    return SandboxLimits(mounts=(HostMount(source=str(source), target="/d", read_only=read_only),))


def test_read_only_data_mounts_need_no_permission(tmp_path: Path) -> None:
    assert refusal(mount(tmp_path)) is None


def test_policy_refuses_writable_and_system_mounts_unless_allowed(tmp_path: Path) -> None:
    writable = refusal(mount(tmp_path, read_only=False)) or ""
    assert f"a mount of {tmp_path}, writable" in writable and "ALLOW_HOST_MOUNTS" in writable
    (tmp_path / "etc-link").symlink_to("/etc")
    for system in ("/", "/etc", "/etc/ssl", "/var", "/root", "/proc", tmp_path / "etc-link"):
        assert "a system folder" in (refusal(mount(system)) or ""), system
    assert "(-> /etc)" in (refusal(mount(tmp_path / "etc-link")) or "")
    allowed = Settings(allow_host_mounts=True)
    assert refusal(mount("/etc", read_only=False), allowed) is None


def test_policy_refuses_the_docker_socket_even_read_only(tmp_path: Path) -> None:
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(tmp_path / "engine.sock"))
        message = refusal(mount(tmp_path / "engine.sock"), Settings(allow_host_mounts=True))
        assert "a socket" in (message or "") and "ORSBOX_ALLOW_DOCKER_SOCKET=1" in (message or "")
        allowed = Settings(allow_docker_socket=True)
        assert refusal(mount(tmp_path / "engine.sock"), allowed) is None
    if os.path.lexists("/var/run/docker.sock"):  # the engine runs
        assert "a socket" in (refusal(mount("/var/run/docker.sock")) or "")


def test_a_missing_mount_source_is_refused_at_load(tmp_path: Path) -> None:
    assert "does not exist on this host" in (refusal(mount(tmp_path / "missing")) or "")


class FakeHealth:
    """Only what /health and app shutdown use of a backend."""

    def __init__(self, reason: str | None) -> None:
        self.reason = reason

    async def health(self) -> str | None:
        return self.reason

    async def sweep(self) -> int:
        return 0

    async def close(self) -> None:
        pass


def test_health_reports_a_down_engine_as_degraded() -> None:
    for reason, expected in [
        (None, {"status": "ok", "sandbox": "ok"}),
        (
            "docker engine unreachable",
            {"status": "degraded", "sandbox": "docker engine unreachable"},
        ),
    ]:
        app = create_app([Protocol], Settings(), sandbox_backend=FakeHealth(reason))  # type: ignore[arg-type]
        with TestClient(app) as client:
            r = client.get("/health")
            assert r.status_code == 200
            assert {k: r.json()[k] for k in expected} == expected


class HungHealth(FakeHealth):
    async def health(self) -> str | None:
        await anyio.sleep(3600)  # an engine that never answers
        return None


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the server's


@pytest.mark.anyio
async def test_health_answers_degraded_when_the_engine_hangs() -> None:
    """At the probe's own timeout and not before, on the server's clock moved by hand."""
    clock = ManualClock()
    app = create_app([Protocol], Settings(), sandbox_backend=HungHealth(None), clock=clock)  # type: ignore[arg-type]
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://orsbox") as client,
    ):
        answer = asyncio.create_task(client.get("/health"))
        await clock.sleepers(2)  # the reaper, and /health waiting for the probe
        await clock.advance(PROBE_TIMEOUT_S - 0.01)
        assert not answer.done()
        await clock.advance(0.01)
        r = await answer
    assert {k: r.json()[k] for k in ("status", "sandbox")} == {
        "status": "degraded",
        "sandbox": f"the sandbox backend did not answer within {PROBE_TIMEOUT_S:g}s",
    }


def test_session_ids_are_random_uuid4(guarded: LiveServer) -> None:
    sids = []
    # one keep-alive connection for the 400 requests (a new one each costs more than the call)
    with httpx.Client(base_url=guarded.url, headers={"X-API-Key": TOKEN}) as client:
        for _ in range(200):  # each id holds a place until deleted (this server has 3)
            sids.append(client.post("/create_session").json()["sid"])
            client.post("/delete_session", headers={"X-Session-ID": sids[-1]})
    assert len(set(sids)) == 200
    # 122 random bits each, then the cell (orsbox.server.cells)
    assert all(uuid.UUID(sid.split(".")[0]).version == 4 for sid in sids)


def test_the_server_listens_on_loopback_unless_told_otherwise(guarded: LiveServer) -> None:
    port = int(guarded.url.rsplit(":", 1)[1])
    listening = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for row in f.read().splitlines()[1:]:
                local, state = row.split()[1], row.split()[3]
                address, hex_port = local.rsplit(":", 1)
                if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                    listening.append(address)
    assert listening == ["0100007F"]  # 127.0.0.1, and nothing on other addresses
    assert Settings().host == "127.0.0.1"
