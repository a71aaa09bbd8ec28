"""The command line on Harbor datasets: Harbor's own template task served, `orsbox run`
playing a task, `orsbox check` printing its table, and a Dockerfile that fails to build
reported with its last lines while the other tasks are served."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from ors.client import ORS

from tests.environments.conftest import orsbox
from tests.formats.harbor.conftest import FIXTURES
from tests.formats.harbor.tasks import IMAGE_MAP
from tests.servers import start_server


def test_harbors_template_task_serves_and_grades(datasets: dict[str, Path], tmp_path: Path) -> None:
    server = start_server(
        [str(datasets["template"]), "--image-map", IMAGE_MAP], tmp_path, allow_network=1
    )
    try:
        with ORS(base_url=server.url) as client:
            env = client.environment("template-task")
            with env.session(split="test", index=0) as session:
                assert session.get_prompt()[0].text == ""  # its instruction.md is empty
                with pytest.raises(RuntimeError) as raised:
                    session.call_tool("submit", {})
    finally:
        server.stop()
    # its test.sh (not executable in the wheel; made so, as Harbor does) writes no reward:
    # Harbor raises RewardFileNotFoundError, orsbox answers a grading error
    assert "grading error [no-reward-file]" in str(raised.value)


def test_orsbox_run_plays_a_task(
    datasets: dict[str, Path], harbor_env: dict[str, str], tmp_path: Path
) -> None:
    actions = tmp_path / "actions.jsonl"
    actions.write_text(
        '{"name": "write_file", "input": {"path": "/app/out.txt", "content": "hello\\n"}}\n'
        '{"name": "submit", "input": {}}\n'
    )
    done = orsbox(
        "run", f"harbor:{datasets['episodes']}", "--index", "1", "--image-map", IMAGE_MAP,
        "--actions", str(actions), env=harbor_env,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Write the value of $GREETING" in done.stdout
    assert done.stdout.rstrip().endswith("final reward: 1.0  finished: true")


def test_orsbox_check_prints_the_table(
    datasets: dict[str, Path], harbor_env: dict[str, str]
) -> None:
    done = orsbox(
        "check", str(datasets["check"]), "--image-map", IMAGE_MAP, "--concurrency", "2",
        env=harbor_env, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {
        m.group(1): m.groups()[1:]
        for m in re.finditer(r"│ (\S+)\s+│ (\S+)\s+│ (\S+)\s+│ (\S+)\s+│\s+[\d.]+s │", done.stdout)
    }
    assert rows == {
        name: ("1", "0", "ok") for name in ("hello", "keys", "storage", "tb1-hello", "users")
    }
    assert "5/5 tasks pass" in done.stdout


def test_orsbox_check_fails_a_task_whose_tests_crash(
    datasets: dict[str, Path], harbor_env: dict[str, str]
) -> None:
    done = orsbox(
        "check", str(datasets["episodes"] / "crash"), "--image-map", IMAGE_MAP, "--verbose",
        env=harbor_env,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    # test.sh crashed before writing a reward: a grading error, not a FAIL of 0
    row = (
        r"│ crash\s+│ error\s+│ error\s+│ GRADING ERROR solution: grading error \[no-reward-file\]"
    )
    assert re.search(row, done.stdout), done.stdout
    # --verbose: the whole output, under a rule naming the task
    assert re.search(r"crash: the solution's test output.*\n.*the tests crashed: boom", done.stdout)


def test_orsbox_check_verbose_shows_a_passing_runs_output(
    datasets: dict[str, Path], harbor_env: dict[str, str]
) -> None:
    """`-v` is for the run asked about, passed or not: here a Terminal-Bench 1 task
    whose pytest run passes."""
    done = orsbox(
        "check", str(datasets["check"] / "tb1-hello"), "--image-map", IMAGE_MAP, "-v",
        env=harbor_env,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    shown = done.stdout.split("tb1-hello: the solution's test output", 1)
    assert len(shown) == 2, done.stdout
    assert "PASSED ../tests/test_outputs.py::test_content" in shown[1]


def test_building_a_task_that_wants_the_network_names_the_setting(
    harbor_env: dict[str, str],
) -> None:
    """Harbor's template task keeps Harbor's default network ("public"): without
    ORSBOX_ALLOW_NETWORK, one line naming it, no traceback."""
    env = {k: v for k, v in harbor_env.items() if k != "ORSBOX_ALLOW_NETWORK"}
    done = orsbox("build", str(FIXTURES / "template-task"), env=env)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("error: task template-task: ")
    assert "ORSBOX_ALLOW_NETWORK=1" in line


def test_a_failing_dockerfile_names_its_last_lines_and_spares_the_others(
    datasets: dict[str, Path], harbor_env: dict[str, str], tmp_path: Path
) -> None:
    built = orsbox("build", str(datasets["broken"]), "--image-map", IMAGE_MAP, env=harbor_env)
    assert built.returncode == 1
    assert "the-last-build-line" in built.stderr and "task broken" in built.stderr
    server = start_server(
        [str(datasets["broken"]), "--image-map", IMAGE_MAP], tmp_path, allow_network=1
    )
    try:
        with ORS(base_url=server.url) as client:
            env = client.environment("broken")
            good = next(t for t in env.list_tasks("test") if t.task_spec["name"] == "good")
            with env.session(task=good) as session:
                session.call_tool("bash", {"command": "echo hello > /app/out.txt"})
                assert session.call_tool("submit", {}).reward == 1.0
            broken = next(t for t in env.list_tasks("test") if t.task_spec["name"] == "broken")
            with (
                pytest.raises(Exception, match="did not build") as raised,
                env.session(task=broken) as session,
            ):
                session.call_tool("bash", {"command": "true"})
        assert "the-last-build-line" in str(raised.value)
    finally:
        server.stop()
    assert "Traceback" not in server.log()
