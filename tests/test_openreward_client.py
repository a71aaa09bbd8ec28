"""The openreward client, unmodified, pointed at orsbox with OPENREWARD_SESSION_URL.

Without a variant it calls bare paths (`/tools`, `/call`, ...) that must reach the
environment its `X-Deployment` header names; with one it prefixes the environment name
(tests/test_deployment_routing.py has the routing rules). It also relies on
`env_name` in task answers and on `/task`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from openreward import OpenReward

from tests.servers import LiveServer


@pytest.fixture
def client(protocol_server: LiveServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenReward]:
    monkeypatch.setenv("OPENREWARD_SESSION_URL", protocol_server.url)
    client = OpenReward(api_key="test-key")
    yield client
    client.environments.close()


def test_bare_path_discovery(client: OpenReward) -> None:
    env = client.environments.get("protocol")
    assert env.list_splits() == ["train", "test", "hard"]
    tasks = env.list_tasks("train")
    assert tasks[2].environment_name == "protocol"
    assert env.num_tasks("hard") == 5
    task = env.get_task("test", 4)
    assert task.task_spec["answer"] == "8" and task.environment_name == "protocol"
    assert [t.task_spec["answer"] for t in env.get_task_range("train", 1, 3)] == ["2", "4"]
    assert "submit" in [t.name for t in env.list_tools()]


def test_bare_path_episode(client: OpenReward) -> None:
    env = client.environments.get("protocol")
    task = env.get_task("train", 3)
    with env.session(task=task) as session:
        assert session.get_prompt()[0].text == "train 3: what is 3+3?"
        assert "hint" in [t.name for t in session.list_tools()]
        result = session.call_tool("submit", {"answer": "6"})
        assert (result.reward, result.finished) == (1.0, True)


def test_variant_episode_by_split_and_index(client: OpenReward) -> None:
    """A variant names the environment in the path; the header then carries the
    deployment's name, even one that names another environment served here
    (tests/test_deployment_routing.py has the rule)."""
    for deployment in ("owner/protocol-server", "protocol"):
        env = client.environments.get(deployment, variant="second_env")
        with env.session(split="validation", index=0) as session:
            assert session.get_prompt()[0].text == "second"
            assert session.call_tool("ping_tool", {}).blocks[0].text == "pong"
