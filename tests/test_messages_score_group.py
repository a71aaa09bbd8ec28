"""`GET /{env}/messages` and `POST /{env}/score_group` for orsbox's own environments,
through the `openreward` client's own calls (bare paths and variants)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from openreward import OpenReward
from openreward.api.environments.types import GroupCandidate, Message, TextBlock
from openreward.api.errors import ScoreGroupFailed, ScoreGroupUnsupported

from tests.servers import LiveServer, start_server

TARGETS = [
    "tests/fixture_envs/scoring_envs.py:Judged",
    "tests/fixture_envs/scoring_envs.py:Conversation",
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = start_server(TARGETS, tmp_path_factory.mktemp("scoring"))
    yield live
    live.stop()


@pytest.fixture
def client(server: LiveServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenReward]:
    monkeypatch.setenv("OPENREWARD_SESSION_URL", server.url)
    client = OpenReward(api_key="unused-key")
    yield client
    client.environments.close()


def said(text: str) -> GroupCandidate:
    return GroupCandidate(messages=[Message(role="assistant", blocks=[TextBlock(text=text)])])


def test_messages_default_to_the_prompt(client: OpenReward) -> None:
    env = client.environments.get("judged")  # the default environment: bare paths
    with env.session(split="test", index=0) as session:
        [message] = session.get_messages()
        assert (message.role, message.blocks[0].text) == ("user", "Name a colour.")
        assert session.get_messages(format="openai") == [
            {"role": "user", "content": "Name a colour."}
        ]


def test_messages_hook(client: OpenReward) -> None:
    env = client.environments.get("conversation", variant="conversation")
    with env.session(split="test", index=0) as session:
        roles = [(m.role, m.blocks[0].text) for m in session.get_messages()]
        assert roles == [("system", "You are terse."), ("user", "Continue.")]


def test_score_group(client: OpenReward) -> None:
    env = client.environments.get("judged", variant="judged")
    assert env.supports_score_group()
    with env.session(split="test", index=0) as session:
        assert session.supports_score_group()
        scores = session.score_group([said("red"), said("yellow"), said("tan")])
        assert [s.reward for s in scores] == [1.0, 0.0, 1.0]
        assert scores[0].metadata == {"rank": 1} and scores[1].metadata is None
        with pytest.raises(ScoreGroupFailed, match="nothing to judge"):
            session.score_group([])


def test_score_group_is_404_when_not_defined(client: OpenReward, server: LiveServer) -> None:
    env = client.environments.get("conversation", variant="conversation")
    assert not env.supports_score_group()
    with env.session(split="test", index=0) as session:
        with pytest.raises(ScoreGroupUnsupported):
            session.score_group([said("x")])
        request = urllib.request.Request(
            f"{server.url}/conversation/score_group",
            data=json.dumps({"candidates": []}).encode(),
            headers={"X-Session-ID": session.sid or "", "Content-Type": "application/json"},
            method="POST",
        )
        with pytest.raises(urllib.error.HTTPError) as answer:
            urllib.request.urlopen(request, timeout=30)
        assert answer.value.code == 404
        assert "does not implement score_group" in answer.value.read().decode()


def test_tool_listing_keeps_the_reference_shape(server: LiveServer, tmp_path: Path) -> None:
    with urllib.request.urlopen(f"{server.url}/conversation/tools", timeout=30) as r:
        assert list(json.load(r)) == ["tools"]
    with urllib.request.urlopen(f"{server.url}/judged/tools", timeout=30) as r:
        assert json.load(r)["supports_score_group"] is True
