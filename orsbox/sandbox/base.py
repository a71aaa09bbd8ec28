"""The sandbox contract: where an agent's commands run, independent of HTTP and of Docker.

A `Sandbox` is one isolated machine-like place (a container today; a Kubernetes pod or a
remote host later). Its whole contract is a handful of verbs — run a command in the
persistent shell, run a one-off command, read a file, write a file, copy a folder in —
plus `close`. Everything an agent sees as a *tool* (bash, python, edit_file ...) is built
on these verbs in `orsbox.authoring`, so a new backend only implements this module.

A `SandboxBackend` creates sandboxes from a `SandboxSpec`, finds/removes the ones a
dead server left behind, and says what it can do (`capabilities`), so no caller decides
by which backend it is. Backends never raise foreign exceptions (docker, requests):
they translate them to the `SandboxError` family in `orsbox.errors`.

A non-zero exit code is data, not an exception: `ExecResult.exit_code` says it.
Exceptions mean the sandbox itself failed (`SandboxGone` when it died under us).
"""

from __future__ import annotations

import abc
import builtins
import contextlib
import ipaddress
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from orsbox.errors import SandboxError
from orsbox.sandbox.diagnosis import EngineCheck
from orsbox.sandbox.labels import check_labels

if TYPE_CHECKING:
    from orsbox.sandbox.capabilities import BackendCapabilities
    from orsbox.sandbox.host_limits import HostLimit
    from orsbox.sandbox.host_state import HostStateSwept
    from orsbox.sandbox.images import ImageStore
    from orsbox.sandbox.snapshots import SnapshotStore
    from orsbox.sandbox.usage import ResourceUsage

EXEC_TIMEOUT_S = 60.0
OUTPUT_CAP_BYTES = 64 * 1024
NO_GUARD_NEEDED = EngineCheck(
    "egress guard", True, "not needed: the backend gives sandboxes no network of theirs"
)


@dataclass(frozen=True, slots=True)
class ExecResult:
    """What one command did.

    `output` is stdout and stderr interleaved in the order they were written, decoded
    as UTF-8 with invalid bytes replaced. When the command printed more than the cap,
    `output` keeps the head and the tail around a marker line naming how many bytes were
    cut, and `truncated` is true. `exit_code` is None when the command was killed for
    running past its timeout (`timed_out`) or never finished for another reason.
    `oom_killed` is true when the kernel's out-of-memory killer ended it. `data` is the
    same output as the bytes written (head, marker and tail when truncated), for callers
    that must pass on non-UTF-8 output exactly (the sandbox API's `/run`).
    """

    output: str
    exit_code: int | None
    timed_out: bool = False
    truncated: bool = False
    output_bytes: int = 0
    oom_killed: bool = False
    duration_s: float = 0.0
    data: bytes = field(default=b"", repr=False)


