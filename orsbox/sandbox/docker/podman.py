"""What the Docker backend does differently when Podman serves the Docker API.

Measured on Podman 4.3.1 with netavark 1.4 (docs/backends.md has the table):

- **The root folder's mode.** Podman's storage gives `/` mode 0555 when the image's layers
  leave it unsaid (most do: `docker save` never writes it), where Docker gives 0755.
  A sandbox drops every capability, so root could then make nothing in `/`: no grader's
  hidden folder (`orsbox.authoring.grader`), no `/logs` for a Harbor task's verifier.
  The backend gives `/` Docker's mode before the container starts: one copy of a
  single-entry tar (`root_folder_archive`).
- **No guarded network.** Podman turns the guarded network's
  `com.docker.network.bridge.enable_icc=false` into netavark's `isolate` option, which
  keeps networks apart but not the containers on one network: two sandboxes on it
  reach each other. And netavark's forwarding rules come before `DOCKER-USER`, where the
  egress guard's chain hangs (`orsbox.sandbox.host.egress`), and a host without Docker
  has no such chain at all. So a sandbox on Podman gets no network but the host's (which is never
  guarded): one that needs one is refused when it starts, named, rather than started
  unguarded, and `capabilities` says so first (`PODMAN_NETWORK_MODES`).
- **No runtime choice.** Its API ignores the runtime a container asks for; the backend
  refuses a start that asks for one (`DockerBackend._refuse_an_ignored_runtime`).
"""

from __future__ import annotations

import io
import tarfile
import time

from orsbox.sandbox.capabilities import NetworkMode

PODMAN_NETWORK_MODES: frozenset[NetworkMode] = frozenset({False, "host"})


def is_podman(product: str | None) -> bool:
    """`product` (`Engine.product`, e.g. `Podman 4.3.1`) is Podman's API."""
    return product is not None and product.startswith("Podman")


def no_guarded_network(product: str) -> str:
    """Why a sandbox on Podman cannot have a network (the module docstring says more)."""
    return (
        f"a sandbox on {product} has no network but the host's: Podman's networks do not "
        "hold orsbox's egress guard (sandboxes on one network reach each other, and its "
        "forwarding rules pass traffic before the guard's), so it is refused rather than "
        "started unguarded (docs/backends.md); run environments that need one on Docker"
    )


def root_folder_archive() -> bytes:
    """A tar of one entry, `./`: a folder owned by root, mode 0755. Unpacked at `/`, it
    sets the root folder's owner and mode and nothing else."""
    entry = tarfile.TarInfo("./")
    entry.type, entry.mode, entry.mtime = tarfile.DIRTYPE, 0o755, int(time.time())
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.addfile(entry)
    # The header and the two zero blocks that end a tar, without tarfile's padding to
    # 10 KiB: Podman's copier stops reading at the end blocks, and a body longer than
    # what it reads can meet its closed pipe ("write |1: broken pipe").
    return buffer.getvalue()[: tarfile.BLOCKSIZE * 3]
