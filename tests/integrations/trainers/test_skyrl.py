"""SkyRL's ORS path against orsbox (docs/trainers.md#skyrl).

SkyRL's `OpenRewardEnv` is not in a package: it is
`examples/train_integrations/openreward/env.py` of github.com/NovaSky-AI/SkyRL (read at
a9564572eb8e, 2026-08-21), a `skyrl_gym` `BaseTextEnv`. Its dataset comes from
`prepare_tasks.py` beside it: per task a session, its prompt and tools, a row with
`env_name`, `split`, `task_index`. Per rollout SkyRL's generator makes the class with
those extras, calls `init(prompt)` (`OpenReward().environments.get(name=...)`,
`.session(split=, index=).__enter__()`), `step(text)` per turn (a `<tool_call>` JSON
block; `call_tool(tool_name=, input=)`; the reward, `None` as 0.0; `done` when the tool
says `finished` or at `max_turns`; any exception becomes `Error: ...`, reward 0.0, not
done) and `close()`.

`SkyRLShaped` below is our own class making those calls in that order on the real
`BaseTextEnv` (skyrl-gym 0.4.0, from PyPI): CI runs it. With `ORSBOX_SKYRL_SOURCE` set
to a checkout, the same tests run SkyRL's own file (tests/integrations/trainers/upstream.py).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import docker
import pytest

from orsbox.integrations.infra import InfraWatch, infra_scope, watch_client
from tests.integrations.trainers import upstream
from tests.integrations.trainers.envs import SETUP_FAILS

base_text_env = pytest.importorskip(
    "skyrl_gym.envs.base_text_env", reason="pip install skyrl-gym==0.4.0 (the test extra)"
)
from openreward import AsyncOpenReward, OpenReward  # noqa: E402
from openreward.api.errors import ToolFailed  # noqa: E402

GRADING = "[infra] grading_error: grading error [runner-missing]: pytest: command not found"


class SkyRLShaped(base_text_env.BaseTextEnv):
    """SkyRL's ORS calls, in its order (see the module's docstring)."""

    def __init__(self, env_config: Any = None, extras: dict[str, Any] | None = None) -> None:
        super().__init__()
        extras = extras or {}
        self.env_name, self.split = extras["env_name"], extras["split"]
        self.task_index, self.max_turns = int(extras["task_index"]), extras.get("max_turns", 10)
        self._client: Any = None
        self._session_ctx: Any = None
        self._session: Any = None

    def init(self, prompt: Any) -> tuple[Any, dict[str, Any]]:
        self._client = OpenReward()
        environment = self._client.environments.get(name=self.env_name)
        self._session_ctx = environment.session(split=self.split, index=self.task_index)
        self._session = self._session_ctx.__enter__()
        return (json.loads(prompt) if isinstance(prompt, str) else prompt), {}

    def step(self, action: str) -> Any:
        self.turns += 1
        start = action.find("<tool_call>")
        if start < 0:
            return {"observations": [], "reward": 0.0, "done": True, "metadata": {}}
        call = json.loads(action[start + len("<tool_call>") :].split("</tool_call>")[0])
        try:
            out = self._session.call_tool(tool_name=call["name"], input=call["arguments"])
            text = "".join(b.text for b in out.blocks if b.type == "text")
            finished, reward = out.finished, 0.0 if out.reward is None else out.reward
        except Exception as e:
            text, finished, reward = f"Error: {e}", False, 0.0
        observation = {"role": "user", "content": f"<tool_response>\n{text}\n</tool_response>"}
        return {
            "observations": [observation],
            "reward": reward,
            "done": finished or self.turns >= self.max_turns,
            "metadata": {"finished": finished},
        }

    def close(self) -> None:
        if self._session_ctx is not None:
            self._session_ctx.__exit__(None, None, None)
            self._session_ctx = self._session = None
        if self._client is not None:
            self._client.close()
            self._client = None


def _prepare(env_name: str, count: int) -> list[dict[str, Any]]:
    """prepare_tasks.py's rows: a session per task for its prompt and tools; a task
    whose session fails is left out (it logs a warning)."""
    rows = []
    with OpenReward() as client:
        environment = client.environments.get(name=env_name)
        for index in range(min(count, environment.num_tasks("train"))):
            try:
                with environment.session(split="train", index=index) as session:
                    prompt = "".join(b.text for b in session.get_prompt() if b.type == "text")
                    tools = [spec.name for spec in session.list_tools()]
            except Exception:
                continue
            messages = [
                {"role": "system", "content": f"tools: {tools}"},
                {"role": "user", "content": prompt},
            ]
            rows.append(
                {
                    "prompt": json.dumps(messages),
                    "env_name": env_name,
                    "split": "train",
                    "task_index": index,
                }
            )
    return rows


def _upstream_prepare(prepare_tasks: Any, env_name: str, count: int) -> list[dict[str, Any]]:
    return asyncio.run(
        prepare_tasks.fetch_tasks_for_env(AsyncOpenReward(), env_name, "train", count)
    )


@pytest.fixture(params=["ours", "skyrl"])
def skyrl(request: pytest.FixtureRequest, ors_url: str) -> Iterator[tuple[type, Any]]:
    """(the environment class, the dataset step) of ours, or of SkyRL's checkout."""
    if request.param == "ours":
        yield SkyRLShaped, _prepare
        return
    with upstream.skyrl() as (env_module, prepare_module):
        yield (
            env_module.OpenRewardEnv,
            lambda name, count: _upstream_prepare(prepare_module, name, count),
        )


