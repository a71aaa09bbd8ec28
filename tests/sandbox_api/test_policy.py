"""The operator's policy for the sandbox API, and what one client may do to another's
sandbox: refusals name the setting that would allow the request."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import aiohttp
import pytest
from openreward import OpenReward
from openreward.api.sandboxes.types import SandboxNetworkPolicy

from tests.sandbox_api.conftest import TOKEN_A, sandbox_settings
from tests.servers import LiveServer, start_server


def post(
    url: str, path: str, body: object, token: str | None, sid: str | None = None
) -> tuple[int, str]:
    request = urllib.request.Request(f"{url}{path}", data=json.dumps(body).encode(), method="POST")
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("X-API-Key", token)
    if sid:
        request.add_header("X-Session-ID", sid)
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def create_body(image: str, **fields: object) -> dict[str, object]:
    return sandbox_settings(image, **fields).model_dump() | fields


def test_an_image_outside_the_allow_list_is_403(client: OpenReward) -> None:
    box = client.sandbox(sandbox_settings("python:3.11-slim"))
    try:
        with pytest.raises(aiohttp.ClientResponseError) as refused:
            box.start()
    finally:
        box.close()
    assert refused.value.status == 403 and "ORSBOX_SANDBOX_IMAGES" in refused.value.message
    status, body = post(
        client.session_base_url, "/create_sandbox", create_body("python:3.11-slim"), TOKEN_A
    )
    assert status == 403 and "ORSBOX_SANDBOX_IMAGES" in body


def test_network_needs_the_operator(api_server: LiveServer, base_image: str) -> None:
    open_egress = create_body(base_image, block_network=False)
    status, body = post(api_server.url, "/create_sandbox", open_egress, TOKEN_A)
    assert status == 403 and "ORSBOX_ALLOW_NETWORK=1" in body
    policy = SandboxNetworkPolicy(rules=[{"action": "allow", "host": "pypi.org"}]).model_dump()
    status, body = post(
        api_server.url,
        "/create_sandbox",
        create_body(base_image, block_network=False, network=policy),
        TOKEN_A,
    )
    assert status == 403 and "ORSBOX_ALLOW_NETWORK_ALLOWLIST=1" in body  # its own setting


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("bucket_config", {"mount_path": "/data"}),
        ("sidecars", [{"name": "db", "image": "orsbox/base:latest"}]),
        ("host_aliases", [{"ip": "127.0.0.1", "hostnames": ["db"]}]),
        ("machine_size", "nvidia-l4"),
    ],
)
def test_fields_orsbox_cannot_honour_are_400(
    api_server: LiveServer, base_image: str, field: str, value: object
) -> None:
    body = sandbox_settings(base_image).model_dump() | {field: value}
    status, answer = post(api_server.url, "/create_sandbox", body, TOKEN_A)
    assert status == 400 and field in answer


def test_a_token_is_required(api_server: LiveServer, base_image: str) -> None:
    status, _ = post(api_server.url, "/create_sandbox", create_body(base_image), None)
    assert status == 401
    status, _ = post(api_server.url, "/create_sandbox", create_body(base_image), "wrong-token-123")
    assert status == 401


def test_the_api_cannot_be_enabled_without_a_token(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="ORSBOX_SANDBOX_API=1 needs a token"):
        start_server(["tests/fixture_envs/protocol_envs.py:Protocol"], tmp_path, sandbox_api=1)


def test_a_second_client_cannot_touch_the_first_ones_sandbox(
    client: OpenReward, other_client: OpenReward, base_image: str, api_server: LiveServer
) -> None:
    with client.sandbox(sandbox_settings(base_image)) as box:
        box.check_run("echo mine > /tmp/owned")
        sid = box.sid
        for path, body in [
            (
                "/run",
                {"cmd": "cat /tmp/owned", "timeout_s": 5, "max_bytes": 100, "shell": "/bin/bash"},
            ),
            ("/stat_file?path=/tmp/owned", {}),
            ("/set_network", {"rules": [], "presets": []}),
            ("/ping", {}),
        ]:
            status, _ = post(api_server.url, path, body, other_client.api_key, sid)
            assert status == 404, path
        assert post(api_server.url, "/ping", {}, TOKEN_A, sid) == (200, '{"status":"ok"}')
        status, _ = post(api_server.url, "/delete_session", {}, other_client.api_key, sid)
        assert status == 200  # idempotent, and it changed nothing:
        assert box.check_run("cat /tmp/owned") == "mine"
        status, _ = post(api_server.url, "/run", {"cmd": "true"}, TOKEN_A, "sbx-guessed")
        assert status == 404


def test_a_stopped_sandbox_answers_410(
    client: OpenReward, base_image: str, api_server: LiveServer
) -> None:
    with client.sandbox(sandbox_settings(base_image)) as box:
        sid = box.sid
    status, body = post(api_server.url, "/run", {"cmd": "true"}, TOKEN_A, sid)
    assert status == 410 and "gone" in body


def test_per_client_cap(tmp_path: Path, base_image: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.sandbox_api.conftest import api_server_settings

    server = start_server(
        ["tests/fixture_envs/protocol_envs.py:Protocol"],
        tmp_path,
        **api_server_settings(sandbox_max_per_client=1),
    )
    try:
        monkeypatch.setenv("OPENREWARD_SESSION_URL", server.url)
        first = OpenReward(api_key=TOKEN_A).sandbox(sandbox_settings(base_image))
        first.start()
        try:
            status, body = post(server.url, "/create_sandbox", create_body(base_image), TOKEN_A)
            assert status == 403 and "ORSBOX_SANDBOX_MAX_PER_CLIENT=1" in body
        finally:
            first.close()
    finally:
        server.stop()


def test_a_failed_start_is_an_error_event_and_leaves_nothing(api_server: LiveServer) -> None:
    body = create_body("orsbox/no-such-image:latest")
    status, stream = post(api_server.url, "/create_sandbox", body, TOKEN_A)
    assert status == 200 and "event: error" in stream and "not found" in stream
    sid = stream.split("data: ", 1)[1].split()[0]
    status, answer = post(api_server.url, "/ping", {}, TOKEN_A, sid)
    assert status == 410 and "could not start" in answer
