"""Terminal-Bench-2-shaped tasks run the way Harbor runs them: `storage_mb` set, a
test.sh that installs its runner with apt at grading time, the oracle solution scoring
1.0 and an untouched sandbox 0.0 through `orsbox check` and through the ors-sdk client;
inside, Harbor's execution profile (Docker's default capabilities, a writable root, the
image's user, real /logs folders), `sudo` and `apt-get install` working; and the
measurement that keeps no-new-privileges out of the profile (it stops sudo)."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import docker
import pytest
from ors.client import ORS

from orsbox.authoring.environment import EnvironmentContext
from orsbox.errors import ImageNotFound
from orsbox.formats import FormatOptions
from orsbox.formats.harbor import load
from orsbox.sandbox import SandboxSpec
from orsbox.sandbox.docker import DockerBackend
from orsbox.sandbox.image_map import ImageMap
from tests.environments.conftest import orsbox
from tests.formats.harbor.conftest import dataset_args
from tests.formats.harbor.tasks import CHECK_OUT, RUN_ID, harbor_task
from tests.formats.harbor.tb2 import TB2_DOCKER_IMAGE, TB2_IMAGE_MAP
from tests.servers import LiveServer

CHECK_TIMEOUT_S = 900
DOCKER_DEFAULT_CAPS = "00000000a80425fb"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def play(
    server: LiveServer, task: str, commands: list[str], *, submit: bool = True
) -> tuple[list[str], float | None]:
    """Run `commands` with bash in `task`, then submit (or not): (outputs, reward)."""
    with ORS(base_url=server.url) as client:
        env = client.environment("tb2")
        (spec,) = [t for t in env.list_tasks(split="test") if t.task_spec["name"] == task]
        with env.session(task=spec) as session:
            outputs = [session.call_tool("bash", {"command": c}).blocks[0].text for c in commands]
            if not submit:
                return outputs, None
            submitted = session.call_tool("submit", {})
            assert submitted.finished
            return outputs, submitted.reward


def check(path: Path, env: dict[str, str]) -> list[tuple[str, ...]]:
    """`orsbox check PATH`'s rows: (task, solution, untouched, verdict)."""
    done = orsbox(
        "check", str(path), *dataset_args("tb2"), "--concurrency", "2",
        env=env, timeout=CHECK_TIMEOUT_S,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return re.findall(r"│ (\S+)\s+│ (\S+)\s+│ (\S+)\s+│ (\S+)\s+│\s+[\d.]+s │", done.stdout)


@pytest.mark.timeout(CHECK_TIMEOUT_S)
def test_solution_one_and_untouched_zero_through_orsbox_check_and_the_ors_sdk_client(
    datasets: dict[str, Path], harbor_env: dict[str, str], tb2_server: LiveServer
) -> None:
    # all at once: each grading installs its test runner with apt (about a minute here)
    with ThreadPoolExecutor(3) as pool:
        checked = pool.submit(check, datasets["tb2"], harbor_env)
        solved = pool.submit(play, tb2_server, "count-lines", ["wc -l < words.txt > count.txt"])
        untouched = pool.submit(play, tb2_server, "count-lines", [])
        assert solved.result()[1] == 1.0
        assert untouched.result()[1] == 0.0
        rows = sorted(checked.result())
    assert rows == [("count-lines", "1", "0", "ok"), ("sudo-task", "1", "0", "ok")]


@pytest.mark.timeout(CHECK_TIMEOUT_S)  # the first test to run builds the images
def test_harbors_execution_profile_seen_from_inside(tb2_server: LiveServer) -> None:
    outputs, _ = play(
        tb2_server,
        "count-lines",
        [
            "id -un; pwd",
            "grep CapEff /proc/self/status",
            "test -d /logs/agent && test -d /logs/verifier && ! test -L /logs && echo dirs",
            "mkdir -p /logs/agent && touch /logs/agent/trace /usr/local/bin/mine && echo wrote",
            "ls /tests /solution 2>&1 | grep -c 'No such file'",
            "wc -l < words.txt",
        ],
        submit=False,  # grading is the test above's
    )
    assert outputs[0].split() == ["root", "/app"]  # the image's user (none: root), WORKDIR
    assert DOCKER_DEFAULT_CAPS in outputs[1]
    assert outputs[2].strip() == "dirs"
    assert outputs[3].strip() == "wrote"  # a writable root, storage_mb notwithstanding
    assert outputs[4].strip() == "2"  # the tests and the solution arrive only when used
    assert outputs[5].strip() == "3"  # docker_image, built from the task's Dockerfile


def test_build_missing_built_the_docker_image_under_its_own_name(
    datasets: dict[str, Path], docker_client: docker.DockerClient
) -> None:
    image = docker_client.images.get(TB2_DOCKER_IMAGE)
    assert image.labels.get("orsbox.test-run") == RUN_ID  # this run's Dockerfile made it


@pytest.mark.timeout(CHECK_TIMEOUT_S)
def test_sudo_and_apt_get_install_work_for_the_agent_user(tb2_server: LiveServer) -> None:
    outputs, reward = play(
        tb2_server,
        "sudo-task",
        ["id -un", "sudo -n id -u", "sudo apt-get install -y hello >/dev/null 2>&1; hello"],
    )
    assert outputs[0].strip() == "agent"  # [agent].user
    assert outputs[1].strip() == "0"
    assert "Hello, world!" in outputs[2]
    assert reward == 1.0


@pytest.mark.anyio
@pytest.mark.timeout(CHECK_TIMEOUT_S)
async def test_no_new_privileges_would_stop_sudo(
    datasets: dict[str, Path], harbor_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Why the profile leaves no-new-privileges off: with it, Harbor's sudo fails."""
    monkeypatch.setenv("ORSBOX_ALLOW_NETWORK", "1")
    options = FormatOptions(image_map=ImageMap.parse([TB2_IMAGE_MAP]))
    (env_cls,) = load(datasets["tb2"], options)
    task = env_cls.tasks["sudo-task"]  # type: ignore[attr-defined]
    spec = SandboxSpec(image=task.image.tag, limits=task.limits, user="agent")
    sudo = "sudo -n id -u 2>&1"
    for run_options, expected in (({}, "0"), ({"security_opt": ["no-new-privileges"]}, "no new")):
        backend = DockerBackend(run_options=run_options)
        try:
            sandbox = await backend.start(spec)
            assert expected in (await sandbox.shell(sudo)).output
        finally:
            await backend.close()


@pytest.mark.anyio
async def test_a_missing_docker_image_names_build_missing_and_the_image_map(
    tmp_path: Path, base_image: str
) -> None:
    missing = "orsbox-test/never-built:20251031"
    folder = harbor_task(tmp_path / "prebuilt", CHECK_OUT, extra=f'docker_image = "{missing}"\n')
    (env_cls,) = load(folder, FormatOptions())
    env = env_cls(task_spec={"name": "prebuilt"})
    backend = DockerBackend()
    env.orsbox_context = EnvironmentContext(session_id="missing-image", sandbox_backend=backend)
    try:
        with pytest.raises(ImageNotFound) as raised:
            await env.setup()
    finally:
        await backend.close()
    message = str(raised.value)
    assert message.startswith("task prebuilt: ") and missing in message
    assert "--build-missing" in message and f"--image-map {missing}=IMAGE" in message