def call(name: str, **arguments: str) -> str:
    """The scripted policy's turn: what SkyRL's generator hands `step`, cut at its stop
    string `</tool_call>`."""
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def submit(answer: str) -> str:
    return call("submit", answer=answer)


def _rollout(env_class: type, row: dict[str, Any], turns: list[str]) -> tuple[list[Any], Any]:
    extras = {k: row[k] for k in ("env_name", "split", "task_index")} | {"max_turns": 3}
    env = env_class(env_config=None, extras=extras)
    try:
        messages, _ = env.init(row["prompt"])
        assert messages[-1]["role"] == "user"
        steps = []
        for text in turns:
            steps.append(env.step(text))
            if steps[-1]["done"]:
                break
        return steps, env
    finally:
        env.close()


def test_rewards_from_two_environments_of_one_server(skyrl: tuple[type, Any]) -> None:
    env_class, prepare = skyrl
    math_rows, shaky_rows = prepare("math", 1), prepare("shaky", SETUP_FAILS + 1)
    assert [row["task_index"] for row in shaky_rows] == [0, 1, 2, 3]  # the failed setup left out
    assert "A baker makes 24 muffins" in json.loads(math_rows[0]["prompt"])[-1]["content"]
    assert "what is 2+2?" in json.loads(shaky_rows[0]["prompt"])[-1]["content"]
    outcomes = {}
    for name, row, answer in (
        ("math right", math_rows[0], "7"),
        ("math wrong", math_rows[0], "-1"),
        ("shaky right", shaky_rows[0], "4"),
        ("shaky wrong", shaky_rows[0], "5"),
    ):
        steps, _ = _rollout(env_class, row, [submit(answer)])
        assert len(steps) == 1 and steps[0]["done"] is True, steps
        outcomes[name] = steps[0]["reward"]
    assert outcomes == {
        "math right": 1.0,
        "math wrong": 0.0,
        "shaky right": 1.0,
        "shaky wrong": 0.0,
    }


def test_an_infrastructure_failure_is_a_reward_of_zero(skyrl: tuple[type, Any]) -> None:
    """What SkyRL trains on when the grader could not run: 0.0 at every turn, the
    episode going on to `max_turns` (the client marked the session dead, so the
    model's next submits fail too). The marker reaches the model's text only."""
    env_class, prepare = skyrl
    row = prepare("shaky", 2)[1]
    steps, _ = _rollout(env_class, row, [submit("6")] * 3)
    assert [s["reward"] for s in steps] == [0.0, 0.0, 0.0]
    assert [s["done"] for s in steps] == [False, False, True]
    first = steps[0]["observations"][0]["content"]
    assert (
        first.startswith("<tool_response>\nError: (environment session sid=") and GRADING in first
    )
    assert "session terminated" in steps[1]["observations"][0]["content"]


