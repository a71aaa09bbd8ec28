"""slime's and Miles's ORS path against orsbox: the OpenRewardAI cookbook's
`training/{slime,miles}/generate.py` (docs/trainers.md#slime-and-miles).

Neither trainer has ORS code of its own: github.com/OpenRewardAI/openreward-cookbook
(read at f9580a3e766e, 2026-04-28) gives each a custom generate function (the two
`generate.py` are the same file), a reward function and `prepare_tasks.py`.
`prepare_tasks.py` lists each configured environment's tasks
(`environments.get(name).list_tasks(split)`) into rows whose metadata keeps the task
(`server_name`, `environment_name`, `task_spec`, `deployment_name`). Per sample,
`generate(args, sample, sampling_params)` opens `AsyncOpenReward(api_key=...)
.environments.get(deployment_name).session(Task(...), secrets=...)`, reads
`list_tools()` and `get_prompt()`, then per turn asks SGLang for text, parses a
`<tool_call>` JSON block and calls `call_tool(name, arguments)`: a `ToolCallError` (the
model's mistake) becomes `Error: ...` and the loop goes on; any other exception ends the
rollout with `stop_reason = "error"`. The reward is the kept rewards reduced by the
environment's `reward_reduction` (sum), plus `nonterminal_reward` when the episode did
not finish.

`slime_shaped` below is our own rollout making those calls in that order; CI runs
it. With `ORSBOX_COOKBOOK_SOURCE` set to a checkout, the same tests run the cookbook's
own files for slime and for Miles, the model being a scripted stand-in for SGLang's
`/generate` and a character tokenizer (tests/integrations/trainers/upstream.py).
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from openreward import AsyncOpenReward
from openreward.api.environments.client import Task
from openreward.api.errors import ToolCallError

from orsbox.integrations.infra import mask_infra_generate
from tests.integrations.trainers import upstream

GRADING = "[infra] grading_error: grading error [runner-missing]: pytest: command not found"
ENVIRONMENTS = ("math", "shaky")
NONTERMINAL = 0.0  # the cookbook's train_config.yaml
POLICY: contextvars.ContextVar[Callable[[str], str]] = contextvars.ContextVar("policy")


async def prepare(client: Any) -> list[dict[str, Any]]:
    """prepare_tasks.py's rows: every task of each environment's train split."""
    rows = []
    for name in ENVIRONMENTS:
        environment = client.environments.get(name)
        for task in await environment.list_tasks("train"):
            meta = {
                "env_name": name,
                "deployment_name": environment.deployment_name,
                "server_name": task.server_name,
                "environment_name": task.environment_name,
                "namespace": task.namespace,
                "split": "train",
                "task_spec": task.task_spec,
            }
            rows.append({"prompt": f"[{name}]", "label": "", "metadata": json.dumps(meta)})
    return rows


async def slime_shaped(client: Any, sample: Any, policy: Callable[[str], str]) -> Any:
    """generate.py's ORS calls, in its order (see the module's docstring)."""
    meta = json.loads(sample.metadata)
    task = Task(
        server_name=meta["server_name"],
        environment_name=meta["environment_name"],
        task_spec=meta["task_spec"],
        namespace=meta.get("namespace"),
    )
    rewards: list[float] = []
    stop_reason = "max_turns"
    try:
        async with client.environments.get(meta["deployment_name"]).session(task) as active:
            await active.list_tools()
            prompt = "".join(b.text for b in await active.get_prompt() if b.type == "text")
            for _ in range(3):
                text = policy(prompt)
                call = json.loads(text.split("<tool_call>")[1].split("</tool_call>")[0])
                try:
                    out = await active.call_tool(call["name"], call["arguments"])
                except ToolCallError:
                    continue
                if out.reward is not None:
                    rewards.append(out.reward)
                if out.finished:
                    stop_reason = "reached_terminal_state"
                    break
    except Exception:
        stop_reason = "error"
    if stop_reason != "reached_terminal_state":
        rewards.append(NONTERMINAL)
    sample.reward = float(sum(rewards))
    sample.metadata = json.dumps(meta | {"rewards": rewards, "stop_reason": stop_reason})
    return sample


class Ours:
    """Our rollout behind the interface the tests drive, shaped as the cookbook's
    module: a shared client in `_state`, `generate(args, sample, sampling_params)`."""

    def __init__(self) -> None:
        self.module = types.SimpleNamespace(_state=types.SimpleNamespace(or_client=None))

        async def generate(args: Any, sample: Any, sampling_params: Any) -> Any:
            state = self.module._state
            state.or_client = state.or_client or AsyncOpenReward()
            return await slime_shaped(state.or_client, sample, POLICY.get())

        self.module.generate = generate

    async def prepare(self) -> list[dict[str, Any]]:
        client = AsyncOpenReward()
        try:
            return await prepare(client)
        finally:
            await client.environments.aclose()

    async def generate(
        self, sample: Any, policy: Callable[[str], str], masked: bool = False
    ) -> Any:
        POLICY.set(policy)
        generate = mask_infra_generate(self.module) if masked else self.module.generate
        return await generate(None, sample, {})

    async def close(self) -> None:
        if self.module._state.or_client is not None:
            await self.module._state.or_client.environments.aclose()


class CharTokenizer:
    """What generate.py asks of its tokenizer: `encode`, a token per character."""

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [ord(c) for c in text]


class Cookbook:
    """The cookbook's files for `trainer` (slime or miles), the model scripted."""

    def __init__(self, files: types.SimpleNamespace, config_path: Path) -> None:
        self.files, self.config_path = files, config_path
        self.uploads: list[str] = []
        state = files.generate._state
        state.tokenizer = CharTokenizer()  # no tokenizer to download: the scripted model's
        self.args = types.SimpleNamespace(
            hf_checkpoint="scripted",
            rollout_max_response_len=512,
            rollout_max_total_len=1 << 20,
        )

        async def upload(**kwargs: Any) -> None:  # the hosted platform's rollout log
            self.uploads.append(kwargs["rollout_name"])

        async def sglang(session: Any, url: str, text: str, **_: Any) -> Any:
            said = POLICY.get()(text)  # this rollout's policy (each asyncio task its own)
            return files.generate.GenResult(said, [ord(c) for c in said], [0.0] * len(said))

        files.generate._upload_rollout = upload
        files.generate.sglang_generate = sglang

    async def prepare(self) -> list[dict[str, Any]]:
        out = self.config_path.with_name("tasks.jsonl")
        await self.files.prepare_tasks.fetch_and_write(str(self.config_path), str(out), None)
        return [json.loads(line) for line in out.read_text().splitlines()]

    async def generate(
        self, sample: Any, policy: Callable[[str], str], masked: bool = False
    ) -> Any:
        POLICY.set(policy)
        module = self.files.generate
        generate = mask_infra_generate(module) if masked else module.generate
        sample = await generate(self.args, sample, {})
        reward = await self.files.reward.reward_func(self.args, sample)
        assert reward == sample.reward  # --custom-rm-path reward.py agrees with generate
        assert len(sample.loss_mask) == sample.response_length
        return sample

    async def close(self) -> None:
        state = self.files.generate._state
        if state.http_session is not None:
            await state.http_session.close()
        if state.or_client is not None:
            await state.or_client.environments.aclose()


