"""A private image registry on loopback, for the tests that pull: Debian's
`docker-registry` (the CNCF distribution registry) serving a folder of the test's own on
127.0.0.1. Docker engines treat 127.0.0.0/8 registries as insecure (plain HTTP) by
default, so every engine on this host can push to it and pull from it."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.waiting import wait_until

REGISTRY = "docker-registry"  # Debian's package of the same name (scripts/test.sh)
READY_S = 30.0

CONFIG = """version: 0.1
log:
  level: error
storage:
  filesystem:
    rootdirectory: {root}
http:
  addr: 127.0.0.1:{port}
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def answers(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/v2/", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


@contextlib.contextmanager
def local_registry(folder: Path) -> Iterator[str]:
    """A registry storing into `folder`, running while the block runs; yields its
    address (`127.0.0.1:PORT`, the prefix of the image names it serves)."""
    if shutil.which(REGISTRY) is None:
        pytest.fail(f"no {REGISTRY} (apt-get install docker-registry; scripts/test.sh does)")
    port = free_port()
    config = folder / "config.yml"
    config.write_text(CONFIG.format(root=folder / "data", port=port))
    process = subprocess.Popen(
        [REGISTRY, "serve", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        wait_until(lambda: answers(port) or process.poll() is not None, READY_S)
        assert process.poll() is None, f"{REGISTRY} exited: {process.stderr.read()!r}"  # type: ignore[union-attr]
        yield f"127.0.0.1:{port}"
    finally:
        process.kill()
        process.wait()
        process.stderr.close()  # type: ignore[union-attr]
