"""`GET /{env}/messages` and `POST /{env}/score_group` for orsbox's own environments,
through the `openreward` client's own calls (bare paths and variants), and a scoring
taking its turn with the session's tool calls."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from openreward import OpenReward
from openreward.api.environments.types import GroupCandidate, Message, TextBlock
from openreward.api.errors import ScoreGroupFailed, ScoreGroupUnsupported

from orsbox.protocol.reasons import is_infra
from tests.servers import LiveServer, start_server
from tests.sse_client import Stream, post_sse
from tests.waiting import wait_until

TARGETS = [
    "tests/fixture_envs/scoring_envs.py:Judged",
    "tests/fixture_envs/scoring_envs.py:Conversation",
    "tests/fixture_envs/scoring_envs.py:Turns",
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
        with pytest.raises(ScoreGroupFailed, match="nothing to judge") as judged:
            session.score_group([])
        assert not is_infra(str(judged.value))  # the environment's own failure
        assert "tool_failed: score_group failed: ValueError" in str(judged.value)
        with pytest.raises(ScoreGroupFailed) as down:
            session.score_group([said("red"), said("judge-down")])
        assert is_infra(str(down.value)), str(down.value)  # the host's: a trainer masks it
        assert "grading_error: grading error [judge-unreachable]" in str(down.value)


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


@pytest.mark.parametrize("first", ["call", "scoring"])
def test_a_scoring_and_a_call_on_one_session_take_turns(
    server: LiveServer, first: str, tmp_path: Path
) -> None:
    """A call and a scoring posted on one session while the other holds it: the second
    waits for the first to end (the session's call lock), so neither sees the other
    running and the second sees the first finished. The first holds until its gate
    opens, which happens only once the server has taken the second (its stream began)."""
    sid = _turns_session(server)

    def post(what: str, gate: Path, accepted: threading.Event | None = None) -> Stream:
        if what == "call":
            body = {"name": "hold", "input": {"gate": str(gate)}}
            return post_sse(f"{server.url}/turns/call", body, sid, first_event=accepted)
        text = {"type": "text", "text": str(gate)}
        candidates = [{"messages": [{"role": "assistant", "blocks": [text]}]}]
        body = {"candidates": candidates}
        return post_sse(f"{server.url}/turns/score_group", body, sid, first_event=accepted)

    second = "scoring" if first == "call" else "call"
    gates = {first: tmp_path / first, second: tmp_path / second}
    started = {what: Path(f"{gate}.started") for what, gate in gates.items()}
    accepted = threading.Event()
    with ThreadPoolExecutor(2) as pool:
        one = pool.submit(post, first, gates[first])
        wait_until(started[first].exists, 30, message=f"the {first} holds the episode")
        two = pool.submit(post, second, gates[second], accepted)
        assert accepted.wait(30), f"the server did not take the {second}"
        assert not started[second].exists()  # it waits for its turn
        for gate in gates.values():
            Path(f"{gate}.release").touch()
        seen = {first: _seen(first, one.result()), second: _seen(second, two.result())}
    assert seen[first] == {"finished_before": [], "running_with": []}
    assert seen[second] == {"finished_before": [first], "running_with": []}


def _turns_session(server: LiveServer) -> str:
    sid = httpx.post(f"{server.url}/create_session", timeout=30).json()["sid"]
    spec = {"env_name": "turns", "split": "test", "index": 0}
    created = httpx.post(f"{server.url}/create", headers={"X-Session-ID": sid}, json=spec)
    assert created.status_code == 200, created.text
    return sid


def _seen(what: str, stream: Stream) -> dict:
    result = stream.result()
    if what == "call":
        return result["output"]["metadata"]
    return result["scores"][0]["metadata"]
