"""Environments written with `openreward.environments` (tests/fixture_envs/openreward_envs.py),
served by `orsbox serve` unchanged: their tools get their sandbox from this server's
sandbox API, and the openreward and ors-sdk clients play them end to end."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import docker
import pytest
from openreward import OpenReward
from openreward.api.environments.types import GroupCandidate, Message, TextBlock
from openreward.api.errors import ScoreGroupUnsupported
from ors.client import ORS

from tests.sandbox_api.conftest import TOKEN_A, TOKEN_B, api_server_settings
from tests.servers import LiveServer, start_server

TARGETS = [
    "tests/fixture_envs/openreward_envs.py:LineCount",
    "tests/fixture_envs/openreward_envs.py:Dialogue",
]


@pytest.fixture(scope="module")
def env_server(tmp_path_factory: pytest.TempPathFactory, base_image: str) -> Iterator[LiveServer]:
    tmp = tmp_path_factory.mktemp("openreward-envs")
    server = start_server(TARGETS, tmp, **api_server_settings())
    yield server
    server.stop()


@pytest.fixture
def client(env_server: LiveServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenReward]:
    monkeypatch.setenv("OPENREWARD_SESSION_URL", env_server.url)
    client = OpenReward(api_key=TOKEN_A)
    yield client
    client.environments.close()


def api_sandboxes(docker_client: docker.DockerClient, server: LiveServer) -> list[dict]:
    labels = ["orsbox.sandbox_api=1", f"orsbox.pid={server.process.pid}"]
    return docker_client.api.containers(filters={"label": labels})


def test_played_by_the_openreward_client(
    client: OpenReward, docker_client: docker.DockerClient, env_server: LiveServer
) -> None:
    env = client.environments.get("linecount")
    assert env.list_splits() == ["train", "test"]
    task = env.get_task("train", 1)
    with env.session(task=task) as session:
        assert "How many lines" in session.get_prompt()[0].text
        assert {t.name for t in session.list_tools()} == {"answer", "bash"}
        listing = session.call_tool("bash", {"command": "wc -l < /tmp/data.txt; hostname"})
        count = listing.blocks[0].text.splitlines()[0]
        assert count == "7"
        assert len(api_sandboxes(docker_client, env_server)) == 1  # this server's container
        result = session.call_tool("answer", {"answer": count})
        assert (result.reward, result.finished) == (1.0, True)
    assert api_sandboxes(docker_client, env_server) == []  # teardown stopped it


def test_played_by_the_ors_sdk_client(env_server: LiveServer) -> None:
    with ORS(base_url=env_server.url, api_key=TOKEN_A) as ors:
        env = ors.environment("linecount")
        with env.session(split="test", index=0) as session:
            out = session.call_tool("bash", {"command": "wc -l < /tmp/data.txt"})
            assert out.blocks[0].text.strip() == "12"
            wrong = session.call_tool("answer", {"answer": "11"})
            assert (wrong.reward, wrong.finished) == (0.0, True)


def test_messages_through_the_openreward_client(client: OpenReward) -> None:
    env = client.environments.get("dialogue", variant="dialogue")
    with env.session(split="test", index=0) as session:
        messages = session.get_messages()
        assert [m.role for m in messages] == ["system", "user"]
        assert messages[1].blocks[0].text == "Say one word about tea."
        assert not session.supports_score_group()
        with pytest.raises(ScoreGroupUnsupported):
            session.score_group([[Message(role="assistant", blocks=[TextBlock(text="hi")])]])
    line_env = client.environments.get("linecount", variant="linecount")
    with line_env.session(split="train", index=0) as session:
        [message] = session.get_messages()  # the prompt as one user message, by default
        assert message.role == "user" and "How many lines" in message.blocks[0].text


def test_score_group_through_the_openreward_client(client: OpenReward) -> None:
    env = client.environments.get("linecount")
    with env.session(split="train", index=0) as session:
        assert session.supports_score_group()

        def said(text: str) -> GroupCandidate:
            turns = [Message(role="assistant", blocks=[TextBlock(text=text)])]
            return GroupCandidate(messages=turns, metadata={"text": text})

        scores = session.score_group(
            [said("3"), said("4"), [Message(role="user", blocks=[TextBlock(text="3")])]]
        )
        assert [s.reward for s in scores] == [1.0, 0.0, 0.0]
        assert scores[0].metadata == {"said": "3"}


def test_toolset_name_picks_an_openreward_toolset(client: OpenReward) -> None:
    env = client.environments.get("linecount")
    with env.session(split="train", index=0, toolset="claude-code") as session:
        names = {t.name for t in session.list_tools()}
        assert {"answer", "bash", "glob", "read"} <= names
        read = session.call_tool("read", {"file_path": "/tmp/data.txt"})
        assert "3" in read.blocks[0].text


def test_a_150kb_write_tool_call(client: OpenReward) -> None:
    """The toolset's `write` uploads the content as one command through `/run`."""
    content = "".join(f"line {n:06d} of a large file\n" for n in range(6000))  # ~150 KB
    env = client.environments.get("linecount")
    with env.session(split="train", index=0, toolset="claude-code") as session:
        wrote = session.call_tool("write", {"file_path": "/tmp/big.txt", "content": content})
        assert "Successfully wrote" in wrote.blocks[0].text, wrote.blocks[0].text
        digest = session.call_tool("bash", {"command": "sha256sum < /tmp/big.txt"})
    assert len(content) > 150_000
    assert digest.blocks[0].text.split()[0] == hashlib.sha256(content.encode()).hexdigest()


@pytest.mark.parametrize("token", [TOKEN_A, TOKEN_B], ids=["token-a", "token-b"])
def test_sandboxes_count_against_the_client_of_the_session(
    token: str,
    env_server: LiveServer,
    docker_client: docker.DockerClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The environment's sandbox is its session's client's, whichever client plays it:
    ors-sdk sends no key to hand on, the openreward client its own; each session is
    handed a key of its own (issue 48: ors-sdk's sessions under token B counted to A)."""
    client_name = "sandbox-token-0" if token == TOKEN_A else "sandbox-token-1"
    monkeypatch.setenv("OPENREWARD_SESSION_URL", env_server.url)
    with (
        ORS(base_url=env_server.url, api_key=token) as ors,
        ors.environment("linecount").session(split="test", index=0) as session,
    ):
        assert session.call_tool("bash", {"command": "echo hi"}).blocks[0].text.strip() == "hi"
        [box] = api_sandboxes(docker_client, env_server)
        assert box["Labels"]["orsbox.client"] == client_name
    client = OpenReward(api_key=token)
    try:
        with client.environments.get("linecount").session(split="train", index=0) as session:
            assert "OPENREWARD" not in session.call_tool("bash", {"command": "env"}).blocks[0].text
            [box] = api_sandboxes(docker_client, env_server)
            assert box["Labels"]["orsbox.client"] == client_name
    finally:
        client.environments.close()
    assert api_sandboxes(docker_client, env_server) == []
