"""Terminal-Bench-2-shaped tasks whose verifier cannot run (issue 28), played through
the ors-sdk client against `orsbox serve`, checked with `orsbox check` and evaluated
with `orsbox eval`: a bootstrap that fails is a grading error naming its cause, the
same task with its runner there grades 1.0 / 0.0 as usual."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest
from ors.client import ORS

from tests.environments.conftest import orsbox
from tests.evaluation import runs
from tests.formats.harbor.conftest import BUILD_TIMEOUT_S
from tests.formats.harbor.conftest import _tags as image_tags
from tests.formats.harbor.tasks import IMAGE_MAP
from tests.formats.harbor.tb2_tasks import tb2_dataset
from tests.model_server import Script, serve_model
from tests.servers import LiveServer, start_server

SOLVE = "echo hello > /app/out.txt"


@pytest.fixture(scope="module")
def tb2(
    tmp_path_factory: pytest.TempPathFactory,
    harbor_env: dict[str, str],
    docker_client: docker.DockerClient,
    base_image: str,
) -> Iterator[Path]:
    """The TB2-shaped tasks, their images built (and removed afterwards)."""
    path = tb2_dataset(tmp_path_factory.mktemp("tb2") / "tb2")
    tags = image_tags(path, "grading-errors")  # the episodes' image map, no --build-missing
    try:
        built = orsbox(
            "build", str(path), "--missing-only", "--image-map", IMAGE_MAP,
            env=harbor_env, timeout=BUILD_TIMEOUT_S,
        )  # fmt: skip
        assert built.returncode == 0, built.stdout + built.stderr
        yield path
    finally:
        for tag in tags:
            with contextlib.suppress(docker.errors.ImageNotFound):
                docker_client.images.remove(tag)


@pytest.fixture(scope="module")
def server(tb2: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = start_server(
        [str(tb2), "--image-map", IMAGE_MAP, "--name", "tb2"], tmp_path_factory.mktemp("tb2-server")
    )
    yield live
    live.stop()


def submit(server: LiveServer, task: str, commands: list[str]) -> tuple[list[str], object]:
    """Run `commands` with bash in `task`, then submit: (outputs, the submit's result)."""
    with ORS(base_url=server.url) as client:
        env = client.environment("tb2")
        (spec,) = [t for t in env.list_tasks(split="test") if t.task_spec["name"] == task]
        with env.session(task=spec) as session:
            outputs = [session.call_tool("bash", {"command": c}).blocks[0].text for c in commands]
            return outputs, session.call_tool("submit", {})


def test_the_runner_there_grades_one_and_zero_as_usual(server: LiveServer) -> None:
    _, solved = submit(server, "runner-ready", [SOLVE])
    _, untouched = submit(server, "runner-ready", [])
    assert (solved.reward, solved.finished) == (1.0, True)  # type: ignore[attr-defined]
    assert (untouched.reward, untouched.finished) == (0.0, True)  # type: ignore[attr-defined]
    assert "2 failed" in untouched.blocks[0].text  # type: ignore[attr-defined]


def test_a_runner_whose_install_fails_is_a_grading_error(server: LiveServer) -> None:
    with pytest.raises(RuntimeError) as raised:
        submit(server, "runner-install-fails", [SOLVE])
    text = str(raised.value)
    assert "grading error [runner-missing]" in text
    assert "pytest: command not found" in text and "No module named pip" in text


def test_a_bootstrap_that_needs_the_network_it_lacks_is_a_grading_error(
    server: LiveServer,
) -> None:
    with pytest.raises(RuntimeError) as raised:
        _outputs, _ = submit(server, "runner-offline", ["ls /sys/class/net", SOLVE])
    text = str(raised.value)
    assert "grading error [verifier-offline]" in text, text
    assert "uvx: command not found" in text


def test_the_task_is_offline(server: LiveServer) -> None:
    with ORS(base_url=server.url) as client:
        env = client.environment("tb2")
        (spec,) = [
            t for t in env.list_tasks(split="test") if t.task_spec["name"] == "runner-offline"
        ]
        with env.session(task=spec) as session:
            shown = session.call_tool("bash", {"command": "ls /sys/class/net"}).blocks[0].text
    assert shown.split() == ["lo"]  # the installer's download never leaves the sandbox


def test_a_test_sh_past_its_timeout_is_a_grading_error(server: LiveServer) -> None:
    with pytest.raises(RuntimeError, match=r"grading error \[verifier-timeout\]: .*3s"):
        submit(server, "verifier-slow", [SOLVE])


def test_orsbox_check_shows_grading_errors_as_their_own_verdict(
    tb2: Path, harbor_env: dict[str, str]
) -> None:
    done = orsbox(
        "check", str(tb2 / "runner-install-fails"), "--image-map", IMAGE_MAP,
        env=harbor_env, timeout=900,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    row = re.search(r"│ (\S+)\s+│ (\S+)\s+│ (\S+)\s+│ ([^│]*?)\s*│", done.stdout)
    assert row is not None, done.stdout
    assert row.groups()[:3] == ("runner-install-fails", "error", "error")
    assert row[4].startswith("GRADING ERROR solution: grading error [runner-missing]")
    verdict = " ".join(done.stdout.replace("│", " ").split())  # the cell's lines, joined
    assert "; untouched: grading error [runner-missing]: the tests' runner is missing" in verdict
    assert "0/1 tasks pass" in done.stdout


def test_orsbox_eval_counts_it_as_an_error_and_retry_errors_replays_it(
    tb2: Path, tmp_path: Path
) -> None:
    solve_and_submit = [
        {"tool": "bash", "arguments": {"command": SOLVE}},
        {"tool": "submit", "arguments": {}},
    ]
    names = ("runner-install-fails", "runner-ready")  # tasks 0 and 2 (sorted by name)
    scripts = [Script(f"[{name}]", [solve_and_submit]) for name in names]
    options = ("--tasks", "0,2", "--image-map", IMAGE_MAP)
    with serve_model(scripts) as (model_url, _):
        first = runs.run_eval(f"harbor:{tb2}", model_url, tmp_path, *options)
        assert first.returncode == 0, first.stdout + first.stderr
        by_task = {r["task"]: r for r in runs.records(tmp_path)}
        assert (by_task[2]["status"], by_task[2]["reward"]) == ("finished", 1.0)
        failing = by_task[0]
        assert (failing["status"], failing["grading_cause"]) == ("error", "runner-missing")
        assert failing["reward"] is None and "grading error [runner-missing]" in failing["error"]
        summary = runs.summary(tmp_path)
        assert (summary["errors"], summary["mean_reward"]) == (1, 1.0)
        assert "--retry-errors plays them again" in first.stdout

        again = runs.run_eval(f"harbor:{tb2}", model_url, tmp_path, *options, "--retry-errors")
        assert again.returncode == 0, again.stdout + again.stderr
        tasks = [r["task"] for r in runs.records(tmp_path)]
        assert (tasks.count(0), tasks.count(2)) == (2, 1)  # only the error was played again
