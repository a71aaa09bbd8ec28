"""The four bundled environments, served by `orsbox serve` with no argument: a correct
episode each through the ors-sdk client, a correct and a wrong one through
`orsbox run --url`, and a correct one through `orsbox run` in-process.

And on every backend (docs/backends.md, "Every environment on every backend"): each
environment's correct and wrong example score 1.0 and 0.0 on Podman too (runc's are
`test_orsbox_run_against_a_server`; gVisor's, on a server started from an empty store,
tests/adversarial/test_gvisor_from_nothing.py), and the issue-37 command, `orsbox run
coding --engine PODMAN`, plays in-process on each private engine."""

from __future__ import annotations

import httpx
import pytest

from tests.environments.conftest import example, orsbox, play_example
from tests.runtimes import ENGINES, runtime_available
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
    result = play_example(bundled_server.url, env, "train-0-correct")
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


@pytest.mark.parametrize("engine_server", ["podman"], indirect=True)
@pytest.mark.parametrize(("env", "actions", "reward"), EPISODES)
def test_each_example_plays_to_its_reward_on_podman(
    engine_server: LiveServer, env: str, actions: str, reward: float
) -> None:
    """The grader of coding, swe and terminal runs as root in the sandbox (a second
    guest, `exec(user="root")`); on Podman it could not make /grader until the backend
    gave `/` Docker's mode (orsbox/sandbox/docker/podman.py)."""
    result = play_example(engine_server.url, env, actions)
    assert (result.reward, result.finished) == (reward, True), result.blocks


@pytest.mark.parametrize("runtime", list(ENGINES))
def test_orsbox_run_in_process_on_each_private_engine(bundled_images: None, runtime: str) -> None:
    """As issue 37 ran it: `orsbox run coding --engine unix:///...podman.sock` (and
    `--runtime runsc` on the gVisor engine) scores the correct example 1.0."""
    runtime_available(runtime)
    engine = ["--engine", ENGINES[runtime]]
    flags = [*engine, "--runtime", runtime] if runtime == "runsc" else engine
    done = orsbox("run", "coding", "--actions", str(example("coding", "train-0-correct")), *flags)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.rstrip().endswith("final reward: 1.0  finished: true")
