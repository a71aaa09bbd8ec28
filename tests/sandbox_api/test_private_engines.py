"""The sandbox API with its sandboxes under gVisor and on Podman (docs/backends.md, "Every
environment on every backend"): the `openreward` client's sandbox runs a command as the
image's user; `/run` with orsbox's own `user` field (what the Inspect provider sends
for `exec(user=...)`) runs as root, which makes a folder in `/` as a grader does; and a
sandbox asking for the network is refused by name when created, where that engine's
sandboxes can have none. (runc: test_sync_client.py and test_async_client.py.)"""

from __future__ import annotations

import base64
import re
import uuid
from collections.abc import Iterator

import pytest
from openreward import OpenReward

from tests.runtimes import ENGINES, backend_setting, containers_of, runtime_available
from tests.sandbox_api.conftest import TOKEN_A, api_server_settings, sandbox_settings
from tests.servers import LiveServer, start_server
from tests.sse_client import post_sse

NAMED = {"runsc": r"\(gVisor: docs/gvisor\.md\)", "podman": r"\(Podman 4\.\S+: docs/backends\.md\)"}


@pytest.fixture(scope="module", params=list(ENGINES))
def engine_api(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, base_image: str
) -> Iterator[tuple[str, LiveServer]]:
    """(runtime, a server with the sandbox API whose sandboxes run on that engine); the
    operator allows the network, so only the engine can refuse it."""
    runtime = request.param
    runtime_available(runtime)
    server_id = f"test-api-{runtime}-{uuid.uuid4().hex[:8]}"
    settings = api_server_settings(backend=backend_setting(runtime), allow_network=1)
    server = start_server(
        ["tests/fixture_envs/protocol_envs.py:Protocol"],
        tmp_path_factory.mktemp(f"api-{runtime}"),
        server_id=server_id,
        **settings,
    )
    yield runtime, server
    server.stop()
    assert containers_of(runtime, server_id) == []


@pytest.fixture
def engine_client(
    engine_api: tuple[str, LiveServer], monkeypatch: pytest.MonkeyPatch
) -> OpenReward:
    monkeypatch.setenv("OPENREWARD_SESSION_URL", engine_api[1].url)
    return OpenReward(api_key=TOKEN_A)


def test_run_as_the_image_s_user_and_as_root(
    engine_api: tuple[str, LiveServer], engine_client: OpenReward, base_image: str
) -> None:
    _, server = engine_api
    with engine_client.sandbox(sandbox_settings(base_image)) as box:
        output, code = box.run("id -un")
        assert (output, code) == ("orsbox", 0)
        body = {"cmd": "id -un; mkdir -m 700 /made && stat -c '%U %a' /made", "user": "root"}
        answer = post_sse(f"{server.url}/run", body, box.sid or "", **{"X-API-Key": TOKEN_A})
        result = answer.result()
        assert base64.b64decode(result["output"]) == b"root\nroot 700\n", result
        assert result["return_code"] == 0


def test_a_sandbox_with_the_network_is_refused_by_name(
    engine_api: tuple[str, LiveServer], engine_client: OpenReward, base_image: str
) -> None:
    runtime, _ = engine_api
    settings = sandbox_settings(base_image, block_network=False)
    with pytest.raises(Exception) as refused, engine_client.sandbox(settings):
        pass
    named = rf"cannot have network access \(network modes offered: .*{NAMED[runtime]}\)"
    assert re.search(named, str(refused.value)), refused.value
