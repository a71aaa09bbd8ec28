"""What a client asks of the sandbox API, read from the `openreward` client's wire format.

`POST /create_sandbox` carries `SandboxSettings.model_dump()`: `environment`, `image`,
`machine_size` ("cpus:GB"), `env`, `block_network`, `network` (an egress policy), and
fields orsbox cannot honour on its backends — `bucket_config`, `sidecars`, `host_aliases` and
GPU machine sizes — which are refused with a 400 naming the field rather than ignored.

A network policy is honoured per host: its allow rules (and the hosts of its presets,
`PRESET_HOSTS`) become the sandbox's allow-list (`SandboxLimits.network = "allowlist"`,
served by the backend's egress proxy); anything else is refused with 403, as the platform
does. One that allows nothing (no allow rule, no preset, enforced) is no network; one
not enforced (audit mode) is the guarded internet. A rule with a `path` or `methods`
cannot be honoured by a host-level proxy and is refused with a 400, as is a deny rule
that is not for a whole host. The operator's policy must allow what is asked
(`orsbox.server.policy.check_sandbox_network`).
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from orsbox.errors import BadRequest
from orsbox.sandbox.base import SandboxLimits, SandboxSpec, check_allowed_host

GB = 1024**3
MACHINE_SIZE = re.compile(r"(\d+(?:\.\d+)?):(\d+(?:\.\d+)?)")
UNSUPPORTED = {
    "bucket_config": "bucket mounts",
    "sidecars": "sidecar containers",
    "host_aliases": "host aliases",
}


# The hosts each platform preset needs, as far as a host-level allow-list can say.
PRESET_HOSTS: dict[str, tuple[str, ...]] = {
    "pypi": ("pypi.org", "files.pythonhosted.org"),
    "apt-ubuntu": ("archive.ubuntu.com", "security.ubuntu.com", "ports.ubuntu.com"),
    "npm": ("registry.npmjs.org",),
    "go-modules": ("proxy.golang.org", "sum.golang.org"),
    "crates": ("crates.io", "index.crates.io", "static.crates.io"),
    "rust-toolchain": ("static.rust-lang.org",),
    "hf-cdn": ("*.hf.co", "*.huggingface.co", "cdn-lfs.huggingface.co"),
}


class EgressRule(BaseModel):
    model_config = ConfigDict(extra="allow")
    action: str
    host: str
    path: str | None = None
    methods: list[str] | None = None


class NetworkPolicy(BaseModel):
    """`SandboxNetworkPolicy` on the wire (`network` and `POST /set_network`)."""

    model_config = ConfigDict(extra="allow")
    rules: list[EgressRule] = Field(default_factory=list)
    presets: list[str] = Field(default_factory=list)
    enforce: bool = True

    def setting(self) -> tuple[bool | Literal["allowlist"], tuple[str, ...]]:
        """(`SandboxLimits.network`, `allowed_hosts`) for this policy; 400 for what a
        host-level allow-list cannot honour."""
        if not self.enforce:
            return True, ()
        hosts: list[str] = []
        denied: set[str] = set()
        for rule in self.rules:
            if rule.path is not None or rule.methods is not None:
                raise BadRequest(
                    f"network: the rule for {rule.host!r} has a path or methods; orsbox "
                    "filters egress by host only"
                )
            if rule.action == "deny":
                denied.add(rule.host.lower())
            elif rule.action == "allow" and rule.host.lower() not in denied:
                hosts.append(rule.host.lower())  # the first matching rule decides
            elif rule.action != "allow":
                raise BadRequest(f"network: unknown rule action {rule.action!r}")
        for preset in self.presets:
            if preset not in PRESET_HOSTS:
                known = ", ".join(PRESET_HOSTS)
                raise BadRequest(f"network: unknown preset {preset!r} (known: {known})")
            hosts += [h for h in PRESET_HOSTS[preset] if h not in denied]
        allowed = tuple(dict.fromkeys(hosts))
        for host in allowed:
            try:
                check_allowed_host(host)
            except ValueError as e:
                raise BadRequest(f"network: {e}") from None
        return ("allowlist", allowed) if allowed else (False, ())


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

    def network_setting(self) -> tuple[bool | Literal["allowlist"], tuple[str, ...]]:
        """(`SandboxLimits.network`, `allowed_hosts`): the policy's when there is one,
        else the guarded internet unless `block_network`."""
        if self.network is not None:
            return self.network.setting()
        return not self.block_network, ()

    def spec(self, image: str, sandbox_id: str, labels: dict[str, str]) -> SandboxSpec:
        cpus, memory_bytes = machine_limits(self.machine_size)
        network, hosts = self.network_setting()
        limits = SandboxLimits(
            cpus=cpus, memory_bytes=memory_bytes, network=network, allowed_hosts=hosts
        )
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


# A command longer than this goes to the shell on stdin: Linux caps one argument at
# 128 KiB (MAX_ARG_STRLEN), and the openreward client's `upload()` sends up to 10 MB of
# file as one base64 command. Shorter ones stay an argument, as before, for any shell.
ARGV_COMMAND_MAX_BYTES = 64 * 1024
# The shell reads the whole command from stdin, then runs it at top level with stdin
# from /dev/null (what a command run through `-c` gets); `eval` is a builtin, so no
# argument carries the command. Needs a POSIX shell (bash, sh, dash, zsh).
STDIN_COMMAND_LOADER = 'eval "$(cat)" </dev/null'


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

    def command(self) -> tuple[list[str], bytes | None]:
        """The argv and stdin that run `cmd` in `shell`, whatever its size."""
        data = self.cmd.encode("utf-8", errors="surrogateescape")
        if len(data) <= ARGV_COMMAND_MAX_BYTES:
            return [self.shell, "-c", self.cmd], None
        return [self.shell, "-c", STDIN_COMMAND_LOADER], data


def truthy(value: Any) -> bool:
    return str(value).lower() in ("1", "true", "yes")
