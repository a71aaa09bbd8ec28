"""The deployment's image registry: Debian's `docker-registry` (the CNCF distribution
registry), one per cluster, that every cell's engine pulls instance images from.

Cells pull through it as a **registry mirror** (`registry-mirrors` in each engine's
daemon.json), not by renaming images: a dataset names `swebench/sweb.eval...:latest`,
the engine asks the mirror for `swebench/sweb.eval...` first, and the image keeps its
published name on the cell, so the datasets, the image cache's records and the router's
image keys all see one name. `push` stores an image under the same path in the registry
(`<registry>/swebench/sweb.eval...:latest`; an official image under `library/`), which
is where a mirror looks. A mirror serves Docker Hub names only: an image named with
another registry (`ghcr.io/...`) needs an image map rule onto this one
(`--image-map ghcr.io/=<registry>/`). On loopback the registry is plain HTTP, which
engines accept for 127.0.0.0/8 without `insecure-registries`.

The process is found again by pid and start time (`Tracked`), never by name.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from orsbox.cluster.processes import Tracked
from orsbox.sandbox.image_map import DEFAULT_REGISTRY, normalize

REGISTRY_COMMAND = "docker-registry"  # Debian's package of the same name
READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0

CONFIG = """version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: {data}
  delete:
    enabled: true
http:
  addr: {address}
"""


class RegistryError(RuntimeError):
    """The registry could not start, or refused an image."""


@dataclass
class LocalRegistry:
    """A registry storing under `root`, listening on `address` (`127.0.0.1:PORT`)."""

    root: Path
    address: str
    pid: int = 0
    started: str = ""

    @property
    def url(self) -> str:
        return f"http://{self.address}"

    @property
    def process(self) -> Tracked:
        return Tracked(self.pid, self.started)

    def start(self) -> None:
        """Start it in its own process group; return once `/v2/` answers."""
        if shutil.which(REGISTRY_COMMAND) is None:
            raise RegistryError(
                f"{REGISTRY_COMMAND} not found: apt-get install docker-registry (Debian's "
                "distribution registry)"
            )
        self.root.mkdir(parents=True, exist_ok=True)
        config = self.root / "config.yml"
        config.write_text(CONFIG.format(data=self.root / "data", address=self.address))
        with (self.root / "registry.log").open("ab") as log:
            process = subprocess.Popen(
                [REGISTRY_COMMAND, "serve", str(config)],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        tracked = Tracked.of(process.pid)
        self.pid, self.started = tracked.pid, tracked.started
        self.wait_ready()

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while not answers(self.address):
            if not self.process.alive():
                raise RegistryError(f"{REGISTRY_COMMAND} exited:\n{self.log()[-2000:]}")
            if time.monotonic() > deadline:
                raise RegistryError(f"the registry on {self.address} did not answer")
            time.sleep(0.05)

    def log(self) -> str:
        path = self.root / "registry.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        """Stop the process (by pid and start time) and delete what it stored."""
        self.process.stop(STOP_TIMEOUT_S)
        shutil.rmtree(self.root, ignore_errors=True)

    def to_json(self) -> dict[str, object]:
        return {"root": str(self.root), "address": self.address}


BIND_ATTEMPTS = 5


def start_on_free_port(root: Path) -> LocalRegistry:
    """A registry started on a free loopback port. A port found free can be taken by
    another process before the registry binds it (other test runs share the machine):
    then another is tried."""
    for attempt in range(BIND_ATTEMPTS):
        registry = LocalRegistry(root, f"127.0.0.1:{free_port()}")
        try:
            registry.start()
            return registry
        except RegistryError as e:
            registry.stop()
            if "address already in use" not in str(e) or attempt == BIND_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def answers(address: str) -> bool:
    """Whether a distribution registry answers on `address` (its API root, `/v2/`)."""
    try:
        with urllib.request.urlopen(f"http://{address}/v2/", timeout=2) as answer:
            return answer.status == 200
    except (OSError, urllib.error.URLError):
        return False


def mirrored_name(image: str, registry: str) -> str:
    """Where `image` goes in `registry` so that an engine using it as a mirror finds it:
    its Docker Hub path (`library/` for official images) under the registry."""
    normal = normalize(image)
    prefix = DEFAULT_REGISTRY + "/"
    if not normal.startswith(prefix):
        raise RegistryError(
            f"{image} is not a Docker Hub name, so a mirror never serves it: push it under "
            f"{registry}/ yourself and map its name (--image-map {image}={registry}/...)"
        )
    if "@" in normal:
        raise RegistryError(f"{image}: push images by tag, not by digest")
    return f"{registry}/{normal[len(prefix) :]}"


def catalog(address: str) -> list[str]:
    """The repositories the registry holds (its `/v2/_catalog`, first 1000: the page
    size the distribution registry allows)."""
    with urllib.request.urlopen(f"http://{address}/v2/_catalog?n=1000", timeout=10) as answer:
        return list(json.load(answer).get("repositories") or [])
