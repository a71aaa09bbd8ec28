"""The Docker engine's images: is one present, pull, build, copy one between engines, and
reading files out of one.

Images are built from Dockerfiles that take their parent as `ARG BASE_IMAGE` (an
`ImageRecipe`, `orsbox.sandbox.images`, names both), through the engine's build API so no
docker CLI is needed. Blocking functions: `DockerImages` (`image_store.py`) runs them in
worker threads against the backend's configured engine.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import docker
import docker.errors

from orsbox.errors import ImageBuildError, SandboxError
from orsbox.sandbox.docker.engine import read_archive, request_helpers, translated
from orsbox.sandbox.images import BASE_IMAGE, BUILD_TIMEOUT_S, LOCAL_DEBIAN, BuildLog, ImageRecipe

SCRIPTS = Path(__file__).resolve().parents[3] / "scripts"
BUILD_SCRIPT = SCRIPTS / "build-images.sh"
LOCAL_BASE_SCRIPT = SCRIPTS / "make-local-base.sh"
BUILD_QUIET_S = 900  # a build step may print nothing for this long (a compile, a download)
COPY_CHUNK_BYTES = 1 << 20
# The default bridge's NAT (the engine's `ip-masq`): a build's RUN steps run on it
MASQUERADE_OPTION = "com.docker.network.bridge.enable_ip_masquerade"
# What a build step prints when it reaches no network: apt's, pip's (urllib3's), curl's,
# wget's and getaddrinfo's words for it
NETWORK_FAILURE = re.compile(
    r"Temporary failure (resolving|in name resolution)|Could not resolve|Name or service "
    r"not known|Failed to establish a new connection|Network is unreachable|unable to "
    r"resolve host"
)


def has_image(client: docker.DockerClient, reference: str) -> bool:
    """Like `image_exists`, for any string: one that is no image reference at all (a
    path, a module name) is simply not an image."""
    try:
        return image_exists(client, reference)
    except docker.errors.APIError:
        return False


def pull_events(
    client: docker.DockerClient, repository: str, tag: str | None
) -> Iterator[dict[str, Any]]:
    """The engine's progress events while pulling; failures as `SandboxError`."""
    with translated(f"pull {repository}"):
        yield from client.api.pull(repository, tag=tag, stream=True, decode=True)


def pull_image(
    client: docker.DockerClient, image: str, progress: Callable[[str], None] | None
) -> None:
    """Pull `image` into `client`'s engine, a line per progress event to `progress`;
    failures (the registry's included) as `SandboxError`."""
    repository, tag = split_reference(image)
    for event in pull_events(client, repository, tag):
        if "error" in event:
            raise SandboxError(f"pull {image}: {event['error']}")
        if progress is not None:
            progress(" ".join(str(event[k]) for k in ("id", "status", "progress") if event.get(k)))


def split_reference(image: str) -> tuple[str, str | None]:
    """(repository, tag) as the pull API takes them; a digest stays in the repository."""
    if "@" in image:
        return image, None
    name, _, tag = image.rpartition(":")
    if name and "/" not in tag:
        return name, tag
    return image, "latest"


def image_exists(client: docker.DockerClient, tag: str) -> bool:
    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    return True


def build_hint(image: str) -> str:
    if image == BASE_IMAGE:
        return "build it with `orsbox build` (or `bash scripts/build-images.sh`)"
    return (
        f"build it with `docker build -t {image} <folder with its Dockerfile>`, or with "
        "`orsbox build` when it is one of orsbox's images or an environment's [build] "
        f"image, or map it onto an image you have (--image-map {image}=IMAGE, "
        "ORSBOX_IMAGE_MAP)"
    )


