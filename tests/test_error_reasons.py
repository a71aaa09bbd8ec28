"""Every failed tool call carries a `reason`, and the real clients show it.

* `ok: false` answers: openreward's names (`not_found`, `input_validation`,
  `episode_finished`) in `reason`; the `openreward` client raises `ToolCallError` with
  that reason and writes it before the text itself, so it gets the bare text; ors-sdk
  (which shows only `error`) gets `reason: text`.
* `error` events: `reason: message` with orsbox's names (`tool_failed`,
  `grading_error`, `sandbox_gone`, `timeout`, `refused_by_policy`), `[infra] ` before
  the label when the failure is not the model's; both clients show the text as their
  exception's message.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import pytest
from openreward import OpenReward
from openreward.api.errors import ToolCallError as OpenRewardToolCallError
from openreward.api.errors import ToolFailed
from ors.client import ORS
from ors.client._types import ToolCallError as OrsToolCallError

from tests.servers import LiveServer, start_server
from tests.sse_client import post_sse

FAILING = "tests/fixture_envs/failing_envs.py:Failing"
DIALOGUE = "tests/fixture_envs/openreward_envs.py:Dialogue"

# tool -> (the label, marked `[infra]` when not the model's fault; the message after it)
RAISED = {
    "crash": ("tool_failed", "tool 'crash' failed: ValueError: kaboom"),
    "gone": ("[infra] sandbox_gone", "tool 'gone' failed: SandboxGone: the sandbox was killed"),
    "unreachable": (
        "[infra] sandbox_error",
        "tool 'unreachable' failed: SandboxError: exec: docker engine unreachable",
    ),
    "missing_file": ("tool_failed", "tool 'missing_file' failed: SandboxFileError: no such"),
    "quoting": ("tool_failed", "tool 'quoting' failed: KeyError: '[infra] sandbox_gone: not"),
    "slow": ("[infra] timeout", "tool 'slow' failed: TimeoutError: the command took too long"),
    "forbidden": ("refused_by_policy", "tool 'forbidden' failed: Forbidden: network access"),
    "ungradable": (
        "[infra] grading_error",
        "grading error [no-reward-file]: the verifier wrote no",
    ),
}
INVALID = "invalid input for tool 'submit': answer: Input should be a valid string"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = start_server([FAILING, DIALOGUE], tmp_path_factory.mktemp("reasons"))
    yield live
    live.stop()


def _session(server: LiveServer) -> str:
    sid = uuid.uuid4().hex
    body = {"env_name": "failing", "split": "train", "index": 0}
    assert httpx.post(f"{server.url}/create", headers={"X-Session-ID": sid}, json=body).is_success
    return sid


def _call(server: LiveServer, sid: str, name: str, tool_input: dict, **headers: str):
    url = f"{server.url}/failing/call"
    return post_sse(url, {"name": name, "input": tool_input}, sid, **headers)


def test_every_failure_carries_its_reason_on_the_wire(server: LiveServer) -> None:
    sid = _session(server)
    invalid = _call(server, sid, "submit", {"answer": 7}).result()
    assert invalid == {
        "ok": False,
        "error": f"input_validation: {INVALID}",
        "reason": "input_validation",
    }
    unknown = _call(server, sid, "nope", {}).result()
    assert unknown["reason"] == "not_found" and unknown["error"].startswith("not_found: unknown")
    refused = _call(server, sid, "refuse", {}).result()
    assert refused == {
        "ok": False,
        "error": "input_validation: no such file: /nowhere",
        "reason": "input_validation",
    }
    for tool, (reason, message) in RAISED.items():
        stream = _call(server, sid, tool, {})
        assert stream.names() == ["task_id", "error"], (tool, stream.raw)
        assert stream.events[1][1].startswith(f"{reason}: {message}"), stream.events[1][1]


def test_the_openreward_client_gets_the_bare_text_and_labels_it_itself(
    server: LiveServer,
) -> None:
    sid = _session(server)
    headers = {"User-Agent": "openreward-sdk/0.1.167"}
    invalid = _call(server, sid, "submit", {"answer": 7}, **headers).result()
    assert invalid == {"ok": False, "error": INVALID, "reason": "input_validation"}
    raised = _call(server, sid, "crash", {}, **headers)
    assert raised.events[1][1].startswith("tool_failed: tool 'crash' failed")


@pytest.fixture
def openreward_client(server: LiveServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenReward]:
    monkeypatch.setenv("OPENREWARD_SESSION_URL", server.url)
    client = OpenReward(api_key="test-key")
    yield client
    client.environments.close()


def test_openreward_client_shows_each_label(openreward_client: OpenReward) -> None:
    env = openreward_client.environments.get("failing")
    with env.session(split="train", index=0) as session:
        with pytest.raises(OpenRewardToolCallError) as invalid:
            session.call_tool("submit", {"answer": 7})
        assert invalid.value.reason == "input_validation"
        assert str(invalid.value) == f"input_validation: {INVALID}"  # one label, not two
        with pytest.raises(OpenRewardToolCallError) as unknown:
            session.call_tool("nope", {})
        assert unknown.value.reason == "not_found"
        with pytest.raises(OpenRewardToolCallError) as refused:
            session.call_tool("refuse", {})
        assert str(refused.value) == "input_validation: no such file: /nowhere"
        assert session.call_tool("submit", {"answer": "4"}).reward == 1.0
    for tool, (reason, message) in RAISED.items():
        with env.session(split="train", index=0) as session:  # a raise ends the session
            with pytest.raises(ToolFailed) as raised:
                session.call_tool(tool, {})
            assert f") {reason}: {message}" in str(raised.value)  # after "(... session sid=...)"


def test_openreward_environments_keep_their_own_reasons(openreward_client: OpenReward) -> None:
    """An `openreward` environment served here refuses calls after `finished` itself;
    its `episode_finished` reaches the client as it is."""
    env = openreward_client.environments.get("dialogue")
    with env.session(split="test", index=0) as session:
        assert session.call_tool("reply", {"answer": "green"}).finished
        with pytest.raises(OpenRewardToolCallError) as after:
            session.call_tool("reply", {"answer": "again"})
        assert after.value.reason == "episode_finished"
        assert "the episode has finished" in after.value.detail


def test_ors_sdk_client_shows_each_label(server: LiveServer) -> None:
    with ORS(base_url=server.url) as ors:
        env = ors.environment("failing")
        with env.session(split="train", index=0) as session:
            with pytest.raises(OrsToolCallError) as invalid:
                session.call_tool("submit", {"answer": 7})
            assert str(invalid.value) == f"input_validation: {INVALID}"
            with pytest.raises(OrsToolCallError, match=r"^not_found: unknown tool 'nope'"):
                session.call_tool("nope", {})
        for tool, (reason, message) in RAISED.items():
            with env.session(split="train", index=0) as session:  # a raise ends the session
                with pytest.raises(RuntimeError) as raised:
                    session.call_tool(tool, {})
                assert f") {reason}: {message}" in str(raised.value)  # after "(sid=...)"