CONFIG = {
    "environments": {
        name: {"splits": ["train"], "nonterminal_reward": NONTERMINAL, "max_turns": 3}
        for name in ENVIRONMENTS
    },
    "system_prompt_template": "Tools:\n{tools}\nCall one as <tool_call>{{...}}</tool_call>.",
}


@pytest.fixture(params=["ours", "slime", "miles"])
def trainer(
    request: pytest.FixtureRequest,
    ors_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Callable[[Any], Any]]:
    """Runs a coroutine function of the rollout code (ours, or the cookbook's for
    slime or Miles) in one event loop, as the trainer's rollout manager does."""
    config_path = tmp_path / "train_config.yaml"
    config_path.write_text(json.dumps(CONFIG))  # YAML reads JSON
    monkeypatch.setenv("TRAIN_CONFIG", str(config_path))

    def runner(build: Callable[[], Any]) -> Callable[[Any], Any]:
        def run(body: Any) -> Any:
            async def main() -> Any:
                code = build()
                try:
                    return await body(code)
                finally:
                    await code.close()

            return asyncio.run(main())

        return run

    if request.param == "ours":
        yield runner(Ours)
        return
    with upstream.cookbook(request.param) as files:
        yield runner(lambda: Cookbook(files, config_path))


def answering(answers: dict[str, str]) -> Callable[[str], str]:
    """The scripted policy: a submit of the answer for the question it sees."""

    def policy(text: str) -> str:
        (answer,) = [a for question, a in answers.items() if question in text]
        call = {"name": "submit", "arguments": {"answer": answer}}
        return f"<tool_call>\n{json.dumps(call)}\n</tool_call>"

    return policy


