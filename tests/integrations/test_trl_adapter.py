"""TRL's own ORS adapter (`trl.experimental.openreward.OpenRewardSpec`, trl 1.16.0)
against one `orsbox serve` with several environments, driven exactly as `GRPOTrainer`
drives it: `train_dataset`, `environment_factory()` once per rollout slot, `reset(**row)`
per rollout, the bound tool methods called with the model's arguments as keywords, then
`reward_funcs(environments=...)`. The acceptance test of docs/train-with-trl.md.
"""

from __future__ import annotations

import inspect
import json
import os
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from orsbox.bundle import environments_dir
from orsbox.sandbox.host import owner as L
from tests.servers import LiveServer, start_server
from tests.waiting import wait_until

try:
    from trl.experimental import openreward as trl_openreward
except ImportError as e:  # CI installs it (scripts/test.sh) and sets ORSBOX_REQUIRE_TRL
    if os.environ.get("ORSBOX_REQUIRE_TRL") == "1":
        raise
    pytest.skip(
        f"TRL is not installed ({e}): pip install --no-deps trl==1.16.0 (as scripts/test.sh)",
        allow_module_level=True,
    )
pytestmark = pytest.mark.docker

EXAMPLES = environments_dir() / "coding" / "examples"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, base_image: str) -> Iterator[LiveServer]:
    live = start_server(["math", "coding"], tmp_path_factory.mktemp("trl"))
    yield live
    live.stop()


@pytest.fixture
def spec_for(server: LiveServer, monkeypatch: pytest.MonkeyPatch) -> Iterator:
    """`OpenRewardSpec(url, env_name=...)` as docs/train-with-trl.md writes it: the
    openreward client puts `sessions.` before the URL's host unless this is set."""
    monkeypatch.setenv("OPENREWARD_SESSION_URL", server.url)
    made = []

    def make(env_name: str, **options: object):
        spec = trl_openreward.OpenRewardSpec(server.url, env_name=env_name, **options)
        made.append(spec)
        return spec

    yield make
    for spec in made:
        spec._sdk_client.environments.close()


def _containers(client: docker.DockerClient, server: LiveServer) -> list[str]:
    found = client.api.containers(all=True, filters={"label": f"{L.PID}={server.process.pid}"})
    return [c["Id"] for c in found]


def _play(env: object, example: Path) -> list[str]:
    """The calls of one of the environment's example episodes, as GRPOTrainer makes a
    model's tool calls: the bound method, the arguments as keywords."""
    said = []
    for line in example.read_text().splitlines():
        call = json.loads(line)
        said.append(getattr(env, call["name"])(**call["input"]))
    return said


def test_math_through_the_adapter(spec_for) -> None:
    spec = spec_for("math", num_tasks=2)
    dataset = spec.train_dataset
    assert len(dataset) == 2 and dataset[0]["task_index"] == 0
    assert dataset[0]["question"].startswith("A baker makes 24 muffins")  # math's, by name
    factory = spec.environment_factory
    group = [factory() for _ in range(4)]  # two prompts, a GRPO group of two each
    submit = inspect.signature(group[0].submit)
    assert list(submit.parameters) == ["answer"] and submit.parameters["answer"].annotation is str
    rows = [dataset[0], dataset[0], dataset[1], dataset[1]]
    for env, row in zip(group, rows, strict=True):
        assert row["question"] in env.reset(**row)
    gold = [row["answer"].split("####")[-1].strip() for row in rows]
    # a model's arguments as it wrote them: a number where the tool takes a string
    said = group[1].submit(answer=int(gold[1]))
    assert said.startswith("Error: input_validation: invalid input for tool 'submit': answer:")
    assert group[0].submit(answer=gold[0]) == "Correct!"
    assert group[1].submit(answer="-1") == "Incorrect."  # the answer not given away
    # a second submit, the right answer this time: the first one's result, so TRL's
    # default reward (the rollout's last) still scores the first answer
    assert group[1].submit(answer=gold[1]) == "Incorrect."
    assert group[2].submit(answer=gold[2]) == "Correct!"
    assert group[3].submit(answer="-1").startswith("Incorrect.")
    assert spec.reward_funcs(environments=group) == [1.0, 0.0, 1.0, 0.0]
    for env in group:
        env._close()


def test_coding_through_the_adapter_leaves_no_container(
    spec_for, server: LiveServer, docker_client: docker.DockerClient
) -> None:
    """The second environment of the same server, each rollout in a container of its
    own: the right and the wrong solution of task 0, then close."""
    spec = spec_for("coding", num_tasks=1)
    row = spec.train_dataset[0]
    assert row["id"] == "is_palindrome"
    factory = spec.environment_factory
    right, wrong = factory(), factory()
    assert {"bash", "write_file", "submit"} <= {n for n in dir(right) if not n.startswith("_")}
    for env in (right, wrong):
        assert "def is_palindrome(text: str) -> bool" in env.reset(**row)
    assert len(_containers(docker_client, server)) >= 2
    said = _play(right, EXAMPLES / "train-0-correct.jsonl")
    assert said[1].startswith("True")  # bash ran in the sandbox
    failed = _play(wrong, EXAMPLES / "train-0-wrong.jsonl")[-1]
    assert "expected True" in failed  # the grader shows the failing cases ...
    assert spec.reward_funcs(environments=[right, wrong]) == [1.0, 0.0]
    # ... so the model fixes its solution and submits again: the first submit's
    # output comes back, reward unchanged (a manifest's submit is graded once)
    assert _play(wrong, EXAMPLES / "train-0-correct.jsonl")[-1] == failed
    assert spec.reward_funcs(environments=[right, wrong]) == [1.0, 0.0]
    assert (right.finished, wrong.finished) == (True, True)
    for env in (right, wrong):
        env._close()
    wait_until(
        lambda: not _containers(docker_client, server),
        60,
        interval_s=0.2,
        message="every rollout's container removed after close",
    )
