"""The operator's sandbox policy, checked when the server loads its environments.

An environment's `SandboxLimits` can ask for what widens a hostile agent's reach: a
network, the host's network, privileged mode, added capabilities, host mounts. Read-only
data mounts are allowed; everything else must also be allowed by the server's settings.
A refused environment stops the server at load time with a message saying what was
asked and which setting allows it, instead of a container starting with more than the
operator meant to give.
"""

from __future__ import annotations

import fnmatch
import json
import os
import stat
from collections.abc import Iterator, Sequence

from orsbox.authoring import Environment
from orsbox.authoring.container import ContainerEnvironment
from orsbox.errors import BadRequest, Forbidden, PolicyViolation
from orsbox.sandbox.base import HostMount, SandboxBackend, SandboxLimits
from orsbox.sandbox.capabilities import BackendCapabilities, NetworkMode
from orsbox.settings import Settings

# Host folders a read-only mount must neither be nor lie inside: they hold the host's
# configuration, credentials, devices, kernel interfaces and the container engines.
SYSTEM_FOLDERS = (
    "/boot",
    "/dev",
    "/etc",
    "/home",
    "/proc",
    "/root",
    "/run",
    "/sys",
    "/var/lib/containerd",
    "/var/lib/docker",
    "/var/run",
)
ENGINE_SOCKETS = ("docker.sock", "containerd.sock", "podman.sock")


def check_policy(
    environments: Sequence[type[Environment]],
    settings: Settings,
    backend: SandboxBackend | None,
) -> None:
    """Refuse the first environment that asks for more than `settings` allow, or for
    what `backend` (the one its sandboxes will start on) cannot give."""
    for env_cls in environments:
        if issubclass(env_cls, ContainerEnvironment):
            _check_one(env_cls, settings, backend)


def _check_one(
    env_cls: type[ContainerEnvironment],
    settings: Settings,
    backend: SandboxBackend | None,
) -> None:
    name = env_cls.name().lower()
    for mount in env_cls.limits.mounts:
        if not os.path.lexists(mount.source):
            raise PolicyViolation(
                f"environment {name!r} mounts {mount.source}, which does not exist on this host"
            )
    for asked, allow_with in refusals(env_cls.limits, settings, backend):
        raise PolicyViolation(
            f"environment {name!r} asks for {asked}; this server does not allow it "
            f"(allow with {allow_with})"
        )


def refusals(
    limits: SandboxLimits, settings: Settings, backend: SandboxBackend | None
) -> Iterator[tuple[str, str]]:
    """(what was asked, the setting that allows it) for each request `settings` refuse,
    or `backend` (None: none) cannot give, as its `capabilities` say."""
    if limits.network == "host" and not settings.allow_host_network:
        yield "the host's network", "ORSBOX_ALLOW_HOST_NETWORK=1"
    elif limits.network is True and not settings.allow_network:
        yield "a network", "ORSBOX_ALLOW_NETWORK=1"
    elif limits.network == "allowlist" and not allows_allowlist(settings):
        yield "an allow-listed network", "ORSBOX_ALLOW_NETWORK_ALLOWLIST=1"
    if limits.privileged and not settings.allow_privileged:
        yield "privileged mode", "ORSBOX_ALLOW_PRIVILEGED=1"
    refused = sorted(set(limits.cap_add) - set(settings.allow_cap_add))
    if refused:
        yield (
            f"capabilities {', '.join(refused)}",
            f"ORSBOX_ALLOW_CAP_ADD='{json.dumps(refused)}'",
        )
    for mount in limits.mounts:
        yield from _mount_refusals(mount, settings)
    if limits.runtime is not None:
        capabilities = backend.capabilities if backend is not None else None
        yield from _runtime_refusals(limits.runtime, settings, capabilities)


def _runtime_refusals(
    runtime: str, settings: Settings, capabilities: BackendCapabilities | None
) -> Iterator[tuple[str, str]]:
    """An environment may ask for the backend's runtime or one the operator allows,
    where the backend chooses a runtime per sandbox at all."""
    if capabilities is None or not capabilities.runtime_choice:
        yield f"the {runtime} runtime", "a docker backend (ORSBOX_BACKEND)"
    elif not capabilities.offers_runtime(runtime):
        allowed = [*capabilities.allowed_runtimes, runtime]
        config = json.dumps({"type": settings.backend.type, "allow_runtimes": allowed})
        yield f"the {runtime} runtime", f"ORSBOX_BACKEND='{config}'"