def _sample(row: dict[str, Any]) -> types.SimpleNamespace:
    return types.SimpleNamespace(prompt=row["prompt"], metadata=row["metadata"])


def _pick(rows: list[dict[str, Any]], env_name: str, question: str) -> dict[str, Any]:
    (row,) = [
        r
        for r in rows
        if json.loads(r["metadata"])["env_name"] == env_name
        and json.loads(r["metadata"])["task_spec"]["question"].startswith(question)
    ]
    return row


MATH_0 = "A baker makes 24 muffins"
SHAKY_0 = "[graded] what is 2+2?"
SHAKY_1 = "[runner missing]"


def test_rewards_from_two_environments_of_one_server(trainer: Callable[[Any], Any]) -> None:
    async def body(code: Any) -> dict[str, float]:
        rows = await code.prepare()
        math, shaky = _pick(rows, "math", MATH_0), _pick(rows, "shaky", SHAKY_0)
        right = answering({MATH_0: "7", "2+2": "4"})
        wrong = answering({MATH_0: "-1", "2+2": "5"})
        # the rollouts of a step run together, as the trainer's rollout manager runs them
        samples = await asyncio.gather(
            *(
                code.generate(_sample(row), policy)
                for policy in (right, wrong)
                for row in (math, shaky)
            )
        )
        for sample in samples:
            assert json.loads(sample.metadata)["stop_reason"] == "reached_terminal_state"
        return dict(
            zip(
                ["math right", "shaky right", "math wrong", "shaky wrong"],
                [s.reward for s in samples],
                strict=True,
            )
        )

    assert trainer(body) == {
        "math right": 1.0,
        "shaky right": 1.0,
        "math wrong": 0.0,
        "shaky wrong": 0.0,
    }


def test_an_infrastructure_failure_is_a_reward_of_zero(trainer: Callable[[Any], Any]) -> None:
    """A grading error is a `ToolFailed`, not the `ToolCallError` the loop catches: the
    rollout ends with `stop_reason` "error" and the reward of an unfinished episode,
    0.0 with the cookbook's `nonterminal_reward`, trained on. A setup that failed
    (the prompt's request answered 500) ends the same way."""

    async def body(code: Any) -> list[tuple[float, str]]:
        rows = await code.prepare()
        failing = [_pick(rows, "shaky", SHAKY_1), _pick(rows, "shaky", "what is 2+2? (its setup")]
        policy = answering({"3+3": "6", "2+2": "4"})
        samples = [await code.generate(_sample(row), policy) for row in failing]
        return [(s.reward, json.loads(s.metadata)["stop_reason"]) for s in samples]

    assert trainer(body) == [(0.0, "error"), (0.0, "error")]


def test_the_wrapped_generate_leaves_failed_rollouts_out_of_the_loss(
    trainer: Callable[[Any], Any],
) -> None:
    """`orsbox.integrations.infra.mask_infra_generate` around the same generate
    (docs/trainers.md): the two failures above get `remove_sample`, with their error in
    the metadata; a wrong answer, rollouts at once, is scored as before."""

    async def body(code: Any) -> list[tuple[float, bool, str | None]]:
        rows = await code.prepare()
        picked = [
            _pick(rows, "shaky", SHAKY_1),
            _pick(rows, "shaky", "what is 2+2? (its setup"),
            _pick(rows, "shaky", SHAKY_0),
        ]
        policy = answering({"3+3": "6", "2+2": "5"})
        samples = await asyncio.gather(
            *(code.generate(_sample(row), policy, masked=True) for row in picked)
        )
        return [
            (
                s.reward,
                getattr(s, "remove_sample", False),
                json.loads(s.metadata).get("infra_error"),
            )
            for s in samples
        ]

    graded, setup, wrong = trainer(body)
    assert graded[:2] == (0.0, True) and GRADING in graded[2]
    assert setup[:2] == (0.0, True) and setup[2].startswith("HTTP 500: ")
    assert wrong == (0.0, False, None)
