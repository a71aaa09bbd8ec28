"""Alibaba ROLL's ORS path against orsbox (docs/trainers.md#alibaba-roll).

ROLL is not on PyPI (`roll` there is another project); its `OpenRewardEnv` is
`roll/pipeline/agentic/env/openreward/openreward_env.py` of github.com/alibaba/ROLL
(read at 8eb27cc2dc34, 2026-08-19), a `gem.Env` that `AgentNativeStepEnvManager`
drives: made once per env worker (`OpenReward(api_key=...)`,
`environments.get(name=...)`, `num_tasks(split)`), then per episode `reset(seed)` (task
`seed % num_tasks`; `session(split=, index=)` entered, retried with a backoff;
`list_tools()`, `get_prompt()`: a failure there sets `env_reset_failed`, which the
manager turns into a dropped placeholder rollout), `step(text)` per turn (a
`<tool_call>` block, Qwen's XML or JSON; `call_tool(name, arguments)`; a reward that is
not `None` kept; any exception becomes `Error executing tool ...`, not finished; on
`finished` the episode's reward is the kept rewards' sum and the session is closed; past
`max_steps` the same sum, truncated) and `close()`.

`RollShaped` below is our own class making those calls in that order (gem's base class
is not needed for them); CI runs it. With `ORSBOX_ROLL_SOURCE` set to a checkout, the
same tests run ROLL's own file (tests/integrations/trainers/upstream.py).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import docker
import pytest
from openreward import OpenReward

from orsbox.bundle import environments_dir
from orsbox.integrations.infra import InfraWatch
from orsbox.sandbox.host import owner as L
from tests.integrations.trainers import upstream
from tests.integrations.trainers.envs import SETUP_FAILS
from tests.servers import LiveServer
from tests.waiting import wait_until

EXAMPLES = environments_dir() / "coding" / "examples"

GRADING = "[infra] grading_error: grading error [runner-missing]: pytest: command not found"


class RollShaped:
    """ROLL's ORS calls, in its order (see the module's docstring)."""

    def __init__(
        self,
        environment_name: str,
        split: str = "train",
        max_steps: int = 16,
        retry_max_attempts: int = 3,
        retry_backoff_seconds: float = 5.0,
        **_: Any,
    ) -> None:
        self._split, self._max_steps = split, max_steps
        self._attempts, self._backoff = retry_max_attempts, retry_backoff_seconds
        self._client = OpenReward()
        self._or_env = self._client.environments.get(name=environment_name)
        self._num_tasks = self._or_env.num_tasks(split)
        self._session: Any = None
        self.env_reset_failed = False

    def reset(self, seed: int | None = None) -> tuple[list[dict[str, str]], dict[str, Any]]:
        self.close()
        self._rewards: list[float] = []
        self.current_step, self.env_reset_failed = 0, False
        index = 0 if seed is None else seed % self._num_tasks
        for attempt in range(self._attempts + 1):
            try:
                self._session = self._or_env.session(split=self._split, index=index)
                self._session.__enter__()
                break
            except Exception:
                if attempt == self._attempts:
                    self.env_reset_failed = True
                    return [], {"failure_mode": "session_creation_failed"}
                time.sleep(self._backoff * 2**attempt)
        try:
            tools, blocks = self._session.list_tools(), self._session.get_prompt()
        except Exception as e:
            self.env_reset_failed = True
            self.close()
            return [], {"error_msg": str(e), "failure_mode": "tools_or_prompt_failed"}
        prompt = "".join(b.text for b in blocks if b.type == "text")
        return [{"role": "user", "content": prompt}], {"tools": [t.name for t in tools]}

    def step(self, action: str) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        self.current_step += 1
        if self.current_step > self._max_steps:
            self.close()
            return [], float(sum(self._rewards)), True, True, {"stop_reason": "max_steps"}
        call = json.loads(action.split("<tool_call>")[1].split("</tool_call>")[0])
        try:
            out = self._session.call_tool(call["name"], call["arguments"])
            text, finished = "".join(b.text for b in out.blocks if b.type == "text"), out.finished
            if out.reward is not None:
                self._rewards.append(out.reward)
        except Exception as e:
            text, finished = f"Error executing tool '{call['name']}': {e}", False
        message = {"role": "user", "content": f"<tool_response>\n{text}\n</tool_response>"}
        reward = float(sum(self._rewards)) if finished else 0.0
        if finished:
            self.close()
        return [message], reward, finished, False, {"stop_reason": "finished" if finished else ""}

    def close(self) -> None:
        if self._session is not None:
            self._session.__exit__(None, None, None)
            self._session = None


@pytest.fixture(params=["ours", "roll"])
def roll_env(request: pytest.FixtureRequest, ors_url: str) -> Iterator[Any]:
    """Makes the environment class of ours or of ROLL's checkout, as ROLL's YAML
    `env_config` does; closes each one's client after the test (ROLL never closes it:
    its env workers keep it for their life)."""
    made: list[Any] = []

    def make(cls: type, name: str, **config: Any) -> Any:
        made.append(cls(environment_name=name, split="train", retry_backoff_seconds=0.1, **config))
        return made[-1]

    if request.param == "ours":
        yield lambda name, **config: make(RollShaped, name, **config)
    else:
        with upstream.roll() as module:
            yield lambda name, **config: make(module.OpenRewardEnv, name, **config)
    for env in made:
        env.close()
        env._client.close()


def submit(answer: str) -> str:
    """The scripted policy's turn, in the JSON form ROLL's parser accepts."""
    call = {"name": "submit", "arguments": {"answer": answer}}
    return f"<tool_call>\n{json.dumps(call)}\n</tool_call><|im_end|>"


def test_rewards_from_two_environments_of_one_server(roll_env: Any) -> None:
    math, shaky = roll_env("math"), roll_env("shaky")
    outcomes, prompts = {}, {}
    for name, env, answer in (
        ("math right", math, "7"),
        ("math wrong", math, "-1"),
        ("shaky right", shaky, "4"),
        ("shaky wrong", shaky, "5"),
    ):
        observation, _ = env.reset(seed=0)  # seed % num_tasks: task 0
        assert observation[0]["role"] == "user" and not env.env_reset_failed
        prompts[name.split()[0]] = observation[0]["content"]
        _, reward, terminated, truncated, _ = env.step(submit(answer))
        assert (terminated, truncated) == (True, False)
        outcomes[name] = reward
    assert prompts["math"].startswith("A baker makes 24 muffins")
    assert "what is 2+2?" in prompts["shaky"]
    assert outcomes == {
        "math right": 1.0,
        "math wrong": 0.0,
        "shaky right": 1.0,
        "shaky wrong": 0.0,
    }


def test_an_infrastructure_failure_is_a_reward_of_zero(roll_env: Any) -> None:
    """The grader could not run: the model reads the error and goes on; the session
    is dead, so every later call fails too; past `max_steps` the episode ends,
    truncated, with the sum of no rewards: 0.0, trained on."""
    env = roll_env("shaky", max_steps=2)
    env.reset(seed=1)
    first = env.step(submit("6"))
    assert first[1:4] == (0.0, False, False)
    text = first[0][-1]["content"]
    assert text.startswith("<tool_response>\nError executing tool 'submit': (environment session")
    assert GRADING in text
    second = env.step(submit("6"))
    assert second[1:4] == (0.0, False, False) and "session terminated" in second[0][-1]["content"]
    assert env.step(submit("6"))[1:4] == (0.0, True, True)


def test_a_setup_that_failed_is_a_reset_failure(roll_env: Any) -> None:
    """The session's setup failed (a 500 with `"infra": true` on its first request):
    `reset` sets `env_reset_failed`, which ROLL's manager turns into a placeholder
    rollout with `drop_flag`, out of training."""
    env = roll_env("shaky")
    observation, info = env.reset(seed=SETUP_FAILS)
    assert observation == [] and env.env_reset_failed is True
    assert info["failure_mode"] == "tools_or_prompt_failed"


def test_a_subclass_ends_and_marks_an_episode_whose_infrastructure_failed(roll_env: Any) -> None:
    """docs/trainers.md's subclass: the episode ends at the failure with a
    `failure_mode` beginning `infra` (for a group filter to drop); a right answer is
    unchanged."""
    base = type(roll_env("shaky"))

    class Marked(base):  # type: ignore[misc,valid-type] # the class under test
        def _watch(self) -> None:
            if self._session is not None and not isinstance(self._session, InfraWatch):
                self._session = InfraWatch(self._session)

        def reset(self, seed: int | None = None) -> Any:
            out = super().reset(seed)
            self._watch()
            return out

        def step(self, action: Any) -> Any:
            session = self._session
            observation, reward, terminated, truncated, info = super().step(action)
            if isinstance(session, InfraWatch) and session.infra_failed:
                self.close()
                info["failure_mode"] = f"infra: {session.infra_error}"
                return observation, reward, True, True, info
            return observation, reward, terminated, truncated, info

    env = Marked(environment_name="shaky", split="train")
    try:
        env.reset(seed=1)
        _, reward, terminated, truncated, info = env.step(submit("6"))
        assert (reward, terminated, truncated) == (0.0, True, True)
        assert info["failure_mode"].startswith("infra: ") and GRADING in info["failure_mode"]
        env.reset(seed=0)
        _, reward, terminated, _, info = env.step(submit("4"))
        assert (reward, terminated) == (1.0, True) and not info.get("failure_mode")
    finally:
        env.close()
        env._client.close()


def test_coding_in_a_container_of_its_own(
    roll_env: Any, server: LiveServer, docker_client: docker.DockerClient
) -> None:
    """The server's third environment, a container per episode: a group of two envs
    (one seed, one task) playing the example episodes, tool call by tool call; each
    episode's container removed when it ends."""
    right, wrong = roll_env("coding"), roll_env("coding")
    for env in (right, wrong):
        observation, _ = env.reset(seed=0)
        assert "def is_palindrome(text: str) -> bool" in observation[0]["content"]
    assert len(_containers(docker_client, server)) == 2
    results = {}
    for env, example in ((right, "train-0-correct"), (wrong, "train-0-wrong")):
        for line in (EXAMPLES / f"{example}.jsonl").read_text().splitlines():
            call = json.loads(line)
            action = f"<tool_call>\n{json.dumps({'name': call['name'], 'arguments': call['input']})}\n</tool_call>"
            observation, reward, terminated, _, _ = env.step(action)
        results[example] = (reward, terminated)
    assert results == {"train-0-correct": (1.0, True), "train-0-wrong": (0.0, True)}
    assert "expected True" in observation[-1]["content"]  # the grader's failing case
    wait_until(
        lambda: not _containers(docker_client, server),
        30,
        interval_s=0.2,
        message="each episode's container removed when it ended",
    )


def _containers(client: docker.DockerClient, server: LiveServer) -> list[str]:
    found = client.api.containers(all=True, filters={"label": f"{L.PID}={server.process.pid}"})
    return [c["Id"] for c in found]