def build_image(client: docker.DockerClient, recipe: ImageRecipe, log: BuildLog) -> float:
    """Build `recipe`, passing each whole line of build output (without terminal
    escapes) to `log`; return the seconds it took. On failure or timeout the images the
    build's steps made are removed (no dangling image is left) and `ImageBuildError`
    carries the build's last lines."""
    started = time.monotonic()
    args = {"BASE_IMAGE": recipe.base_image} if recipe.base_image else {}
    output = BuildOutput(log)
    try:
        with translated(f"build {recipe.tag}"):
            stream = client.api.build(
                path=str(recipe.context),
                dockerfile=str(recipe.dockerfile),
                tag=recipe.tag,
                buildargs=args,
                network_mode=recipe.network_mode,
                rm=True,
                forcerm=True,
                decode=True,
                # the SDK passes no timeout: a hung engine would hang us
                timeout=min(BUILD_QUIET_S, recipe.timeout_s),  # type: ignore[arg-type]  # the stubs say int; requests takes seconds as a float
            )
            for chunk in stream:
                if time.monotonic() - started > recipe.timeout_s:
                    raise ImageBuildError(
                        f"building {recipe.tag} ({recipe.origin}) took over "
                        f"{recipe.timeout_s:g}s:\n{output.last_lines()}"
                    )
                if "error" in chunk:
                    output.feed("\n" + str(chunk["error"]))
                    tail = output.last_lines()
                    raise ImageBuildError(
                        f"building {recipe.tag} ({recipe.origin}) failed{output.why()}:\n{tail}"
                    )
                output.feed(str(chunk.get("stream", "")))
    except BaseException:
        remove_images(client, output.made)
        raise
    return time.monotonic() - started


ANSI_ESCAPE = re.compile(r"\x1b(\[[0-9;?]*[ -/]*[@-~]|\][^\x07]*\x07|[@-Z\\-_])")
STEP_IMAGE = re.compile(r"^ ---> ([0-9a-f]{12,64})$")
SHOWN_LINES = 15


class BuildOutput:
    """A build's output stream as whole lines without terminal escapes (the engine cuts
    its chunks anywhere, a line included), and the images its own steps made: a step
    that ran (` ---> Running in ...`) ends with ` ---> <image id>`; a cached step and
    the FROM line name images the build did not make."""

    def __init__(self, log: BuildLog) -> None:
        self.log = log
        self.tail: deque[str] = deque(maxlen=SHOWN_LINES)
        self.made: list[str] = []
        self._partial = ""
        self._step_ran = False
        self.network_failure: str | None = None  # the first line saying no network

    def feed(self, text: str) -> None:
        *lines, self._partial = (self._partial + text).split("\n")
        for line in lines:
            self._line(line)

    def last_lines(self) -> str:
        if self._partial:
            self._line(self._partial)
            self._partial = ""
        return "\n".join(self.tail)

    def why(self) -> str:
        """What the output says made the build fail, as a clause (empty when nothing
        does): its steps reaching no network, with the first line that said so (apt
        itself then fails later, at a package it could not find, exit code 100)."""
        if self.network_failure is None:
            return ""
        return f": its steps reached no network ({self.network_failure!r})"

    def _line(self, raw: str) -> None:
        line = ANSI_ESCAPE.sub("", raw).rsplit("\r", 1)[-1].rstrip()
        if not line.strip():
            return
        if line.startswith(" ---> Running in "):
            self._step_ran = True
        elif (made := STEP_IMAGE.match(line)) is not None:
            if self._step_ran:
                self.made.append(made.group(1))
            self._step_ran = False
        elif self.network_failure is None and NETWORK_FAILURE.search(line):
            self.network_failure = line.strip()[:200]
        self.tail.append(line)
        self.log(line)


def remove_images(client: docker.DockerClient, images: list[str]) -> None:
    """Remove the images a failed build made, newest first (each is then a leaf), and
    nothing else: not forced, parents not pruned; one still in use stays."""
    for image in reversed(images):
        with contextlib.suppress(docker.errors.APIError):
            client.api.remove_image(image, force=False, noprune=True)