class HostMount(BaseModel):
    """A host path bound into the sandbox: read-only data (a dataset, a reference repo)
    is what environments normally need. A writable mount, a system folder or the Docker
    socket is for the operator to allow (`orsbox.server.policy`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str = Field(description="absolute path on the host")
    target: str = Field(description="absolute path in the sandbox")
    read_only: bool = True

    @field_validator("source", "target")
    @classmethod
    def _absolute(cls, path: str) -> str:
        if not path.startswith("/"):
            raise ValueError(f"must be an absolute path, not {path!r}")
        return path


class SandboxLimits(BaseModel):
    """Resource limits and hardening for one sandbox. Defaults are the safe choice;
    `network`, `privileged`, `cap_add` and `mounts` widen what a hostile agent can reach,
    so the server refuses an environment that asks for more than its operator allows."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    memory_bytes: int = Field(default=1024**3, gt=0, description="hard memory limit (no swap)")
    cpus: float = Field(default=1.0, gt=0)
    pids: int = Field(default=512, gt=8, description="max processes/threads")
    network: bool | Literal["host", "allowlist"] = Field(
        default=False,
        description="False: only a loopback interface; True: outbound access to the "
        "internet, not to the host, its private networks or other sandboxes (the egress "
        'guard, docs/network.md); "allowlist": only `allowed_hosts`, through an egress '
        'proxy; "host": the host\'s network stack',
    )
    allowed_hosts: tuple[str, ...] = Field(
        default=(),
        description='with network="allowlist": the host names (or addresses) the '
        'sandbox may reach through the proxy; "*.example.org" allows its subdomains',
    )
    disk_bytes: int | None = Field(
        default=None,
        gt=0,
        description="bound on what the sandbox writes: each writable folder (working "
        "directory, home, /tmp, /var/tmp) holds at most this much, the rest of the root "
        "filesystem is read-only; these folders live in memory, within memory_bytes",
    )
    writable_layer_bytes: int | None = Field(
        default=None,
        gt=0,
        description="bound on what the sandbox adds to its image's files (its writable "
        "layer), the root filesystem staying writable: measured after every call "
        "and every few seconds; passing it ends the sandbox with an error naming the bound "
        "(Harbor's storage_mb; docs/harbor.md)",
    )
    privileges: Literal["hardened", "runtime-default"] = Field(
        default="hardened",
        description="hardened: every capability dropped and no privilege gain through "
        "setuid (root can do little; sudo cannot work); runtime-default: the container "
        "runtimes' default capability set (Docker's, containerd's, a Kubernetes pod's "
        "without a securityContext) and setuid allowed, as a plain `docker run` gives "
        "(what Harbor's containers get: apt and sudo work); its former name "
        "docker-default is still accepted. docs/harbor.md weighs the two",
    )
    cap_add: tuple[str, ...] = ()
    privileged: bool = False
    mounts: tuple[HostMount, ...] = ()
    read_only_root: bool = False
    runtime: str | None = Field(
        default=None,
        description="the isolation to run under, e.g. runsc (gVisor), where the backend "
        "chooses a runtime per sandbox (`BackendCapabilities.runtime_choice`); None: the "
        "backend's configured one. Outside that, the operator must allow it (the backend "
        "config's allow_runtimes)",
    )

    @field_validator("privileges", mode="before")
    @classmethod
    def _former_name(cls, value: object) -> object:
        return "runtime-default" if value == "docker-default" else value

    @model_validator(mode="after")
    def _hosts_only_for_allowlist(self) -> SandboxLimits:
        check_allowlist(self.network, self.allowed_hosts)
        return self


def check_allowlist(network: object, allowed_hosts: Sequence[str]) -> None:
    """ValueError unless `allowed_hosts` come with an allow-listed network and are hosts."""
    if allowed_hosts and network != "allowlist":
        raise ValueError('allowed_hosts needs network = "allowlist"')
    for host in allowed_hosts:
        check_allowed_host(host)


HOST_NAME = re.compile(r"(\*\.)?[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?")


def check_allowed_host(host: str) -> str:
    """A host name, "*." and a domain, or an IP address; ValueError otherwise (a URL, a
    port or a path is not a host)."""
    with contextlib.suppress(ValueError):
        ipaddress.ip_address(host)
        return host
    if not HOST_NAME.fullmatch(host):
        raise ValueError(
            f"allowed host {host!r} is not a host name, '*.domain' or an address "
            "(no scheme, port or path)"
        )
    return host


