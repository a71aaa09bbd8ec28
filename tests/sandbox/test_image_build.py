"""Building images: a build's output read as whole lines without terminal escapes,
whatever the engine's chunks, and a failed build leaving no image behind."""

from __future__ import annotations

import uuid
from pathlib import Path

import docker
import pytest

from orsbox.errors import ImageBuildError
from orsbox.sandbox.docker.images import BuildOutput, build_image, image_exists
from orsbox.sandbox.images import ImageRecipe

ESC = "\x1b"


def test_lines_cut_across_chunks_are_whole_and_escapes_are_gone() -> None:
    logged: list[str] = []
    output = BuildOutput(logged.append)
    for chunk in ["Step 2/3 : RUN ma", "ke\n ---> Running in 0123abcd\n", f"{ESC}[31mer"]:
        output.feed(chunk)
    output.feed(f"ror: the-build-line{ESC}[0m\n\n 10%\r 55%\r100% done\n")
    output.feed(" ---> 0123456789ab\n")
    assert logged == [
        "Step 2/3 : RUN make",
        " ---> Running in 0123abcd",
        "error: the-build-line",
        "100% done",
        " ---> 0123456789ab",
    ]
    assert output.made == ["0123456789ab"]


def test_cached_steps_and_the_base_image_are_not_the_builds_own() -> None:
    output = BuildOutput(lambda line: None)
    output.feed("Step 1/3 : FROM base\n ---> aaaaaaaaaaaa\n")
    output.feed("Step 2/3 : RUN a\n ---> Using cache\n ---> bbbbbbbbbbbb\n")
    output.feed("Step 3/3 : RUN b\n ---> Running in cc\n ---> dddddddddddd\npartial")
    assert output.made == ["dddddddddddd"]
    assert output.last_lines().endswith(" ---> dddddddddddd\npartial")


@pytest.mark.docker
def test_a_failed_build_says_why_and_leaves_no_image(
    docker_client: docker.DockerClient, base_image: str, tmp_path: Path
) -> None:
    token = uuid.uuid4().hex  # no build cache can answer these steps
    (tmp_path / "Dockerfile").write_text(
        f"FROM {base_image}\nRUN echo {token} > /tmp/made\n"
        f"RUN printf '\\033[31m%s\\033[0m\\n' 'the-last-line-{token}' && false\n"
    )
    tag = f"orsbox-test/failed-build:{token[:12]}"
    recipe = ImageRecipe(tag, tmp_path, tmp_path / "Dockerfile", origin="a test")
    logged: list[str] = []
    with pytest.raises(ImageBuildError) as raised:
        build_image(docker_client, recipe, logged.append)
    message = str(raised.value)
    assert f"the-last-line-{token}" in message and ESC not in message
    made = [
        line.split()[-1] for line in logged if line.startswith(" ---> ") and "Running" not in line
    ]
    assert len(made) == 2  # the FROM line's image, the first RUN's
    assert image_exists(docker_client, made[0])  # the base image is kept
    assert not image_exists(docker_client, made[1])
    assert not image_exists(docker_client, tag)


@pytest.mark.docker
def test_a_build_that_reaches_no_network_says_so_first(
    docker_client: docker.DockerClient, base_image: str, tmp_path: Path
) -> None:
    """Issue 50: apt on an engine whose builds reach no network ends with exit code 100
    at a package it cannot find, lines after what went wrong; the error's first line
    names the cause (here a build given no network at all)."""
    token = uuid.uuid4().hex  # no build cache can answer this step
    (tmp_path / "Dockerfile").write_text(
        f"FROM {base_image}\nUSER root\n"
        f"RUN echo {token} && apt-get update && apt-get install -y --no-install-recommends less\n"
    )
    tag = f"orsbox-test/offline-build:{token[:12]}"
    dockerfile = tmp_path / "Dockerfile"
    recipe = ImageRecipe(tag, tmp_path, dockerfile, origin="a test", network_mode="none")
    with pytest.raises(ImageBuildError) as raised:
        build_image(docker_client, recipe, lambda line: None)
    headline, *tail = str(raised.value).splitlines()
    assert headline.startswith(f"building {tag} (a test) failed: its steps reached no network")
    assert "Temporary failure resolving '" in headline, headline  # apt's mirror
    assert "returned a non-zero code: 100" in tail[-1], tail
    assert not image_exists(docker_client, tag)
