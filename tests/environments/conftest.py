"""The bundled environments, served as the README's quick start serves them, and
helpers to play their example episodes. Every test here needs Docker."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ors.client import ORS

from tests.runtimes import backend_setting, containers_of, load_images, runtime_available
from tests.servers import ROOT, STARTED_PIDS, LiveServer, start_server

ENVIRONMENTS = ROOT / "environments"
BUILD_TIMEOUT_S = 1800
# The images the bundled environments start from: copied into a private engine before
# a server there serves them (on the main engine, `bundled_images` builds them)
BUNDLED_IMAGES = ("orsbox/base:latest", "orsbox/env-swe:latest")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/environments" in str(item.fspath):
            item.add_marker(pytest.mark.docker)


def orsbox(*args: str, timeout: float = 300, **kw: object) -> subprocess.CompletedProcess[str]:
    """Run the `orsbox` command line as a user would. Its pid joins the servers this run
    started, so the leftover check counts the sandboxes an in-process `run` starts."""
    argv = [sys.executable, "-m", "orsbox.cli.main", *args]
    with subprocess.Popen(
        argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw
    ) as process:  # type: ignore[call-overload]
        STARTED_PIDS.add(process.pid)
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            raise
    return subprocess.CompletedProcess(argv, process.returncode, stdout, stderr)


def example(env: str, name: str) -> Path:
    """An example action file: environments/<env>/examples/<name>.jsonl."""
    return ENVIRONMENTS / env / "examples" / f"{name}.jsonl"


def play_example(url: str, env: str, name: str) -> Any:
    """Play example `name` of bundled environment `env` on its task train[0] (the one
    every example is for) through the ors-sdk client; the last call's `ToolOutput`."""
    calls = [json.loads(line) for line in example(env, name).read_text().splitlines()]
    with ORS(base_url=url) as client:
        environment = client.environment(env)
        task = environment.list_tasks("train")[0]
        with environment.session(task=task) as session:
            assert session.get_prompt()[0].text
            for call in calls:
                result = session.call_tool(call["name"], call["input"])
    return result


@pytest.fixture(scope="session")
def bundled_images(base_image: str) -> None:
    """Every image the bundled environments need (scripts/test.sh builds them first;
    this builds what is missing when the tests run alone)."""
    done = orsbox("build", "--missing-only", timeout=BUILD_TIMEOUT_S)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.fixture(scope="module")
def bundled_server(
    tmp_path_factory: pytest.TempPathFactory, bundled_images: None
) -> Iterator[LiveServer]:
    """`orsbox serve` with no argument: every bundled environment."""
    server_id = f"test-{uuid.uuid4().hex[:12]}"
    server = start_server(
        [], tmp_path_factory.mktemp("bundled"), server_id=server_id, setup_wait_s=60
    )
    server.server_id = server_id
    yield server
    server.stop()


@pytest.fixture(scope="module")
def engine_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, bundled_images: None
) -> Iterator[LiveServer]:
    """`orsbox serve` of every bundled environment with its sandboxes on the engine
    `request.param` names (tests/runtimes.py: runsc on the private gVisor engine, podman
    on Podman's); it leaves no container there when stopped."""
    runtime = request.param
    runtime_available(runtime)
    load_images(BUNDLED_IMAGES, [runtime])  # they stay, as the start scripts' copies do
    server_id = f"test-{runtime}-{uuid.uuid4().hex[:12]}"
    server = start_server(
        [], tmp_path_factory.mktemp(f"bundled-{runtime}"), server_id=server_id,
        setup_wait_s=60, backend=backend_setting(runtime),
    )  # fmt: skip
    server.server_id = server_id
    yield server
    server.stop()
    assert containers_of(runtime, server_id) == []