def offline_builds(client: docker.DockerClient, address: str) -> str | None:
    """Why the build steps of the engine at `address` reach no network, or None when
    nothing says so. A classic build's RUN steps run on the engine's default bridge, so
    with that bridge doing no NAT (`"ip-masq": false`, as the private engines of
    scripts/start-runsc-engine.sh and orsbox.cluster run with `"iptables": false`: a
    second dockerd must leave the host's iptables to the first) their packets leave
    with a private source address no answer comes back to: no DNS, no apt, no pip."""
    try:
        bridge = client.api.inspect_network("bridge")
    except docker.errors.APIError:  # no network of that name (Podman's is `podman`)
        return None
    options = bridge.get("Options") or {}
    if options.get(MASQUERADE_OPTION) != "false":
        return None
    name = options.get("com.docker.network.bridge.name") or "bridge"
    return (
        f"build steps on the engine at {address} reach no network: its default bridge "
        f"({name}) does no NAT (the engine runs with ip-masq false, as "
        "scripts/start-runsc-engine.sh starts it); such images are built on the local "
        "engine (DOCKER_HOST, else unix:///var/run/docker.sock) and copied in, or loaded "
        "by hand (docker save IMAGE | DOCKER_HOST=ENGINE docker load)"
    )


def copy_images(
    source: docker.DockerClient, target: docker.DockerClient, images: list[str]
) -> None:
    """`docker save IMAGES | docker load` between two engines, streamed (one archive, so
    the layers the images share go once); failures as `SandboxError`."""
    helpers = request_helpers(source.api)
    with translated(f"save {', '.join(images)}"):
        response = helpers._get(helpers._url("/images/get"), params={"names": images}, stream=True)
    with contextlib.closing(response):
        with translated(f"save {', '.join(images)}"):
            helpers._raise_for_status(response)
        archive = response.iter_content(COPY_CHUNK_BYTES, decode_unicode=False)
        with translated(f"load {', '.join(images)}"):
            for event in target.api.load_image(archive, quiet=True):
                if "error" in event:
                    raise SandboxError(f"load {', '.join(images)}: {event['error']}")
    missing = [image for image in images if not image_exists(target, image)]
    if missing:
        raise SandboxError(f"load {', '.join(images)}: {', '.join(missing)} not there after")


def make_local_debian(log: BuildLog, address: str | None = None) -> None:
    """`orsbox/debian:bookworm` from the Debian mirror (mmdebstrap | docker import), in
    the engine at `address` (None: DOCKER_HOST, else the default socket)."""
    env = {**os.environ, "DOCKER_HOST": address} if address else None
    process = subprocess.Popen(
        ["bash", str(LOCAL_BASE_SCRIPT)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    assert process.stdout is not None
    lines = []
    killer = threading.Timer(BUILD_TIMEOUT_S, process.kill)  # the loop waits on its output
    killer.start()
    try:
        for line in process.stdout:
            lines.append(line.rstrip())
            log(line.rstrip())
    finally:
        killer.cancel()
    if process.wait(timeout=BUILD_TIMEOUT_S) != 0:
        raise ImageBuildError(f"making {LOCAL_DEBIAN} failed:\n" + "\n".join(lines[-15:]))


def read_folder(client: docker.DockerClient, image: str, path: str) -> bytes:
    """A tar of folder `path` in `image`, read from a created (never started) container,
    so nothing of the image runs."""
    with translated(f"read {path} from image {image}"):
        container = client.api.create_container(
            image, command=["true"], network_disabled=True, labels={"orsbox.extract": "1"}
        )
        try:
            return read_archive(client.api, container["Id"], path)
        finally:
            client.api.remove_container(container["Id"], force=True)


def image_labels(client: docker.DockerClient, image: str) -> dict[str, str]:
    with translated(f"inspect image {image}"):
        return dict(client.api.inspect_image(image).get("Config", {}).get("Labels") or {})


def ensure_base_image(client: docker.DockerClient | None = None, tag: str = BASE_IMAGE) -> None:
    """Build `orsbox/base:latest` (with scripts/build-images.sh) unless it exists.
    Blocking (a first build takes about a minute); meant for tests and setup commands."""
    client = client or docker.from_env()
    if image_exists(client, tag):
        return
    if not BUILD_SCRIPT.exists():
        raise RuntimeError(f"image {tag!r} is missing and {BUILD_SCRIPT} is not there")
    folder = BUILD_SCRIPT.parent.parent / "images" / "base"
    subprocess.run(["bash", str(BUILD_SCRIPT), str(folder)], check=True, timeout=BUILD_TIMEOUT_S)