class SandboxSpec(BaseModel):
    """Everything a backend needs to start one sandbox."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    image: str
    limits: SandboxLimits = SandboxLimits()
    user: str | None = Field(
        default=None,
        description="user to run as; None: the image's `orsbox` user if present, else its default",
    )
    workdir: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    labels: dict[str, str] = Field(
        default_factory=dict,
        description="extra labels: keys and values as Kubernetes takes them; a value "
        "that is not one is rewritten to fit (`orsbox.sandbox.labels`)",
    )
    session_id: str = "none"

    @field_validator("labels")
    @classmethod
    def _valid_labels(cls, labels: dict[str, str]) -> dict[str, str]:
        return check_labels(labels)


@dataclass
class SandboxInfo:
    """A live sandbox as a backend lists it (for `orsbox ps`, sweeps and tests)."""

    id: str
    name: str
    image: str
    session_id: str
    server_id: str
    status: str
    labels: dict[str, str] = field(default_factory=dict)
    created: float | None = None  # unix time
    # whether the server that started it still runs, judged from this process: "dead"
    # is certain (safe to remove); "elsewhere" cannot tell (another host or pid namespace)
    owner: Literal["alive", "dead", "elsewhere"] = "elsewhere"
    owner_pid: str | None = None


@dataclass(frozen=True)
class KilledProcesses:
    """What `Sandbox.kill_processes_listed` killed: how many, and the command lines of
    those running when it started (at most 100, each cut to 400 characters); with
    `keep_services`, the services it left running."""

    count: int
    running: list[str]
    kept: list[KeptService] = field(default_factory=list)


@dataclass(frozen=True)
class KeptService:
    """A process left running by `kill_processes_listed(keep_services=True)`: it holds a
    listening TCP socket, or a process that does started it. (pid, start tick) names the
    process unmistakably inside its sandbox."""

    pid: int
    start_tick: int
    command: str


class Sandbox(abc.ABC):
    """One running sandbox. All methods are coroutines and safe to call concurrently,
    except that `shell` calls are serialized (one persistent shell per sandbox)."""

    id: str

    @abc.abstractmethod
    async def shell(
        self,
        command: str,
        *,
        timeout_s: float = EXEC_TIMEOUT_S,
        output_cap_bytes: int = OUTPUT_CAP_BYTES,
    ) -> ExecResult:
        """Run `command` in this sandbox's persistent bash: cwd, exported variables,
        functions and background jobs survive between calls. On timeout every process
        the command started is killed (SIGKILL, even if it ignores SIGTERM) and the
        shell stays usable. Background jobs (`cmd &`) do not hold the call open."""

    @abc.abstractmethod
    async def restart_shell(self) -> None:
        """Kill the persistent shell and everything it started; start a fresh one."""

    @abc.abstractmethod
    async def kill_processes(self) -> int:
        """Kill every process the sandbox's user started (the persistent shell, its
        jobs, orphans, one-off commands) and return how many: what a grader runs first,
        so nothing the agent left behind can change files or forge results while it
        runs. The sandbox stays usable; the next `shell` call gets a fresh shell."""

    async def kill_processes_listed(self, keep_services: bool = False) -> KilledProcesses:
        """`kill_processes`, also saying which command lines were running when it
        started (the persistent shell itself aside): what a grader reports as left
        running at submit. A backend that cannot tell lists none. `keep_services`: leave
        running what holds a listening TCP socket and what it started (`KeptService`),
        for a grader whose task's state may be a running service; a backend that cannot
        tell kills those too."""
        return KilledProcesses(await self.kill_processes(), [])

    @abc.abstractmethod
    async def exec(
        self,
        command: str | list[str],
        *,
        timeout_s: float = EXEC_TIMEOUT_S,
        output_cap_bytes: int = OUTPUT_CAP_BYTES,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        stdin: bytes | None = None,
        user: str | None = None,
    ) -> ExecResult:
        """Run a one-off command (a string goes to `bash -c`), outside the persistent
        shell. Same timeout and cap rules as `shell`."""

    @abc.abstractmethod
    async def read_file(self, path: str, *, max_bytes: int | None = None) -> bytes:
        """Return the file's bytes exactly. Raises `SandboxFileError` (with a message
        fit for an agent) for a missing path, a directory, or no permission; with
        `max_bytes`, raises it too when the file is larger."""

    @abc.abstractmethod
    async def write_file(self, path: str, data: bytes, *, mode: int | None = 0o644) -> None:
        """Write bytes exactly, creating parent folders. `mode=None` keeps an existing
        file's permissions (0o644 for a new one). Raises `SandboxFileError`."""

    @abc.abstractmethod
    async def copy_in(self, local_dir: Path, sandbox_dir: str) -> None:
        """Copy a host folder's contents into `sandbox_dir` (created if needed)."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Stop and remove the sandbox. Idempotent; never raises for an already-gone one."""

    async def set_network(
        self, network: bool | Literal["allowlist"], allowed_hosts: Sequence[str] = ()
    ) -> None:
        """Switch the running sandbox's network, as `SandboxLimits.network` means it:
        False takes it away, True gives guarded outbound access, "allowlist" only
        `allowed_hosts` through an egress proxy (its processes get `http_proxy` and
        `https_proxy`). Connections open under the old setting are cut. Backends that
        cannot change it at run time raise `SandboxError`."""
        raise SandboxError(f"{type(self).__name__} cannot change its network while running")

    async def usage(self) -> ResourceUsage | None:
        """CPU seconds and peak memory so far (`orsbox.sandbox.usage`); None where the
        backend cannot tell."""
        return None

    @property
    @abc.abstractmethod
    def alive(self) -> bool:
        """False once the sandbox is known to be gone (closed, killed, OOM at PID 1)."""


