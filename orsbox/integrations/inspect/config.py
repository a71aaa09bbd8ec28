"""What a task's `sandbox=` asks of orsbox, read the way Inspect's Docker provider reads it.

`sandbox="orsbox"` alone starts orsbox's base image. `("orsbox", "compose.yaml")` or
`("orsbox", "Dockerfile")` reads the image from a compose file's default service (the one
marked `x-default: true`, else the one named `default`, else the first) or builds the
Dockerfile; `("orsbox", OrsboxSandboxConfig(...))` says everything explicitly. A compose
field orsbox would have to ignore silently (ports, volumes, extra services, privileges)
is refused with the reason: a sample that runs differently from its author's intent is
worse than one that does not start.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, SecretStr

from orsbox.sandbox.base import SandboxLimits

DEFAULT_IMAGE = "orsbox/base:latest"
URL_VARIABLE = "ORSBOX_URL"  # a server or cluster router; unset: sandboxes in-process
TOKEN_VARIABLE = "ORSBOX_TOKEN"
COMPOSE_FILES = ("compose.yaml", "compose.yml", "docker-compose.yaml", "docker-compose.yml")
# Compose service keys orsbox honours, and keys it may ignore because orsbox does their
# job itself (its guest keeps the container alive and runs every command).
HONOURED = {
    "image",
    "build",
    "working_dir",
    "environment",
    "user",
    "init",
    "network_mode",
    "cpus",
    "mem_limit",
    "deploy",
    "x-default",
    "x-local",
    "runtime",
}
IGNORED = {"command", "entrypoint", "healthcheck", "restart", "container_name", "hostname"}
MEMORY = re.compile(r"(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?", re.IGNORECASE)


class ConfigRefused(ValueError):
    """The sandbox config asks for something orsbox cannot honour; says what and why."""


class OrsboxSandboxConfig(BaseModel):
    """Everything the provider needs; every field may be left to its default."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str | None = Field(
        default=None,
        description="an orsbox server or cluster router with the sandbox API on; None: "
        f"${URL_VARIABLE}, else sandboxes start in-process on the local engine",
    )
    token: SecretStr | None = Field(default=None, description=f"None: ${TOKEN_VARIABLE}")
    image: str | None = None
    dockerfile: str | None = Field(default=None, description="built in-process mode only")
    working_dir: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    user: str | None = Field(default=None, description="the default user for exec")
    runtime: str | None = Field(default=None, description="runc or runsc (in-process mode)")
    engine: str | None = Field(default=None, description="the engine (in-process mode)")
    cpus: float = 1.0
    memory_bytes: int = 1024**3
    network: bool = False

    def __hash__(self) -> int:  # Inspect keys its sandbox caches by the config
        return hash(self.model_dump_json())

    @property
    def remote_url(self) -> str | None:
        return self.url or os.environ.get(URL_VARIABLE) or None

    @property
    def bearer(self) -> str | None:
        if self.token is not None:
            return self.token.get_secret_value()
        return os.environ.get(TOKEN_VARIABLE) or None

    def limits(self) -> SandboxLimits:
        return SandboxLimits(cpus=self.cpus, memory_bytes=self.memory_bytes, network=self.network)


def resolve(config: object) -> OrsboxSandboxConfig:
    """The config Inspect handed over (None, a file path, a model or its dict form)."""
    if config is None:
        return OrsboxSandboxConfig()
    if isinstance(config, OrsboxSandboxConfig):
        return config
    if isinstance(config, dict):
        return OrsboxSandboxConfig(**config)
    if isinstance(config, str):
        return from_file(Path(config))
    raise ConfigRefused(f"orsbox cannot read a sandbox config of type {type(config).__name__}")


def from_file(path: Path) -> OrsboxSandboxConfig:
    if not path.is_file():
        raise ConfigRefused(f"{path}: no such sandbox config file")
    if path.name in COMPOSE_FILES or path.suffix in (".yaml", ".yml"):
        return from_compose(path)
    if "Dockerfile" in path.name:
        return OrsboxSandboxConfig(dockerfile=str(path.resolve()))
    raise ConfigRefused(f"{path}: orsbox reads a compose file or a Dockerfile")


def from_compose(path: Path) -> OrsboxSandboxConfig:
    """The default service of a compose file, or `ConfigRefused` naming what is not
    honoured."""
    document = yaml.safe_load(path.read_text()) or {}
    services: dict[str, Any] = document.get("services") or {}
    if not services:
        raise ConfigRefused(f"{path}: no services")
    if len(services) > 1:
        raise ConfigRefused(
            f"{path}: {len(services)} services; an orsbox sandbox is one container "
            "(run sidecars inside the image, or use Inspect's docker provider)"
        )
    for key in ("networks", "volumes", "secrets", "configs"):
        if document.get(key):
            raise ConfigRefused(f"{path}: top-level `{key}` is not honoured by orsbox")
    ((name, service),) = services.items()
    return _service_config(path, name, service or {})


def _service_config(path: Path, name: str, service: dict[str, Any]) -> OrsboxSandboxConfig:
    refused = sorted(set(service) - HONOURED - IGNORED)
    if refused:
        raise ConfigRefused(
            f"{path}: service {name!r} sets {', '.join(refused)}, which orsbox does not "
            "honour (a sandbox gets no ports, volumes, devices or added privileges)"
        )
    fields: dict[str, Any] = {
        "image": service.get("image"),
        "working_dir": service.get("working_dir"),
        "user": service.get("user"),
        "runtime": service.get("runtime"),
        "env": _environment(service.get("environment")),
        "network": _network(path, service.get("network_mode")),
    }
    if "build" in service:
        fields["dockerfile"] = str(_dockerfile(path, service["build"]))
    fields.update(_resources(service))
    return OrsboxSandboxConfig(**{k: v for k, v in fields.items() if v is not None})


def _environment(value: object) -> dict[str, str]:
    if isinstance(value, dict):
        return {str(k): "" if v is None else str(v) for k, v in value.items()}
    if isinstance(value, list):
        return dict(item.split("=", 1) if "=" in item else (item, "") for item in value)
    return {}


def _network(path: Path, mode: object) -> bool | None:
    if mode in (None, "none"):
        return False
    if mode in ("bridge", "default"):
        return True
    raise ConfigRefused(f"{path}: network_mode {mode!r} is not honoured (none or bridge)")


def _dockerfile(path: Path, build: str | dict[str, Any]) -> Path:
    context = path.parent / (build if isinstance(build, str) else build.get("context", "."))
    name = "Dockerfile" if isinstance(build, str) else build.get("dockerfile", "Dockerfile")
    return (context / name).resolve()


def _resources(service: dict[str, Any]) -> dict[str, Any]:
    limits = ((service.get("deploy") or {}).get("resources") or {}).get("limits") or {}
    cpus = service.get("cpus", limits.get("cpus"))
    memory = service.get("mem_limit", limits.get("memory"))
    found: dict[str, Any] = {}
    if cpus is not None:
        found["cpus"] = float(cpus)
    if memory is not None:
        found["memory_bytes"] = memory_bytes(memory)
    return found


def memory_bytes(value: object) -> int:
    """Compose's memory notation: 512m, 1g, 1.5GB, or bytes."""
    if isinstance(value, int):
        return value
    match = MEMORY.fullmatch(str(value).strip())
    if match is None:
        raise ConfigRefused(f"memory {value!r}: want a size such as 512m or 2g")
    power = "bkmgt".index(match[2].lower() or "b")
    return int(float(match[1]) * 1024**power)
