"""The four bundled environments, served by `orsbox serve` with no argument: a correct
episode each through the ors-sdk client, a correct and a wrong one through
`orsbox run --url`, and a correct one through `orsbox run` in-process."""

from __future__ import annotations

import json

import httpx
import pytest
from ors.client import ORS

from tests.environments.conftest import example, orsbox
from tests.runtimes import RUNSC_ENGINE, runtime_available
from tests.servers import LiveServer

# (environment, example file, expected reward); every example plays train[0]
EPISODES = [
    (env, f"train-0-{kind}", reward)
    for env in ("math", "coding", "swe", "terminal")
    for kind, reward in (("correct", 1.0), ("wrong", 0.0))
]


def test_all_four_are_served(bundled_server: LiveServer) -> None:
    names = httpx.get(f"{bundled_server.url}/list_environments", timeout=10).json()
    assert names == ["math", "coding", "swe", "terminal"]  # math first: the default


@pytest.mark.parametrize("env", ["math", "coding", "swe", "terminal"])
def test_correct_episode_through_the_ors_sdk_client(bundled_server: LiveServer, env: str) -> None:
    lines = example(env, "train-0-correct").read_text().splitlines()
    calls = [json.loads(line) for line in lines]
    with ORS(base_url=bundled_server.url) as client:
        environment = client.environment(env)
        task = environment.list_tasks("train")[0]
        with environment.session(task=task) as session:
            assert session.get_prompt()[0].text
            for call in calls:
                result = session.call_tool(call["name"], call["input"])
    assert (result.reward, result.finished) == (1.0, True)


@pytest.mark.parametrize(("env", "actions", "reward"), EPISODES)
def test_orsbox_run_against_a_server(
    bundled_server: LiveServer, env: str, actions: str, reward: float
) -> None:
    done = orsbox(
        "run", env, "--split", "train", "--index", "0",
        "--actions", str(example(env, actions)), "--url", bundled_server.url,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.rstrip().endswith(f"final reward: {reward}  finished: true")
    assert "prompt" in done.stdout and "call 1:" in done.stdout


@pytest.mark.parametrize("env", ["math", "coding", "swe", "terminal"])
def test_orsbox_run_in_process(bundled_images: None, env: str) -> None:
    done = orsbox("run", env, "--actions", str(example(env, "train-0-correct")))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.rstrip().endswith("final reward: 1.0  finished: true")


@pytest.mark.parametrize("env", ["math", "coding", "terminal"])
def test_orsbox_run_under_gvisor(bundled_images: None, env: str) -> None:
    """`orsbox run --runtime runsc`, on the private runsc engine (tests/runtimes.py).
    swe plays too (its 843 MB image loads into the engine in ~20 s, outside CI's budget)."""
    runtime_available("runsc")
    done = orsbox(
        "run", env, "--actions", str(example(env, "train-0-correct")),
        "--runtime", "runsc", "--engine", RUNSC_ENGINE,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.rstrip().endswith("final reward: 1.0  finished: true")
