"""An environment that is nothing but an image: the manifest, tasks and hidden grader
live in the image (no folder, no Python), and `orsbox serve IMAGE` serves it."""

from __future__ import annotations

import logging
import shutil
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest
from ors.client import ORS

from orsbox.authoring.declarative import DeclarativeEnvironment
from orsbox.errors import ManifestError
from orsbox.sandbox.config import with_backend
from orsbox.sandbox.docker.config import DockerConfig
from orsbox.targets import cache_dir, image_environment, resolve_targets
from tests.runtimes import RUNSC_ENGINE, runtime_available
from tests.servers import LiveServer, start_server

IMAGE = "orsbox-test/reverse:latest"
DOCKERFILE = """\
ARG BASE_IMAGE=orsbox/base:latest
FROM ${BASE_IMAGE}
USER root
COPY orsbox /orsbox
RUN chmod -R go= /orsbox
USER orsbox
"""
MANIFEST = """\
name = "reverse"
prompt = "Write the word {word} reversed to /workspace/out.txt, then submit it as answer."
tools = ["bash"]

[[splits]]
name = "train"
tasks = "tasks.jsonl"

[grader]
command = "python3 /grader/check.py"
files = "grader"
reward = "json"
every_step = true
submit_params = { answer = "the reversed word" }
"""
CHECK = """\
import json, os

want = json.loads(os.environ["ORSBOX_TASK"])["word"][::-1]
try:
    written = open("/workspace/out.txt").read().strip()
except OSError:
    written = None
if os.environ["ORSBOX_EVENT"] == "step":
    print(json.dumps({"reward": 0.5 if written == want else 0.0}))
else:
    ok = written == want and os.environ["ORSBOX_ANSWER"] == want
    print("checked out.txt and your answer")
    print(json.dumps({"reward": float(ok), "message": "correct" if ok else "wrong"}))
"""


def environment_in(image: str) -> type[DeclarativeEnvironment]:
    """The environment in `image`, read through the default engine's image store."""
    return with_backend(None, lambda backend: image_environment(backend.images, image))


def forget(client: docker.DockerClient, tag: str) -> None:
    """Remove the image and the host's unpacked copy of its manifest folder."""
    image_id = client.images.get(tag).id.split(":")[-1][:16]
    shutil.rmtree(cache_dir() / image_id, ignore_errors=True)
    client.images.remove(tag, force=True)


def build(client: docker.DockerClient, folder: Path, tag: str, chmod: bool = True) -> None:
    (folder / "orsbox" / "grader").mkdir(parents=True)
    dockerfile = DOCKERFILE if chmod else DOCKERFILE.replace("RUN chmod -R go= /orsbox\n", "")
    (folder / "Dockerfile").write_text(dockerfile)
    (folder / "orsbox" / "orsbox.toml").write_text(MANIFEST)
    (folder / "orsbox" / "tasks.jsonl").write_text('{"word": "orsbox"}\n{"word": "docker"}\n')
    (folder / "orsbox" / "grader" / "check.py").write_text(textwrap.dedent(CHECK))
    client.images.build(path=str(folder), tag=tag, rm=True)


@pytest.fixture(scope="module")
def image(
    tmp_path_factory: pytest.TempPathFactory, docker_client: docker.DockerClient, base_image: str
) -> Iterator[str]:
    build(docker_client, tmp_path_factory.mktemp("image"), IMAGE)
    yield IMAGE
    forget(docker_client, IMAGE)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, image: str) -> Iterator[LiveServer]:
    live = start_server(
        [image], tmp_path_factory.mktemp("server"), server_id=f"test-{uuid.uuid4().hex[:8]}"
    )
    yield live
    live.stop()


def test_the_image_is_the_environment(server: LiveServer) -> None:
    with ORS(base_url=server.url) as client:
        environment = client.environment("reverse")
        tasks = environment.list_tasks("train")
        assert [t.task_spec for t in tasks] == [{"word": "orsbox"}, {"word": "docker"}]
        with environment.session(task=tasks[0]) as session:
            assert "orsbox reversed" in session.get_prompt()[0].text
            hidden = session.call_tool("bash", {"command": "ls /orsbox; ls /grader"})
            assert "Permission denied" in hidden.blocks[0].text
            assert "No such file" in hidden.blocks[0].text
            assert hidden.reward == 0.0  # every_step: graded after each call
            step = session.call_tool("bash", {"command": "echo xobsro > /workspace/out.txt"})
            assert (step.reward, step.finished) == (0.5, False)
            gone = session.call_tool("bash", {"command": "ls /grader"})
            assert "No such file" in gone.blocks[0].text  # removed after grading
            result = session.call_tool("submit", {"answer": "xobsro"})
    assert (result.reward, result.finished) == (1.0, True)
    assert result.blocks[0].text == "checked out.txt and your answer\ncorrect"


def test_a_wrong_answer_gets_nothing(server: LiveServer) -> None:
    with ORS(base_url=server.url) as client:
        environment = client.environment("reverse")
        with environment.session(task=environment.list_tasks("train")[1]) as session:
            session.call_tool("bash", {"command": "echo rekcod > /workspace/out.txt"})
            result = session.call_tool("submit", {"answer": "docker"})
            # graded once: neither a step (every_step) nor a second submit with the
            # right answer changes the reward
            step = session.call_tool("bash", {"command": "echo x > /workspace/out.txt"})
            again = session.call_tool("submit", {"answer": "rekcod"})
    assert (result.reward, result.finished, result.blocks[0].text) == (
        0.0,
        True,
        "checked out.txt and your answer\nwrong",
    )
    assert step.reward == 0.0 and "[grader]" not in str(step.blocks)  # not graded again
    assert again == result


def test_readable_task_files_are_warned_about(
    tmp_path: Path,
    docker_client: docker.DockerClient,
    base_image: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    tag = "orsbox-test/readable:latest"
    build(docker_client, tmp_path, tag, chmod=False)
    try:
        with caplog.at_level(logging.WARNING, logger="orsbox.targets"):
            env = environment_in(tag)
        assert env.name() == "reverse" and env.image == tag
        assert "readable by the agent" in caplog.text and "chmod -R go= /orsbox" in caplog.text
    finally:
        forget(docker_client, tag)


def test_a_root_only_manifest_folder_is_fine(
    image: str, docker_client: docker.DockerClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="orsbox.targets"):
        assert environment_in(image).name() == "reverse"
    assert "readable" not in caplog.text


def test_an_image_without_a_manifest(docker_client: docker.DockerClient, base_image: str) -> None:
    with pytest.raises(ManifestError, match="has no /orsbox folder"):
        environment_in(base_image)


ELSEWHERE = "orsbox-test/reverse-elsewhere:latest"


def test_an_image_target_is_found_on_the_configured_engine(tmp_path: Path) -> None:
    """`orsbox serve --engine X IMAGE` looks IMAGE up on X, where its sandboxes will run,
    not on DOCKER_HOST or the default socket (here: an image only the runsc engine has)."""
    runtime_available("runsc")
    other = docker.DockerClient(base_url=RUNSC_ENGINE, timeout=120)
    build(other, tmp_path, ELSEWHERE)
    try:
        found = resolve_targets([ELSEWHERE], backend=DockerConfig(engine=RUNSC_ENGINE))
        assert [env.name() for env in found] == ["reverse"]
        with pytest.raises(ManifestError):  # the default engine has no such image
            resolve_targets([ELSEWHERE])
    finally:
        forget(other, ELSEWHERE)
        other.close()
