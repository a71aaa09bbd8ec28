"""What a client asks of the sandbox API, read from the `openreward` client's wire format.

`POST /create_sandbox` carries `SandboxSettings.model_dump()`: `environment`, `image`,
`machine_size` ("cpus:GB"), `env`, `block_network`, `network` (an egress policy), and
fields orsbox cannot honour on Docker — `bucket_config`, `sidecars`, `host_aliases` and
GPU machine sizes — which are refused with a 400 naming the field rather than ignored.

Docker cannot filter egress per host, so a network policy is honoured as all or
nothing: one that allows nothing (no allow rule, no preset, enforced) is no network;
any other gives the sandbox open outbound access, which the operator's policy must
allow (`orsbox.server.policy.sandbox_refusals`).
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from orsbox.errors import BadRequest
from orsbox.sandbox.base import SandboxLimits, SandboxSpec

GB = 1024**3
MACHINE_SIZE = re.compile(r"(\d+(?:\.\d+)?):(\d+(?:\.\d+)?)")
UNSUPPORTED = {
    "bucket_config": "bucket mounts",
    "sidecars": "sidecar containers",
    "host_aliases": "host aliases",
}


class EgressRule(BaseModel):
    model_config = ConfigDict(extra="allow")
    action: str
    host: str


class NetworkPolicy(BaseModel):
    """`SandboxNetworkPolicy` on the wire (`network` and `POST /set_network`)."""

    model_config = ConfigDict(extra="allow")
    rules: list[EgressRule] = Field(default_factory=list)
    presets: list[str] = Field(default_factory=list)
    enforce: bool = True

    @property
    def allows_any(self) -> bool:
        allows = any(r.action == "allow" for r in self.rules) or bool(self.presets)
        return allows or not self.enforce


class SandboxRequest(BaseModel):
    """`SandboxSettings` on the wire; fields newer clients add are refused if set."""

    model_config = ConfigDict(extra="allow")
    environment: str = ""
    image: str
    machine_size: str = "1:1"
    env: dict[str, str] | None = None
    block_network: bool = True
    network: NetworkPolicy | None = None
    task_id: str | None = None

    def check_supported(self) -> None:
        """400 naming the first field orsbox cannot honour."""
        for name, what in UNSUPPORTED.items():
            if getattr(self, name, None):
                raise BadRequest(f"{name}: {what} are not supported by orsbox sandboxes")
        for name, value in (self.model_extra or {}).items():
            if name not in UNSUPPORTED and value not in (None, False, [], {}, ""):
                raise BadRequest(f"{name}: not supported by orsbox sandboxes")
        if self.network is not None and self.block_network:
            raise BadRequest("network and block_network=true are mutually exclusive")
        machine_limits(self.machine_size)

    @property
    def wants_network(self) -> bool:
        """Open outbound access: no block and no policy, or a policy that allows some."""
        if self.network is not None:
            return self.network.allows_any
        return not self.block_network

    def spec(self, image: str, sandbox_id: str, labels: dict[str, str]) -> SandboxSpec:
        cpus, memory_bytes = machine_limits(self.machine_size)
        limits = SandboxLimits(cpus=cpus, memory_bytes=memory_bytes, network=self.wants_network)
        env = dict(self.env or {})
        return SandboxSpec(
            image=image, limits=limits, env=env, labels=labels, session_id=sandbox_id
        )


def machine_limits(machine_size: str) -> tuple[float, int]:
    """ "2:4" -> 2 CPUs and 4 GB of memory; a GPU size is a 400."""
    match = MACHINE_SIZE.fullmatch(machine_size)
    if match is None:
        raise BadRequest(
            f"machine_size: {machine_size!r} is not supported by orsbox sandboxes "
            '(want "CPUS:GB" such as "1:2"; no GPUs)'
        )
    return float(match[1]), int(float(match[2]) * GB)


class RunRequest(BaseModel):
    """`POST /run`: `cmd` through `shell -c`, at most `max_bytes` of output back.

    `cwd`, `env` and `user` are orsbox's own additions (the openreward client never sends
    them): they let a harness that drives sandboxes through this API (the Inspect
    provider, `orsbox.integrations.inspect`) run a command where, with what and as whom
    its contract says, set by the exec itself rather than by a shell prefix that the
    image's `PATH` could subvert."""

    model_config = ConfigDict(extra="allow")
    cmd: str
    timeout_s: float | None = 300.0
    max_bytes: int | None = Field(default=None, ge=0)
    shell: str = "/bin/bash"
    task_id: str | None = None
    cwd: str | None = Field(default=None, description="orsbox: the working directory")
    env: dict[str, str] | None = Field(default=None, description="orsbox: added variables")
    user: str | None = Field(default=None, description="orsbox: run as this user or uid")


def truthy(value: Any) -> bool:
    return str(value).lower() in ("1", "true", "yes")
