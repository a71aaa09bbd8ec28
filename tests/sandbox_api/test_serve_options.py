"""What `orsbox serve` tells the sandbox API: its `--image-map` (not only
ORSBOX_IMAGE_MAP), and which server openreward environments served here will send
their sandboxes to, logged at startup with a warning when that is not this server."""

from __future__ import annotations

import re
from pathlib import Path

import docker
import pytest
from openreward import AsyncOpenReward

from tests.sandbox_api.conftest import TOKEN_A, api_server_settings, sandbox_settings
from tests.servers import LiveServer, start_server

pytestmark = pytest.mark.anyio
TARGET = "tests/fixture_envs/openreward_envs.py:LineCount"
MISSING = "orsbox/no-such-image:never"
ELSEWHERE = "http://127.0.0.1:9"  # nothing listens on the discard port


@pytest.fixture(scope="module")
def mapped_server(tmp_path_factory: pytest.TempPathFactory, base_image: str) -> LiveServer:
    tmp = tmp_path_factory.mktemp("serve-image-map")
    flags = ["--image-map", f"python:3.11-slim={base_image}"]
    flags += ["--image-map", f"orsbox/renamed:1={MISSING}"]
    server = start_server([TARGET, *flags], tmp, **api_server_settings())
    yield server
    server.stop()


def _client(server: LiveServer) -> AsyncOpenReward:
    client = AsyncOpenReward(api_key=TOKEN_A, base_url="http://unused.invalid")
    client.session_base_url = server.url
    return client


async def test_the_image_map_flag_applies_to_the_sandbox_api(
    mapped_server: LiveServer, base_image: str, docker_client: docker.DockerClient
) -> None:
    async with _client(mapped_server).sandbox(sandbox_settings("python:3.11-slim")) as box:
        [container] = docker_client.api.containers(filters={"label": f"orsbox.session={box.sid}"})
        assert container["Image"] == base_image
        assert await box.check_run("echo ok") == "ok"


async def test_a_missing_mapped_image_names_the_map(mapped_server: LiveServer) -> None:
    with pytest.raises(Exception) as failed:
        async with _client(mapped_server).sandbox(sandbox_settings("orsbox/renamed:1")):
            pass
    message = str(failed.value)
    assert "not found" in message, message
    assert f"'orsbox/renamed:1' (mapped to '{MISSING}' by the image map)" in message


async def test_a_refused_image_names_the_map(mapped_server: LiveServer) -> None:
    with pytest.raises(Exception) as refused:
        async with _client(mapped_server).sandbox(sandbox_settings("python:3.12-slim")):
            pass
    message = str(refused.value)
    assert "is not allowed" in message and "no image map rule matched" in message, message
    assert "--image-map" in message


def _startup_lines(server: LiveServer) -> str:
    return server.log_path.read_text(errors="replace")


def test_startup_logs_the_sandbox_url_of_this_server(mapped_server: LiveServer) -> None:
    log = _startup_lines(mapped_server)
    assert f"create their sandboxes at {mapped_server.url}" in log
    assert "is not this server" not in log


def test_an_inherited_session_url_elsewhere_is_warned_about(
    tmp_path: Path, base_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENREWARD_SESSION_URL", ELSEWHERE)
    server = start_server([TARGET], tmp_path, **api_server_settings())
    try:
        log = _startup_lines(server)
    finally:
        server.stop()
    assert f"create their sandboxes at {ELSEWHERE}" in log
    warning = re.search(r"WARNING.*OPENREWARD_SESSION_URL=(\S+) \(inherited\) is not this", log)
    assert warning and warning[1] == ELSEWHERE, log
    assert server.url in log
