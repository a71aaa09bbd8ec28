"""The sandbox API's pieces without Docker: what a request asks for, the operator's
policy, and the manager's life cycle (with a backend whose starts the test releases)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import SecretStr

from orsbox.authoring.loading import load_environment
from orsbox.authoring.openreward_env import OpenRewardEnvironment
from orsbox.clock import ManualClock
from orsbox.errors import (
    BadRequest,
    Forbidden,
    Gone,
    NotFound,
    PolicyViolation,
    SandboxStartError,
    ServiceUnavailable,
)
from orsbox.sandbox.base import SandboxBackend, SandboxInfo, SandboxSpec
from orsbox.sandbox.fake import FAKE_CAPABILITIES
from orsbox.server.policy import (
    check_backend_network,
    check_sandbox_api,
    check_sandbox_image,
    check_sandbox_network,
)
from orsbox.server.sandbox_api.manager import SandboxManager
from orsbox.server.sandbox_api.request import SandboxRequest, machine_limits
from orsbox.settings import Settings
from tests.runtimes import GVISOR_CAPABILITIES

pytestmark = pytest.mark.anyio
GB = 1024**3


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# -- requests -------------------------------------------------------------------------
def test_machine_sizes() -> None:
    assert machine_limits("0.5:1") == (0.5, GB)
    assert machine_limits("16:64") == (16.0, 64 * GB)
    with pytest.raises(BadRequest, match="machine_size: 'nvidia-l4'"):
        machine_limits("nvidia-l4")


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"bucket_config": {"mount_path": "/b"}}, "bucket_config"),
        ({"sidecars": [{"name": "db"}]}, "sidecars"),
        ({"host_aliases": [{"ip": "1.2.3.4", "hostnames": ["x"]}]}, "host_aliases"),
        ({"gpus": 1}, "gpus"),
        ({"block_network": True, "network": {"rules": []}}, "mutually exclusive"),
    ],
)
def test_what_cannot_be_honoured_is_named(fields: dict[str, Any], named: str) -> None:
    request = SandboxRequest.model_validate({"image": "orsbox/base", **fields})
    with pytest.raises(BadRequest, match=named):
        request.check_supported()


def test_unset_optional_fields_are_fine() -> None:
    body = {"image": "orsbox/base", "bucket_config": None, "sidecars": None, "gpus": None}
    SandboxRequest.model_validate(body).check_supported()


@pytest.mark.parametrize(
    ("fields", "network", "hosts"),
    [
        ({}, False, ()),  # absent block_network: no network
        ({"block_network": False}, True, ()),
        ({"block_network": False, "network": {"rules": [], "presets": []}}, False, ()),
        (
            {"block_network": False, "network": {"rules": [{"action": "deny", "host": "a.b"}]}},
            False,
            (),
        ),
        (
            {"block_network": False, "network": {"rules": [{"action": "allow", "host": "a.b"}]}},
            "allowlist",
            ("a.b",),
        ),
        (
            {
                "block_network": False,
                "network": {
                    "rules": [
                        {"action": "deny", "host": "files.pythonhosted.org"},
                        {"action": "allow", "host": "*.Example.org"},
                    ],
                    "presets": ["pypi"],
                },
            },
            "allowlist",
            ("*.example.org", "pypi.org"),  # a deny first wins over the preset's allow
        ),
        ({"block_network": False, "network": {"enforce": False}}, True, ()),  # audit mode
    ],
)
def test_network_policy_becomes_an_allow_list(
    fields: dict[str, Any], network: bool | str, hosts: tuple[str, ...]
) -> None:
    request = SandboxRequest.model_validate({"image": "orsbox/base", **fields})
    assert request.network_setting() == (network, hosts)
    limits = request.spec("orsbox/base", "sbx-1", {}).limits
    assert (limits.network, limits.allowed_hosts) == (network, hosts)


@pytest.mark.parametrize(
    ("policy", "error"),
    [
        ({"rules": [{"action": "allow", "host": "a.b", "path": "/x/*"}]}, "path or methods"),
        ({"rules": [{"action": "allow", "host": "a.b", "methods": ["GET"]}]}, "path or methods"),
        ({"presets": ["cpan"]}, "unknown preset 'cpan'"),
        ({"rules": [{"action": "allow", "host": "a.b:443"}]}, "not a host name"),
    ],
)
def test_what_a_host_allow_list_cannot_honour_is_a_400(policy: dict[str, Any], error: str) -> None:
    request = SandboxRequest.model_validate({"image": "orsbox/base", "network": policy})
    with pytest.raises(BadRequest, match=error):
        request.network_setting()


# -- policy ---------------------------------------------------------------------------
def test_images_are_an_allow_list() -> None:
    settings = Settings()
    check_sandbox_image("orsbox/base:latest", "orsbox/base:latest", settings)
    with pytest.raises(Forbidden, match="ORSBOX_SANDBOX_IMAGES"):
        check_sandbox_image("python:3.11-slim", "python:3.11-slim", settings)
    allowed = Settings(sandbox_images=["python:3.*"])
    check_sandbox_image("python:3.11-slim", "python:3.11-slim", allowed)


def test_the_allow_list_judges_the_mapped_name_and_says_so() -> None:
    settings = Settings()
    check_sandbox_image("python:3.11-slim", "orsbox/base", settings)  # what runs is allowed
    with pytest.raises(Forbidden) as refused:
        check_sandbox_image("orsbox/base", "python:3.11-slim", settings)
    assert "'orsbox/base' (mapped to 'python:3.11-slim' by the image map)" in str(refused.value)
    assert "--image-map" in str(refused.value)
    with pytest.raises(Forbidden, match="no image map rule matched"):
        check_sandbox_image("python:3.11-slim", "python:3.11-slim", settings)


def test_the_image_map_setting_reads_the_environment_format(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ORSBOX_IMAGE_MAP", "python:3.11-slim=orsbox/base, a=b;c/=d/")
    assert Settings().image_map == ["python:3.11-slim=orsbox/base", "a=b", "c/=d/"]
    monkeypatch.setenv("ORSBOX_IMAGE_MAP", "nothing")
    with pytest.raises(ValueError, match="is not FROM=TO"):
        Settings()


def test_network_needs_the_operator() -> None:
    check_sandbox_network(False, Settings())
    with pytest.raises(Forbidden, match="ORSBOX_ALLOW_NETWORK=1"):
        check_sandbox_network(True, Settings())
    check_sandbox_network(True, Settings(allow_network=True))
    with pytest.raises(Forbidden, match="ORSBOX_ALLOW_NETWORK_ALLOWLIST=1"):
        check_sandbox_network("allowlist", Settings())
    with pytest.raises(Forbidden, match="ORSBOX_ALLOW_NETWORK=1"):
        check_sandbox_network(True, Settings(allow_network_allowlist=True))
    check_sandbox_network("allowlist", Settings(allow_network_allowlist=True))
    check_sandbox_network("allowlist", Settings(allow_network=True))  # narrower than the internet


def test_the_api_needs_a_token() -> None:
    with pytest.raises(PolicyViolation, match="needs a token"):
        check_sandbox_api(Settings(sandbox_api=True))
    check_sandbox_api(Settings(sandbox_api=True, token=SecretStr("t0ken")))
    check_sandbox_api(Settings(sandbox_api=True, sandbox_tokens=[SecretStr("t0ken")]))


# -- the manager ----------------------------------------------------------------------
class HeldSandbox:
    id = "held"
    alive = True

    async def close(self) -> None:
        self.alive = False


class HeldBackend(SandboxBackend):
    """Starts wait for `release`; `fail` makes them raise."""

    kind = "fake"

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.fail = False
        self.started: list[HeldSandbox] = []

    async def start(self, spec: SandboxSpec) -> Any:
        await self.release.wait()
        if self.fail:
            raise SandboxStartError("no such luck")
        self.started.append(HeldSandbox())
        return self.started[-1]

    async def list(self, *, all_servers: bool = False) -> list[SandboxInfo]:
        return []

    async def sweep(self) -> int:
        return 0

    async def close(self) -> None:
        pass


def spec(manager: SandboxManager) -> SandboxSpec:
    return SandboxSpec(image="orsbox/base", session_id=manager.new_id())


async def test_starting_then_running_then_gone() -> None:
    backend, clock = HeldBackend(), ManualClock()
    manager = SandboxManager(Settings(), backend, clock=clock)
    box = manager.create("alice", spec(manager), has_network_policy=False)
    waiting = asyncio.create_task(manager.running("alice", box.id))
    await clock.sleepers(1)
    await clock.advance(Settings().setup_wait_s)  # a request waits for the start this long
    with pytest.raises(ServiceUnavailable) as starting:
        await waiting
    assert starting.value.headers["X-Backend-State"] == "starting"
    backend.release.set()
    _, sandbox = await manager.running("alice", box.id)
    assert sandbox is backend.started[0]
    with pytest.raises(NotFound):
        await manager.running("bob", box.id)  # another client: as if it did not exist
    assert await manager.delete(box.id)
    assert not sandbox.alive
    with pytest.raises(Gone, match="deleted"):
        await manager.running("alice", box.id)


async def test_a_failed_start_is_410_with_its_reason() -> None:
    backend = HeldBackend()
    backend.fail = True
    backend.release.set()
    manager = SandboxManager(Settings(), backend)
    box = manager.create("alice", spec(manager), has_network_policy=False)
    with pytest.raises(Gone, match="no such luck"):
        await manager.running("alice", box.id)
    assert len(manager) == 0


async def test_a_dead_sandbox_is_410() -> None:
    backend = HeldBackend()
    backend.release.set()
    manager = SandboxManager(Settings(), backend)
    box = manager.create("alice", spec(manager), has_network_policy=False)
    _, sandbox = await manager.running("alice", box.id)
    sandbox.alive = False  # the container was killed under it
    with pytest.raises(Gone, match="no longer running"):
        await manager.running("alice", box.id)


async def test_per_client_cap_and_idle_reaping() -> None:
    backend = HeldBackend()
    backend.release.set()
    manager = SandboxManager(Settings(sandbox_max_per_client=1, sandbox_timeout_s=5), backend)
    box = manager.create("alice", spec(manager), has_network_policy=False)
    with pytest.raises(Forbidden, match="ORSBOX_SANDBOX_MAX_PER_CLIENT=1"):
        manager.create("alice", spec(manager), has_network_policy=False)
    manager.create("bob", spec(manager), has_network_policy=False)  # bob has his own cap
    await manager.running("alice", box.id)
    assert manager.idle(box.last_active + 4) == []
    assert box.id in manager.idle(box.last_active + 6)
    box.in_flight = 1  # a command running is never idle
    assert box.id not in manager.idle(box.last_active + 6)
    await manager.close_all()
    assert len(manager) == 0


async def test_the_reaper_removes_an_idle_sandbox_after_the_timeout_not_before() -> None:
    backend, clock = HeldBackend(), ManualClock()
    backend.release.set()
    settings = Settings(sandbox_timeout_s=300)  # a look every reap_interval_s (5 s)
    manager = SandboxManager(settings, backend, clock=clock)
    box = manager.create("alice", spec(manager), has_network_policy=False)
    _, sandbox = await manager.running("alice", box.id)
    reaper = asyncio.create_task(manager.reap_forever())
    await clock.sleepers(1)
    await clock.advance(300)
    assert sandbox.alive  # a timeout is not over at its last second
    await clock.advance(settings.reap_interval_s)  # the reaper's next look
    assert not sandbox.alive
    with pytest.raises(Gone, match="no request for 300s"):
        await manager.running("alice", box.id)
    reaper.cancel()


# -- loading --------------------------------------------------------------------------
def test_openreward_classes_load_by_module_and_by_file() -> None:
    [by_module] = load_environment("tests.fixture_envs.openreward_envs:LineCount")
    assert issubclass(by_module, OpenRewardEnvironment) and by_module.name() == "LineCount"
    by_file = load_environment("tests/fixture_envs/openreward_envs.py")
    assert [c.name() for c in by_file] == ["LineCount", "Dialogue"]
    assert by_module.supports_score_group() and not by_file[1].supports_score_group()


def test_which_session_urls_reach_this_server() -> None:
    from orsbox.server.sandbox_api.session_url import own_url, points_here

    settings = Settings(port=8123)
    assert own_url(settings) == "http://127.0.0.1:8123"
    for here in ("http://127.0.0.1:8123", "http://localhost:8123/", "http://[::1]:8123"):
        assert points_here(here, settings), here
    for elsewhere in (
        "http://127.0.0.1:8124",
        "https://sessions.openreward.ai",
        "http://10.0.0.5:8123",
    ):
        assert not points_here(elsewhere, settings), elsewhere
    assert points_here("http://10.0.0.5:8123", Settings(host="10.0.0.5", port=8123))


GVISOR = GVISOR_CAPABILITIES


def test_a_network_the_backend_cannot_give_is_a_400_naming_what_it_offers() -> None:
    check_backend_network(False, GVISOR)  # no network: every backend gives that
    for asked in (True, "allowlist"):
        with pytest.raises(BadRequest, match=r"network modes offered: none \(gVisor"):
            check_backend_network(asked, GVISOR)
    with pytest.raises(BadRequest, match="cannot change their network while running"):
        check_backend_network(False, GVISOR, switching=True)
    check_backend_network("allowlist", FAKE_CAPABILITIES, switching=True)  # not isolated