def marked(env_class: type) -> type:
    """docs/trainers.md's subclass of SkyRL's class (here also of ours)."""

    class Marked(env_class):  # type: ignore[misc,valid-type] # the class under test
        infra_error: str | None = None

        def init(self, prompt: Any) -> Any:
            out = super().init(prompt)
            self._session = InfraWatch(self._session)
            return out

        def step(self, action: str) -> Any:
            out = super().step(action)
            if self._session.infra_failed:
                self.infra_error = self._session.infra_error
                out["done"] = True
            return out

        def get_metrics(self) -> dict[str, Any]:
            return {**super().get_metrics(), "infra_failed": int(self.infra_error is not None)}

    return Marked


def test_a_subclass_ends_and_marks_a_rollout_whose_infrastructure_failed(
    skyrl: tuple[type, Any],
) -> None:
    """docs/trainers.md's subclass: the episode ends at the failure, its metrics say so
    (for a generator to leave it out), a right answer is unchanged."""
    env_class, prepare = skyrl

    Marked = marked(env_class)
    rows = prepare("shaky", 2)
    failed, env = _rollout(Marked, rows[1], [submit("6")] * 3)
    assert len(failed) == 1 and failed[0]["done"] is True and failed[0]["reward"] == 0.0
    assert env.get_metrics()["infra_failed"] == 1 and GRADING in env.infra_error
    right, env = _rollout(Marked, rows[0], [submit("4")])
    assert right[0]["reward"] == 1.0 and env.get_metrics()["infra_failed"] == 0
    # a setup that fails in training (prepare_tasks.py skips a task whose prompt fails):
    # the first call is a 500, which SkyRL's retry does not retry; 0.0 unless marked
    setup_fails = rows[0] | {"task_index": SETUP_FAILS}
    plain, _ = _rollout(env_class, setup_fails, [submit("4")])
    assert plain[0]["reward"] == 0.0 and plain[0]["done"] is False
    assert (
        'Error: 500, message="setup failed: RuntimeError' in plain[0]["observations"][0]["content"]
    )
    failed, env = _rollout(Marked, setup_fails, [submit("4")] * 3)
    assert len(failed) == 1 and env.infra_error.startswith("HTTP 500: 500, message=")


def test_a_sandbox_killed_under_the_episode(
    skyrl: tuple[type, Any], docker_client: docker.DockerClient
) -> None:
    """`coding`'s container killed between two `bash` calls: SkyRL scores the turn
    0.0 and goes on, the model reading `[infra] sandbox_gone`; the subclass ends the
    episode and marks it. The session is deleted at `close()`."""
    env_class, prepare = skyrl
    row = prepare("coding", 1)[0]
    extras = {k: row[k] for k in ("env_name", "split", "task_index")} | {"max_turns": 5}
    env = marked(env_class)(env_config=None, extras=extras)
    try:
        env.init(row["prompt"])
        up = env.step(call("bash", command="echo up"))
        assert up["observations"][0]["content"].startswith("<tool_response>\nup")
        session = {"label": f"orsbox.session={env._session.sid}"}
        (container,) = docker_client.containers.list(filters=session)
        container.kill()
        after = env.step(call("bash", command="echo after"))
    finally:
        env.close()
    assert (after["reward"], after["done"]) == (0.0, True)
    assert "[infra] sandbox_gone: " in after["observations"][0]["content"]
    assert env.get_metrics()["infra_failed"] == 1


def test_a_watched_sync_client_reports_to_its_scope(ors_url: str) -> None:
    """`watch_client` on the sync client (SkyRL's and ROLL's): a session opened inside
    an `infra_scope()` reports its marked failure there; one outside, to none; a
    tool's own failure is not reported."""
    client = watch_client(OpenReward())
    assert watch_client(client) is client
    shaky = client.environments.get(name="shaky")
    try:
        with (
            infra_scope() as scope,
            shaky.session(split="train", index=1) as session,
            pytest.raises(ToolFailed),
        ):
            session.call_tool("submit", {"answer": "6"})
        assert session.infra_failed and scope.infra_error == session.infra_error
        assert GRADING in scope.infra_error
        with shaky.session(split="train", index=2) as unscoped, pytest.raises(ToolFailed):
            unscoped.call_tool("submit", {"answer": "8"})  # the grader raises: its own
        assert not unscoped.infra_failed
    finally:
        client.close()
