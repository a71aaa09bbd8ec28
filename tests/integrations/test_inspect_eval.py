"""A real `inspect eval` with `sandbox="orsbox"`: the CLI in a subprocess, Inspect's
scripted model driving the `bash` and `python` tools, a scorer reading a file back from
the sandbox. Run in-process (the local engine) and through `orsbox cluster up 2`'s
router with a token, as a user with a cluster would; a wrong answer must score 0."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("inspect_ai", reason="pip install -e '.[inspect]'")

from orsbox.cluster.local import LocalCluster
from tests.servers import ROOT, free_port

TASK = "tests/integrations/inspect_task.py@orsbox_answer"
WRONG_TASK = "tests/integrations/inspect_task.py@orsbox_wrong_answer"  # the model writes 41
TOKEN = "inspect-cluster-token-0123456789"
LABEL = "orsbox.inspect.task"


def inspect_eval(tmp_path: Path, *task_args: str) -> dict[str, dict]:
    """Run `inspect eval` on both tasks (the right answer and the wrong one) in one
    process, and return each task's log (JSON) by its name."""
    logs = tmp_path / "logs"
    argv = [sys.executable, "-m", "inspect_ai", "eval", TASK, WRONG_TASK, "--log-dir", str(logs)]
    argv += ["--log-format", "json", "--display", "plain", "--no-log-images"]
    for arg in task_args:
        argv += ["-T", arg]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "INSPECT_LOG_LEVEL": "warning"}
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    found = [json.loads(log.read_text()) for log in logs.glob("*.json")]
    return {log["eval"]["task"]: log for log in found}


def accuracy(log: dict) -> float:
    assert log["status"] == "success", log.get("error")
    (score,) = log["results"]["scores"]
    return score["metrics"]["accuracy"]["value"]


def tool_outputs(log: dict) -> list[str]:
    (sample,) = log["samples"]
    return [m["content"] for m in sample["messages"] if m["role"] == "tool"]


@pytest.mark.docker
def test_inspect_eval_in_process_scores_what_the_tools_did(
    tmp_path: Path, base_image: str, docker_client
) -> None:
    logs = inspect_eval(tmp_path)
    assert accuracy(logs["orsbox_answer"]) == 1.0
    # bash as orsbox's user; python's print
    assert tool_outputs(logs["orsbox_answer"]) == ["orsbox\n", "4242\n"]
    assert accuracy(logs["orsbox_wrong_answer"]) == 0.0
    assert not docker_client.containers.list(all=True, filters={"label": LABEL})


@pytest.fixture(scope="module")
def two_cells() -> Iterator[LocalCluster]:
    if shutil.which("haproxy") is None:
        pytest.fail("haproxy is missing (scripts/test.sh installs it from Debian)")
    root = Path(tempfile.mkdtemp(prefix="orsi-", dir="/tmp"))  # engine sockets: short paths
    settings = {"token": TOKEN, "sandbox_api": "1"}
    cluster = LocalCluster.up(
        2, free_port(), ["tests/fixture_envs/protocol_envs.py:Protocol"], root,
        images=["orsbox/base:latest"], settings=settings,
    )  # fmt: skip
    yield cluster
    cluster.down()
    shutil.rmtree(root, ignore_errors=True)


@pytest.mark.cluster
def test_inspect_eval_through_a_cluster_router(tmp_path: Path, two_cells: LocalCluster) -> None:
    url = two_cells.url
    logs = inspect_eval(tmp_path, f"url={url}", f"token={TOKEN}")
    assert accuracy(logs["orsbox_answer"]) == 1.0
    assert tool_outputs(logs["orsbox_answer"]) == ["orsbox\n", "4242\n"]
    assert accuracy(logs["orsbox_wrong_answer"]) == 0.0


@pytest.mark.cluster
def test_a_wrong_token_fails_the_eval_with_the_servers_answer(
    tmp_path: Path, two_cells: LocalCluster
) -> None:
    logs = tmp_path / "logs"
    argv = [sys.executable, "-m", "inspect_ai", "eval", TASK, "--log-dir", str(logs)]
    argv += ["--log-format", "json", "--display", "plain"]
    argv += ["-T", f"url={two_cells.url}", "-T", "token=not-the-token"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    (log_file,) = logs.glob("*.json")
    log = json.loads(log_file.read_text())
    assert log["status"] == "error"
    assert "401" in json.dumps(log["error"])
