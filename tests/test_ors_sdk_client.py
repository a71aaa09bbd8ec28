"""The ors-sdk reference client, unmodified, against a real orsbox server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from ors.client import ORS
from ors.client._types import ToolCallError

from tests.fixture_envs.protocol_envs import BIG_TEXT
from tests.servers import LiveServer


@pytest.fixture
def client(protocol_server: LiveServer) -> Iterator[ORS]:
    with ORS(base_url=protocol_server.url) as ors:
        yield ors


def test_discovery(client: ORS) -> None:
    env = client.environment("protocol")
    assert env.list_splits() == ["train", "test", "hard"]
    tasks = env.list_tasks(split="train")
    assert len(tasks) == 5 and tasks[1].task_spec["answer"] == "2"
    assert env.num_tasks("test") == 5
    assert env.get_task("hard", 3).task_spec["question"].startswith("hard 3")
    assert [t.task_spec["answer"] for t in env.get_task_range("train", -2)] == ["6", "8"]
    names = [t.name for t in env.list_tools()]
    assert names == sorted(names) and "submit" in names and "hint" not in names


def test_whole_episode(client: ORS) -> None:
    env = client.environment("protocol")
    task = env.list_tasks(split="test")[3]
    with env.session(task=task) as session:
        assert session.get_prompt()[0].text == "test 3: what is 3+3?"
        tool_names = [t.name for t in session.list_tools()]
        assert "hint" in tool_names  # task-specific tools come through /task_tools
        hint = session.call_tool("hint", {})
        assert hint.blocks[0].text == "the answer has 1 digits"
        wrong = session.call_tool("submit", {"answer": "5"})
        assert (wrong.reward, wrong.finished) == (0.0, True)
        right = session.call_tool("submit", {"answer": "6"})
        assert (right.reward, right.finished, right.blocks[0].text) == (1.0, True, "Correct!")


def test_large_result_arrives_byte_identical(client: ORS) -> None:
    env = client.environment("protocol")
    with env.session(split="train", index=0) as session:
        result = session.call_tool("big", {})
    assert len(BIG_TEXT.encode()) > 10_000
    assert result.blocks[0].text == BIG_TEXT


def test_split_and_index_session_and_tool_errors(client: ORS) -> None:
    env = client.environment("protocol")
    with env.session(split="hard", index=4) as session:
        assert session.get_prompt()[0].text == "hard 4: what is 4+4?"
        with pytest.raises(ToolCallError, match=r"unknown tool 'nope'; available tools: .*submit"):
            session.call_tool("nope", {})
        with pytest.raises(RuntimeError, match="kaboom"):
            session.call_tool("explode", {})
        # the session survives both errors
        assert session.call_tool("echo", {"text": "still here"}).blocks[0].text == "still here"


def test_secrets_reach_the_environment(client: ORS) -> None:
    env = client.environment("protocol")
    with env.session(split="train", index=0, secrets={"token": "sk-abcdef123456"}) as session:
        result = session.call_tool("secret_names", {})
        assert result.blocks[0].text == "token"
        leaked = session.call_tool("leak", {})
        assert "sk-abcdef123456" not in leaked.blocks[0].text
        assert "[redacted]" in leaked.blocks[0].text


def test_second_environment_by_name(client: ORS) -> None:
    env = client.environment("second_env")
    with env.session(task=env.list_tasks("validation")[0]) as session:
        assert session.call_tool("ping_tool", {}).reward == 0.5