def _mount_refusals(mount: HostMount, settings: Settings) -> Iterator[tuple[str, str]]:
    source = os.path.realpath(mount.source)  # a link must not dress up what it points to
    what = f"a mount of {mount.source}" + (f" (-> {source})" if source != mount.source else "")
    if _is_socket(source):
        if not settings.allow_docker_socket:
            yield (
                f"{what}: a socket, a way into a host service such as the Docker engine",
                "ORSBOX_ALLOW_DOCKER_SOCKET=1",
            )
    elif not settings.allow_host_mounts:
        if not mount.read_only:
            yield f"{what}, writable", "ORSBOX_ALLOW_HOST_MOUNTS=1 (or read_only = true)"
        elif _is_system_path(source):
            yield f"{what}: a system folder", "ORSBOX_ALLOW_HOST_MOUNTS=1"


def _is_socket(path: str) -> bool:
    """A socket, or named as an engine's socket (refused even before the engine runs)."""
    try:
        is_socket = stat.S_ISSOCK(os.stat(path).st_mode)
    except OSError:
        is_socket = False
    return is_socket or os.path.basename(path) in ENGINE_SOCKETS


def _is_system_path(path: str) -> bool:
    """`path` is a system folder, lies inside one, or holds one (`/`, `/var`)."""
    return any(
        path == folder or path.startswith(folder + "/") or folder.startswith(path.rstrip("/") + "/")
        for folder in SYSTEM_FOLDERS
    )


# -- the sandbox API (orsbox.server.sandbox_api) -----------------------------------------
def check_sandbox_api(settings: Settings) -> None:
    """The sandbox API starts containers for whoever calls it: never without a token."""
    if settings.sandbox_api and settings.token is None and not settings.sandbox_tokens:
        raise PolicyViolation(
            "ORSBOX_SANDBOX_API=1 needs a token: set ORSBOX_TOKEN or ORSBOX_SANDBOX_TOKENS"
        )


def check_sandbox_image(asked: str, image: str, settings: Settings) -> None:
    """403 unless `image`, what `asked` becomes after the image map and what will run,
    matches an allowed pattern; the message says how the map took part."""
    if not any(fnmatch.fnmatchcase(image, p) for p in settings.sandbox_images):
        allowed = ", ".join(settings.sandbox_images) or "none"
        raise Forbidden(
            f"{image_mapping(asked, image)} is not allowed for sandboxes (allowed: {allowed}; "
            "judged after the image map); allow it with ORSBOX_SANDBOX_IMAGES, or map it "
            "onto an allowed image with `orsbox serve --image-map FROM=TO` (or ORSBOX_IMAGE_MAP)"
        )


def image_mapping(asked: str, image: str) -> str:
    """The image named as asked and as mapped, for error messages."""
    if asked == image:
        return f"image {image!r} (no image map rule matched it)"
    return f"image {asked!r} (mapped to {image!r} by the image map)"


def allows_allowlist(settings: Settings) -> bool:
    """An allow-list is narrower than the internet: either setting allows it."""
    return settings.allow_network_allowlist or settings.allow_network


def check_sandbox_network(network: bool | str, settings: Settings) -> None:
    """403 for outbound access (a policy with no allow rule, or not enforced) or an
    allow-list (a policy with allow rules) unless the operator allows it."""
    if network is True and not settings.allow_network:
        raise Forbidden(
            "a sandbox with network access (block_network=false, or a network policy "
            "that is not enforced) is not allowed; allow with ORSBOX_ALLOW_NETWORK=1, "
            "or ask for block_network=true"
        )
    if network == "allowlist" and not allows_allowlist(settings):
        raise Forbidden(
            "a sandbox with an allow-listed network (a network policy with allow rules) "
            "is not allowed; allow with ORSBOX_ALLOW_NETWORK_ALLOWLIST=1"
        )


def check_backend_network(
    network: NetworkMode, capabilities: BackendCapabilities, *, switching: bool = False
) -> None:
    """400 for a network the backend cannot give (gVisor's sandboxes have none), or for
    switching a running sandbox's network where it cannot, asked of its `capabilities`
    before anything starts. A backend that isolates nothing (the fake) is not asked."""
    if not capabilities.isolated:
        return
    if switching and not capabilities.switch_network:
        raise BadRequest(
            "this server's sandboxes cannot change their network while running "
            f"({capabilities.describe_network()})"
        )
    if not capabilities.gives_network(network):
        raise BadRequest(
            f"this server's sandboxes cannot have {NETWORK_NAMES.get(network, network)} "
            f"({capabilities.describe_network()})"
        )


NETWORK_NAMES = {True: "network access", "allowlist": "an allow-listed network"}
