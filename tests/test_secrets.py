"""Secrets from `/create` (body and X-Secrets) reach the environment and nothing else:
not responses, not error messages, not SSE error events, not the server's log."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import PROTOCOL_ENVS
from tests.servers import LiveServer, start_server
from tests.sse_client import post_sse

BODY_SECRET = "sk-body-4f1c9e77d2"
HEADER_SECRET = "sk-header-8a2b6c0d91"


def secrets_header(values: dict[str, str]) -> str:
    return base64.b64encode(
        json.dumps({k: {"value": v} for k, v in values.items()}).encode()
    ).decode()


LEAKY = "tests/fixture_envs/leaky_env.py:Leaky"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    targets = [*PROTOCOL_ENVS, LEAKY]
    live = start_server(targets, tmp_path_factory.mktemp("secrets"), log_level="debug")
    yield live
    live.stop()


def create(
    server: LiveServer, secret_location: str, env_name: str = "protocol", **task: object
) -> str:
    sid = uuid.uuid4().hex
    body: dict = {"env_name": env_name, "task_spec": {"question": "q", "answer": "1", **task}}
    headers = {"X-Session-ID": sid}
    if secret_location == "body":
        body["secrets"] = {"token": BODY_SECRET, "other": "plain-value"}
    else:
        headers["X-Secrets"] = secrets_header({"token": HEADER_SECRET, "other": "plain-value"})
    r = httpx.post(f"{server.url}/create", json=body, headers=headers)
    assert r.status_code == 200
    assert BODY_SECRET not in r.text and HEADER_SECRET not in r.text
    return sid


@pytest.mark.parametrize("where", ["body", "header"])
def test_secrets_reach_the_environment_and_never_come_back(server: LiveServer, where: str) -> None:
    secret = BODY_SECRET if where == "body" else HEADER_SECRET
    sid = create(server, where)
    url = f"{server.url}/protocol/call"
    names = post_sse(url, {"name": "secret_names", "input": {}}, sid).result()
    assert names["output"]["blocks"][0]["text"] == "other,token"
    leaked = post_sse(url, {"name": "leak", "input": {}}, sid)
    assert secret not in leaked.raw and "token=[redacted]" in leaked.raw
    raised = post_sse(url, {"name": "explode", "input": {}}, sid)
    assert raised.events[-1] == (
        "error",
        "tool_failed: tool 'explode' failed: ValueError: kaboom [redacted]",
    )

    failing = create(server, where, fail_setup=True)
    r = httpx.get(f"{server.url}/protocol/prompt", headers={"X-Session-ID": failing})
    assert r.status_code == 500
    assert r.json()["detail"] == "setup failed: RuntimeError: setup exploded with [redacted]"
    for sid_ in (sid, failing):
        httpx.post(f"{server.url}/delete", headers={"X-Session-ID": sid_})


@pytest.mark.parametrize("where", ["body", "header"])
def test_secrets_leaked_by_careless_code_are_redacted(server: LiveServer, where: str) -> None:
    secret = BODY_SECRET if where == "body" else HEADER_SECRET
    sid = create(server, where, env_name="leaky")
    url = f"{server.url}/leaky/call"
    invalid = post_sse(url, {"name": "bad_result", "input": {}}, sid)
    assert invalid.names() == ["task_id", "error"] and secret not in invalid.raw
    assert "returned an invalid result" in invalid.events[-1][1]
    chatter = post_sse(url, {"name": "chatter", "input": {}}, sid)
    assert chatter.result()["output"]["blocks"][0]["text"] == "chattered"
    httpx.post(f"{server.url}/delete", headers={"X-Session-ID": sid})


def test_secrets_never_appear_in_the_log(server: LiveServer) -> None:
    # runs after the test above (same module server): the log holds their tracebacks
    log = server.log()
    assert "kaboom" in log and "setup exploded" in log  # the errors were logged ...
    for leak in ("stdout", "stderr", "logged", "warned", "task", "thread"):
        assert f"{leak} [redacted]" in log, leak
    assert BODY_SECRET not in log and HEADER_SECRET not in log  # ... without the secrets
    assert base64.b64encode(HEADER_SECRET.encode()).decode()[:12] not in log