class SandboxBackend(abc.ABC):
    """Creates sandboxes and cleans up after dead servers; keeps the images they start
    from (`images`)."""

    if TYPE_CHECKING:
        # Read-only to callers, so a backend may give them as a property (Docker's
        # capabilities, a wrapper's pass-through) or as an attribute (the fake's)

        @property
        def snapshots(self) -> SnapshotStore | None:
            """None: this backend cannot save a sandbox."""

        @property
        def capabilities(self) -> BackendCapabilities:
            """What it can do (`capabilities.py`): as configured, and as its engine is
            once the backend has reached it (Podman's limits: any engine call,
            `describe()` included)."""

    else:
        snapshots = None

    @abc.abstractmethod
    async def start(self, spec: SandboxSpec) -> Sandbox:
        """Start a sandbox. Raises `ImageNotFound` (naming the image and how to build it)
        or `SandboxStartError`."""

    @abc.abstractmethod
    async def list(self, *, all_servers: bool = False) -> list[SandboxInfo]:
        """Sandboxes this server (or, with `all_servers`, any orsbox server) started."""

    @abc.abstractmethod
    async def sweep(self) -> int:
        """Remove sandboxes whose server is gone; return how many were removed."""

    async def usage_of(self, sandbox_id: str) -> ResourceUsage | None:
        """CPU seconds and peak memory of one listed, running sandbox, whoever started
        it (`orsbox ps`); None where the backend cannot tell."""
        return None

    async def prepare_network(self) -> None:
        """Put in place what sandboxes with a network need (Docker: the guarded network
        and its egress rules, docs/network.md), so a server that allows the network has
        its guard from the start. Raises `SandboxError` saying why it cannot."""

    async def sweep_host_state(self, *, everything: bool = False) -> HostStateSwept | None:
        """Remove what dead servers (every server, with `everything`) left on the host
        outside their sandboxes (`orsbox.sandbox.host_state`); None: this backend puts
        nothing there. Raises `SandboxError` when the engine cannot be asked."""
        return None

    async def network_checks(self, *, allowlists: bool) -> builtins.list[EngineCheck]:
        """`orsbox doctor`'s questions about the guard of networked sandboxes, each
        answered with a fix (Docker: its firewall rules, put in place under a throwaway
        owner, read back and removed; squid for allow-lists, needed where `allowlists`
        are allowed). A backend that gives sandboxes no network of their own has
        nothing to guard."""
        return [NO_GUARD_NEEDED]

    def login_command(self, sandbox_id: str, user: str | None = None) -> str | None:
        """A command a person on this host runs for a login shell in a running sandbox
        (Inspect's human agent; `user`: as whom); None where there is none."""
        return None

    async def remove(self, sandbox_id: str) -> None:
        """Remove one listed sandbox, whoever started it (`orsbox gc`). Raises
        `SandboxError` when it cannot be removed."""
        raise SandboxError(f"{type(self).__name__} cannot remove sandboxes it did not start")

    @abc.abstractmethod
    async def close(self) -> None:
        """Remove every sandbox this backend started and release its resources."""

    async def health(self) -> str | None:
        """None when the backend can start sandboxes; else a one-line reason."""
        return None

    @property
    def images(self) -> ImageStore:
        """The images this backend starts sandboxes from (`orsbox.sandbox.images`), on
        the engine it is configured for."""
        raise SandboxError(f"{type(self).__name__} keeps no images")

    async def describe(self) -> str:
        """What runs this backend's sandboxes, for people (`orsbox doctor`): e.g.
        `Docker 28.2.2 at unix:///var/run/docker.sock`. Raises `SandboxError` when it
        does not answer."""
        return type(self).__name__

    async def engine_checks(self) -> builtins.list[EngineCheck]:
        """`orsbox doctor`'s questions to what runs the sandboxes, each answered with a fix
        (Docker: are the limits enforced, proven by a probe container; which runtimes start
        and what kernel they show). None to ask: an empty list."""
        return []

    async def host_limits(self) -> builtins.list[HostLimit]:
        """The host's limits live episodes use up, with what one more episode costs of
        each (`orsbox doctor`'s table; `orsbox.sandbox.host_limits`). By default the
        kernel's at the server's own cost; a backend whose sandboxes cost the host more
        (Docker: shims, containers) adds its cost and its engine's own limits."""
        from orsbox.sandbox.host_limits import EpisodeCost, kernel_limits

        return kernel_limits(EpisodeCost())

    async def pull_image(self, image: str, progress: Callable[[str], None] | None = None) -> None:
        """Fetch `image` from its registry into the engine this backend starts sandboxes
        on (a dataset's instance image missing when its episode starts), calling
        `progress` with a line now and then. Raises `SandboxError` saying why not."""
        await self.images.pull(image, progress)


