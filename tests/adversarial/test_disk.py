"""Disk: a session with `disk_bytes` fills its folders to ENOSPC, and nothing else
notices: not the host's disk, not other sessions, not its own shell."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator

import docker
import pytest

from tests.adversarial.envs import MIB, SEEDED_IMAGE
from tests.containers.conftest import open_episode
from tests.servers import LiveServer

pytestmark = pytest.mark.docker

SEEDED_DOCKERFILE = b"""FROM orsbox/base:latest
USER root
RUN mkdir -p /workspace/repo /workspace/root-owned \\
 && printf 'baked\\n' > /workspace/repo/file.txt \\
 && printf '#!/bin/sh\\necho ran\\n' > /workspace/repo/run.sh \\
 && chmod 755 /workspace/repo/run.sh && ln -s file.txt /workspace/repo/link \\
 && chown -R orsbox:orsbox /workspace/repo && echo r > /workspace/root-owned/x
USER orsbox
"""


@pytest.fixture(scope="module")
def seeded_image(docker_client: docker.DockerClient, base_image: str) -> Iterator[str]:
    """Built for this module and removed after it (the engine's cache keeps rebuilds quick)."""
    docker_client.images.build(fileobj=io.BytesIO(SEEDED_DOCKERFILE), tag=SEEDED_IMAGE, rm=True)
    yield SEEDED_IMAGE
    with contextlib.suppress(docker.errors.ImageNotFound, docker.errors.APIError):
        docker_client.images.remove(SEEDED_IMAGE, force=True)


def test_a_full_folder_is_enospc_and_nothing_else_notices(
    hostile_server: LiveServer, docker_client: docker.DockerClient
) -> None:
    ep, other = open_episode(hostile_server, "hostile"), open_episode(hostile_server, "hostile")
    try:
        text, _ = ep.bash("head -c 100M /dev/zero > /workspace/fill; stat -c %s /workspace/fill")
        assert "No space left on device" in text
        assert int(text.split()[-1]) <= 32 * MIB
        # every writable folder is bounded, the rest of the filesystem is read-only
        text, _ = ep.bash(
            "for d in /tmp /var/tmp ~; do head -c 40M /dev/zero > $d/fill; done 2>&1;"
            "for f in /usr/fill /etc/fill /fill; do touch $f; done 2>&1"
        )
        assert text.count("No space left on device") == 3, text
        assert text.count("Read-only file system") == 3, text
        assert ep.bash("echo alive")[0] == "alive\n"  # the sandbox itself is fine

        # another session has its own, empty folders
        text, _ = other.bash("head -c 8M /dev/zero > /workspace/f && du -k /workspace/f")
        assert text.split()[0] == "8192"
        # nothing went to the host's disk: the containers' writable layers stayed empty
        for sid in (ep.sid, other.sid):
            [container] = docker_client.api.containers(
                size=True, filters={"label": f"orsbox.session={sid}"}
            )
            assert container.get("SizeRw", 0) < MIB  # docker omits a zero size

        # freeing space makes room again
        text, _ = ep.bash("rm /workspace/fill && head -c 8M /dev/zero > /workspace/f && echo ok")
        assert text == "ok\n"
    finally:
        ep.delete()
        other.delete()


def test_image_content_survives_in_bounded_folders(
    hostile_server: LiveServer, seeded_image: str
) -> None:
    ep = open_episode(hostile_server, "seeded")
    try:
        text, _ = ep.bash(
            "cat repo/file.txt; repo/run.sh; readlink repo/link; cat root-owned/x;"
            "stat -c '%U %a %n' . repo repo/run.sh; ls -A ~ | tr '\\n' ' '; echo;"
            "df -k --output=size . | tail -1 | tr -d ' '"
        )
        assert text.splitlines() == [
            "baked",
            "ran",
            "file.txt",
            "r",
            "orsbox 755 .",
            "orsbox 755 repo",
            "orsbox 755 repo/run.sh",
            ".bash_logout .bashrc .profile ",
            str(32 * 1024),
        ]
    finally:
        ep.delete()
