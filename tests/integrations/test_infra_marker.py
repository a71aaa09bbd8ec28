"""The `[infra]` marker (docs/infra-failures.md): on a real server, through the real
clients (ors-sdk, openreward, TRL's `OpenRewardSpec`), a grading error and a sandbox
that died under the episode carry it; a tool's own failure does not. And
`orsbox.integrations.trl.mask_infra_failures` masks the first (reward `None`) where a
reward function scoring "no reward" as 0.0 would have scored it 0.0."""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator

import docker
import httpx
import pytest
from openreward import OpenReward
from openreward.api.errors import ToolFailed
from ors.client import ORS

from orsbox.integrations.trl import mask_infra_failures
from orsbox.protocol.reasons import is_infra
from tests.servers import LiveServer, start_server
from tests.sse_client import post_sse

try:
    from trl.experimental import openreward as trl_openreward
except ImportError as e:  # CI installs it (scripts/test.sh) and sets ORSBOX_REQUIRE_TRL
    if os.environ.get("ORSBOX_REQUIRE_TRL") == "1":
        raise
    pytest.skip(f"TRL is not installed ({e})", allow_module_level=True)
pytestmark = pytest.mark.docker

GRADED = "tests/fixture_envs/grading_envs.py:Graded"  # task 1: the runner is missing
FAILING = "tests/fixture_envs/failing_envs.py:Failing"  # `crash`: the tool raises
GRADING = "[infra] grading_error: grading error [runner-missing]: "
CRASH = "tool_failed: tool 'crash' failed: ValueError: kaboom"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, base_image: str) -> Iterator[LiveServer]:
    live = start_server([GRADED, FAILING, "coding"], tmp_path_factory.mktemp("infra"))
    yield live
    live.stop()


def test_a_grading_error_is_marked_and_a_tools_own_failure_is_not(
    server: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ORS(base_url=server.url) as ors:
        graded_env, failing_env = ors.environment("graded"), ors.environment("failing")
        with (
            graded_env.session(split="train", index=1) as session,
            pytest.raises(RuntimeError) as graded,
        ):
            session.call_tool("submit", {"answer": "6"})
        with (
            failing_env.session(split="train", index=0) as session,
            pytest.raises(RuntimeError) as crashed,
        ):
            session.call_tool("crash", {})
    assert GRADING in str(graded.value) and is_infra(str(graded.value))
    assert CRASH in str(crashed.value) and not is_infra(str(crashed.value))
    assert "[infra]" not in str(crashed.value)

    monkeypatch.setenv("OPENREWARD_SESSION_URL", server.url)  # see docs/train-with-trl.md
    envs = OpenReward(api_key="test-key").environments
    try:
        with (
            envs.get("graded").session(split="train", index=1) as s,
            pytest.raises(ToolFailed) as graded_or,
        ):
            s.call_tool("submit", {"answer": "6"})
        with (
            envs.get("failing").session(split="train", index=0) as s,
            pytest.raises(ToolFailed) as crashed_or,
        ):
            s.call_tool("crash", {})
    finally:
        envs.close()
    assert GRADING in str(graded_or.value) and is_infra(str(graded_or.value))
    assert CRASH in str(crashed_or.value) and not is_infra(str(crashed_or.value))


def test_only_the_marker_at_the_start_counts() -> None:
    """As a client shows the text: bare, after ors-sdk's or openreward's "(...) ", after
    TRL's "Error: ". A tool's own failure quoting the marker (text a model can choose)
    is not an infrastructure failure."""
    marked = "[infra] sandbox_gone: tool 'bash' failed: SandboxGone: gone"
    for shown in (marked, f"(sid=ab12) {marked}", f"Error: (env=x session sid=1) {marked}"):
        assert is_infra(shown), shown
    quoted = "tool_failed: tool 'x' failed: KeyError: '[infra] sandbox_gone: no'"
    for shown in (quoted, f"Error: (sid=ab12) {quoted}", "[infra]", "Error: [infra] x"):
        assert not is_infra(shown), shown


def test_a_sandbox_that_dies_under_the_episode_is_marked(
    server: LiveServer, docker_client: docker.DockerClient
) -> None:
    """A real container killed under a `coding` episode: the next call's error is
    `[infra] sandbox_gone`, for the raw stream and for ors-sdk alike."""
    with (
        ORS(base_url=server.url) as ors,
        ors.environment("coding").session(split="train", index=0) as session,
    ):
        assert session.call_tool("bash", {"command": "echo up"}).blocks[0].text.startswith("up")
        sid = session.sid
        found = {"label": f"orsbox.session={sid}"}
        (container,) = docker_client.containers.list(filters=found)
        container.kill()
        with pytest.raises(RuntimeError) as lost:
            session.call_tool("bash", {"command": "echo after"})
    text = str(lost.value)
    assert re.search(r"\) \[infra\] sandbox_gone: ", text), text
    assert is_infra(text)


def test_trl_rollouts_whose_infrastructure_failed_are_masked(
    server: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TRL's adapter reads the grading error as `Error: ...` and reward None (masked by
    GRPOTrainer, as is a rollout that never submitted); `mask_infra_failures` keeps the
    first None and scores the second 0.0, and a tool's own failure 0.0."""
    monkeypatch.setenv("OPENREWARD_SESSION_URL", server.url)
    graded = trl_openreward.OpenRewardSpec(server.url, env_name="graded")
    failing = trl_openreward.OpenRewardSpec(server.url, env_name="failing")
    graded_factory, graded_reward = mask_infra_failures(graded)
    failing_factory, failing_reward = mask_infra_failures(failing)
    ungradable, right, silent = graded_factory(), graded_factory(), graded_factory()
    crashed = failing_factory()
    for env, index in ((ungradable, 1), (right, 0), (silent, 0)):
        env.reset(task_index=index)
    crashed.reset(task_index=0)
    said = ungradable.submit(answer="6")
    assert said.startswith("Error: ") and GRADING in said and is_infra(said)
    assert right.submit(answer="4") == "reward 1.0"
    assert not is_infra(crashed.crash()) and crashed.infra_failed is False
    assert graded.reward_funcs(environments=[ungradable, right, silent]) == [None, 1.0, None]
    assert graded_reward(environments=[ungradable, right, silent]) == [None, 1.0, 0.0]
    assert failing_reward(environments=[crashed]) == [0.0]
    ungradable.reset(task_index=0)  # the slot's next rollout starts unmarked
    assert ungradable.infra_failed is False
    for env in (ungradable, right, silent, crashed):
        env._close()


def test_the_marker_on_the_wire_begins_the_event(server: LiveServer) -> None:
    """The event's text as any client receives it: the marker, then the label."""
    sid = uuid.uuid4().hex
    body = {"env_name": "graded", "split": "train", "index": 1}
    assert httpx.post(f"{server.url}/create", headers={"X-Session-ID": sid}, json=body).is_success
    stream = post_sse(
        f"{server.url}/graded/call", {"name": "submit", "input": {"answer": "6"}}, sid
    )
    httpx.post(f"{server.url}/delete", headers={"X-Session-ID": sid})
    assert stream.names() == ["task_id", "error"]
    assert stream.events[1][1].startswith(GRADING)
