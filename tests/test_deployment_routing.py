"""`X-Deployment` routing against a real server with two environments: bare paths go to
the environment the header names (`NAME` or `owner/NAME`), an unknown name is a 404
listing the served ones (never the default), a header naming one environment beside a
path naming another is a 400, and a request with neither reaches the default. Driven
by raw HTTP and by the `openreward` client, which names the environment only there."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import pytest
from openreward import OpenReward

from tests.servers import LiveServer
from tests.sse_client import post_sse

SERVED = "protocol, second_env"


def get(server: LiveServer, path: str, deployment: str | None = None) -> httpx.Response:
    headers = {"X-Deployment": deployment} if deployment is not None else {}
    return httpx.get(f"{server.url}{path}", headers=headers, timeout=30)


def create(server: LiveServer, body: dict, deployment: str | None = None) -> httpx.Response:
    headers = {"X-Session-ID": uuid.uuid4().hex}
    if deployment is not None:
        headers["X-Deployment"] = deployment
    return httpx.post(f"{server.url}/create", headers=headers, json=body, timeout=30)


@pytest.mark.parametrize("deployment", ["second_env", "owner/second_env", "Someone/SECOND_ENV"])
def test_bare_paths_reach_the_environment_the_header_names(
    protocol_server: LiveServer, deployment: str
) -> None:
    second = get(protocol_server, "/second_env/tools").json()
    assert get(protocol_server, "/tools", deployment).json() == second
    assert get(protocol_server, "/splits", deployment).json() == [
        {"name": "validation", "type": "validation"}
    ]
    task = httpx.post(
        f"{protocol_server.url}/task",
        headers={"X-Deployment": deployment},
        json={"split": "validation", "index": 0},
    ).json()
    assert task == {"task": {"n": 1}, "env_name": "second_env"}


def test_without_a_header_bare_paths_reach_the_default(protocol_server: LiveServer) -> None:
    assert get(protocol_server, "/tools").json() == get(protocol_server, "/protocol/tools").json()
    assert (
        get(protocol_server, "/tools", "").json() == get(protocol_server, "/protocol/tools").json()
    )


def test_a_header_naming_nothing_served_is_404_never_the_default(
    protocol_server: LiveServer,
) -> None:
    for deployment in ("math", "owner/nope"):
        r = get(protocol_server, "/tools", deployment)
        assert r.status_code == 404, r.text
        assert f"environments: {SERVED}" in r.json()["detail"]
        assert repr(deployment) in r.json()["detail"]
    r = create(protocol_server, {"split": "train", "index": 0}, "math")
    assert r.status_code == 404 and f"environments: {SERVED}" in r.json()["detail"]


def test_a_header_and_a_path_naming_two_environments_is_400(protocol_server: LiveServer) -> None:
    r = get(protocol_server, "/protocol/tools", "second_env")
    assert r.status_code == 400
    assert r.json()["detail"].startswith(
        "X-Deployment 'second_env' names environment 'second_env' but the request names 'protocol'"
    )
    r = create(
        protocol_server, {"env_name": "protocol", "split": "train", "index": 0}, "second_env"
    )
    assert r.status_code == 400 and "names 'protocol'" in r.json()["detail"]
    sid = create(protocol_server, {"split": "train", "index": 0}).json()["sid"]
    stream = post_sse(
        f"{protocol_server.url}/second_env/call",
        {"name": "echo", "input": {"text": "x"}},
        sid,
        **{"X-Deployment": "protocol"},
    )
    assert stream.status == 400


def test_a_header_agreeing_with_the_path_or_naming_a_deployment_is_fine(
    protocol_server: LiveServer,
) -> None:
    """The openreward client with a variant sends its deployment's name in the header
    and the environment in the path; a deployment name that is no environment here
    (the hosted platform's `owner/server`) leaves the path to decide."""
    second = get(protocol_server, "/second_env/tools").json()
    assert get(protocol_server, "/second_env/tools", "Owner/Second_Env").json() == second
    assert get(protocol_server, "/second_env/tools", "owner/my-server").json() == second


def test_create_and_call_follow_the_header(protocol_server: LiveServer) -> None:
    """A session made with only the header is the header's environment, and a bare
    `/call` (served by the fast path) reaches it."""
    r = create(protocol_server, {"split": "validation", "index": 0}, "second_env")
    assert r.status_code == 200, r.text
    sid = r.json()["sid"]
    headers = {"X-Session-ID": sid, "X-Deployment": "second_env"}
    prompt = httpx.get(f"{protocol_server.url}/prompt", headers=headers).json()
    assert prompt[0]["text"] == "second"
    result = post_sse(
        f"{protocol_server.url}/call",
        {"name": "ping_tool", "input": {}},
        sid,
        **{"X-Deployment": "second_env"},
    ).result()
    assert result["output"]["reward"] == 0.5


@pytest.fixture
def client(protocol_server: LiveServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenReward]:
    monkeypatch.setenv("OPENREWARD_SESSION_URL", protocol_server.url)
    client = OpenReward(api_key="test-key")
    yield client
    client.environments.close()


@pytest.mark.parametrize("name", ["second_env", "someone/second_env"])
def test_the_openreward_client_reaches_the_environment_it_names(
    client: OpenReward, name: str
) -> None:
    env = client.environments.get(name)
    assert env.list_splits() == ["validation"]
    assert [t.name for t in env.list_tools()] == ["ping_tool"]
    with env.session(split="validation", index=0) as session:
        assert session.get_prompt()[0].text == "second"
        assert session.call_tool("ping_tool", {}).reward == 0.5


def test_the_openreward_client_naming_nothing_served_fails(client: OpenReward) -> None:
    env = client.environments.get("math")
    with pytest.raises(Exception, match="404") as raised:
        env.list_splits()
    assert f"X-Deployment 'math' names no environment served here; environments: {SERVED}" in str(
        raised.value
    )


def test_the_openreward_clients_variant_wins_over_a_deployment_named_like_an_environment(
    client: OpenReward, protocol_server: LiveServer
) -> None:
    """`get("protocol", variant="second_env")`: the openreward client sends `protocol`
    as its deployment and `second_env` in the path and in `/create`'s `env_name`. The
    variant is the environment meant, although `protocol` is served here too; the same
    pair from another client is still the 400 above."""
    env = client.environments.get("protocol", variant="second_env")
    assert [t.name for t in env.list_tools()] == ["ping_tool"]
    with env.session(split="validation", index=0) as session:
        assert session.get_prompt()[0].text == "second"
        assert session.call_tool("ping_tool", {}).reward == 0.5
    assert get(protocol_server, "/second_env/tools", "protocol").status_code == 400