class BackendWrapper(SandboxBackend):
    """A backend in front of another (the warm pool, the metered backend): every part of
    the contract passes through to `backend` unless the wrapper overrides it, so a
    method added to the contract reaches the real backend through any stack of them."""

    def __init__(self, backend: SandboxBackend) -> None:
        self.backend = backend

    @property
    def snapshots(self) -> SnapshotStore | None:
        return getattr(self.backend, "snapshots", None)  # a test double may lack it

    @property
    def capabilities(self) -> BackendCapabilities:
        return self.backend.capabilities

    async def start(self, spec: SandboxSpec) -> Sandbox:
        return await self.backend.start(spec)

    async def list(self, *, all_servers: bool = False) -> list[SandboxInfo]:
        return await self.backend.list(all_servers=all_servers)

    async def sweep(self) -> int:
        return await self.backend.sweep()

    async def usage_of(self, sandbox_id: str) -> ResourceUsage | None:
        return await self.backend.usage_of(sandbox_id)

    async def remove(self, sandbox_id: str) -> None:
        await self.backend.remove(sandbox_id)

    async def prepare_network(self) -> None:
        await self.backend.prepare_network()

    async def sweep_host_state(self, *, everything: bool = False) -> HostStateSwept | None:
        return await self.backend.sweep_host_state(everything=everything)

    async def network_checks(self, *, allowlists: bool) -> builtins.list[EngineCheck]:
        return await self.backend.network_checks(allowlists=allowlists)

    def login_command(self, sandbox_id: str, user: str | None = None) -> str | None:
        return self.backend.login_command(sandbox_id, user)

    async def close(self) -> None:
        await self.backend.close()

    async def health(self) -> str | None:
        return await self.backend.health()

    @property
    def images(self) -> ImageStore:
        return self.backend.images

    async def describe(self) -> str:
        return await self.backend.describe()

    async def engine_checks(self) -> builtins.list[EngineCheck]:
        return await self.backend.engine_checks()

    async def host_limits(self) -> builtins.list[HostLimit]:
        return await self.backend.host_limits()

    async def pull_image(self, image: str, progress: Callable[[str], None] | None = None) -> None:
        await self.backend.pull_image(image, progress)
