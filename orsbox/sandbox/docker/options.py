"""How a `SandboxSpec` becomes `docker create` options.

Defaults are the locked-down choice; `DockerBackend(run_options=...)` overrides any key.
  - the guest's loader as the command (`orsbox.sandbox.guest.loader`), attached before start with stdin
    open once (`StdinOnce`): when the server's attach connection closes, whatever the
    reason (SIGKILL included), the guest reads EOF and exits, and with it the container
    (its dead-man's switch). A container created but never started runs nothing; the
    next server's sweep removes it by its dead owner's labels;
  - under `init=True` (tini reaps zombies, and ends the container's last processes
    when the guest, its child, exits; with `init=False` the guest is PID 1 itself);
  - no log driver: the guest's stdout is the channel to the server, not a log;
  - `auto_remove`: a container that exits disappears, whoever stopped it;
  - no network unless asked (only a loopback interface; when asked, the guarded
    network of `guarded.py`, not Docker's default bridge), memory limit without swap,
    cpu and pids limits, every capability dropped, no privilege gain through setuid
    (`privileges="runtime-default"` keeps Docker's default set instead, for Harbor tasks);
  - privileged mode, host networking, added capabilities and host mounts only as the
    spec asks (the server's policy decides what an environment may ask for);
  - with `disk_bytes`, a read-only root and bounded tmpfs folders (`disk.py`);
  - under gVisor (`runtime="runsc"`), the pids limit moves inside: gVisor's own host
    threads count against a cgroup pids limit (162 for an idle ptrace sandbox) and
    reaching it kills the whole sandbox instead of failing a fork. So its processes get
    `limits.pids` as RLIMIT_NPROC (gVisor enforces it: a fork past it fails with
    EAGAIN, as under runc) and the host cgroup a looser bound that still protects the
    host (`gvisor_host_pids`). Memory likewise: the guest keeps its processes under
    `limits.memory_bytes` (RLIMIT_AS, its memory watch: `guest_memory_bounds`) and the
    host cgroup gets room above it (`gvisor_host_memory`). See docs/gvisor.md.
"""

from __future__ import annotations

import re
import secrets
from typing import Any

from docker.types import Mount, Ulimit

from orsbox.sandbox.base import HostMount, SandboxLimits, SandboxSpec
from orsbox.sandbox.docker.config import is_gvisor
from orsbox.sandbox.guest.loader import guest_argv

GUEST_COMMAND = guest_argv()
NO_LOGS = {"type": "none", "config": {}}
GVISOR_THREADS = 512  # gVisor's own host threads: 49 idle, more under load
GVISOR_THREADS_PER_PROCESS = 16  # fork bomb peaks: 11-14 per process (ptrace), ~2 (systrap)


def container_name(session_id: str) -> str:
    """`orsbox-<session>-<random>`, reduced to what docker accepts in a name."""
    safe = re.sub(r"[^a-zA-Z0-9_.-]", "-", session_id)[:40].strip("-.") or "session"
    return f"orsbox-{safe}-{secrets.token_hex(3)}"


def network_mode(network: bool | str, guarded: str | None) -> str:
    """A sandbox with the network joins the guarded network (`guarded.py`), never
    Docker's default bridge; one with an allow-list, the allow-list network
    (`allowlist.py`); `guarded` is that network's name."""
    if network == "host":
        return "host"
    if network is True or network == "allowlist":
        if guarded is None:
            raise ValueError(f"a sandbox with network={network!r} needs its network's name")
        return guarded
    return "none"


def bind_mount(mount: HostMount) -> Mount:
    return Mount(mount.target, mount.source, type="bind", read_only=mount.read_only)


def container_options(
    spec: SandboxSpec,
    name: str,
    labels: dict[str, str],
    overrides: dict[str, Any],
    *,
    tmpfs: dict[str, str] | None = None,
    runtime: str | None = None,
    network: str | None = None,
) -> dict[str, Any]:
    """`network`: the guarded network a sandbox with `limits.network` joins. `tmpfs` (the bounded folders of a sandbox with `disk_bytes`, see `disk.py`) makes
    the root filesystem read-only. `runtime`: the OCI runtime (None: the engine's)."""
    limits = spec.limits
    options: dict[str, Any] = {
        "image": spec.image,
        "command": GUEST_COMMAND,
        "name": name,
        "init": True,
        "auto_remove": True,
        "stdin_open": True,
        "detach": False,  # with stdin_open: StdinOnce, the dead-man's switch
        "log_config": NO_LOGS,
        "labels": labels,
        "network_mode": network_mode(limits.network, network),
        "mem_limit": limits.memory_bytes,
        "memswap_limit": limits.memory_bytes,
        "nano_cpus": int(limits.cpus * 1e9),
        "pids_limit": limits.pids,
        **privilege_options(limits),
        "cap_add": list(limits.cap_add) or None,
        "privileged": limits.privileged or None,
        "mounts": [bind_mount(m) for m in limits.mounts] or None,
        "environment": dict(spec.env),
        "user": spec.user or None,
        "working_dir": spec.workdir or None,
        "read_only": limits.read_only_root or tmpfs is not None,
        "tmpfs": tmpfs or ({"/tmp": "", "/run": ""} if limits.read_only_root else None),
        "runtime": runtime,
    }
    if is_gvisor(runtime):
        options.update(gvisor_bounds(limits))
    options.update(overrides)
    return {key: value for key, value in options.items() if value is not None}


# What `runtime-default` leaves root, as /proc shows it: the engine's default set (CHOWN,
# DAC_OVERRIDE, FOWNER, FSETID, KILL, SETGID, SETUID, SETPCAP, NET_BIND_SERVICE, NET_RAW,
# SYS_CHROOT, MKNOD, AUDIT_WRITE, SETFCAP), Docker's and Podman 4.3.1's alike (measured)
RUNTIME_DEFAULT_CAPS = "00000000a80425fb"


def privilege_options(limits: SandboxLimits) -> dict[str, Any]:
    """What root may do in the sandbox. `hardened` drops every capability and forbids
    gaining privileges through setuid; `runtime-default` leaves Docker's default set and
    setuid as `docker run` does, because Harbor's tasks need them: apt drops to its
    `_apt` user (SETUID, SETGID), and a task's agent user may `sudo`, which refuses to
    run under no-new-privileges (measured: tests/formats/harbor/test_profile.py)."""
    if limits.privileges == "runtime-default":
        return {}
    return {"cap_drop": ["ALL"], "security_opt": ["no-new-privileges"]}


def gvisor_host_pids(limits: SandboxLimits) -> int:
    """The host cgroup's pids bound for a gVisor sandbox: under the ptrace platform each
    guest process costs several host threads (its stub and tracer threads), plus
    gVisor's own. Reached only if RLIMIT_NPROC does not hold; then it ends the sandbox
    rather than the host."""
    return GVISOR_THREADS_PER_PROCESS * limits.pids + GVISOR_THREADS


def address_space_bound(limits: SandboxLimits, runtime: str | None) -> int | None:
    """The RLIMIT_AS the guest gives each command: under gVisor the sandbox's memory,
    so that one process allocating past it fails its allocation inside instead of
    ending the whole sandbox (gVisor has no OOM killer of its own; docs/gvisor.md).
    None under runc, whose kernel OOM killer ends just the process."""
    return limits.memory_bytes if is_gvisor(runtime) else None


MIB = 1024**2
GVISOR_MEMORY_HEADROOM_MIN = 512 * MIB  # the host bound's room above the guest's, at least
GVISOR_MEMORY_HEADROOM_SHARE = 2  # ... or this fraction (1/2) of the sandbox's memory
GUEST_MEMORY_RESERVE = 16 * MIB  # the guest's memory watch fires this far below the sandbox's


def gvisor_host_memory(limits: SandboxLimits) -> int:
    """The host cgroup's memory bound for a gVisor sandbox: the sandbox's memory plus
    room. The processes' bound is the guest's (`guest_memory_bounds`): it kills a
    command's largest processes when the memory in use inside passes the sandbox's, but
    it looks every 50-100 ms, and eight processes allocating at once with the host
    loaded outran it to the host's bound in 2 of 60 runs (`bench.gvisor_memory_race`):
    there the host's OOM killer ends gVisor's stubs and the sandbox's call hangs to its
    timeout (docs/gvisor.md, 'oom')."""
    headroom = max(GVISOR_MEMORY_HEADROOM_MIN, limits.memory_bytes // GVISOR_MEMORY_HEADROOM_SHARE)
    return limits.memory_bytes + headroom


def guest_memory_bounds(limits: SandboxLimits, runtime: str | None) -> dict[str, int | None]:
    """What the guest's hello asks for memory (nothing under runc, whose kernel OOM
    killer ends just the process). Under gVisor, which has no OOM killer inside:
    `address_space` (`address_space_bound`), and `memory_bound`, the memory in use inside
    (/proc/meminfo's MemTotal - MemAvailable) past which the guest kills the largest
    process a command started (its `MemoryWatch`): processes that each stay under
    RLIMIT_AS but together pass the sandbox's memory would otherwise end the sandbox."""
    if not is_gvisor(runtime):
        return {"address_space": None, "memory_bound": None}
    bound = limits.memory_bytes - GUEST_MEMORY_RESERVE
    return {"address_space": address_space_bound(limits, runtime), "memory_bound": bound}


def gvisor_bounds(limits: SandboxLimits) -> dict[str, Any]:
    """Under gVisor the processes' limit is RLIMIT_NPROC and their memory limit the
    guest's (the module docstring); the host's bounds are looser."""
    host_memory = gvisor_host_memory(limits)
    return {
        "mem_limit": host_memory,
        "memswap_limit": host_memory,
        "pids_limit": gvisor_host_pids(limits),
        "ulimits": [Ulimit(name="nproc", soft=limits.pids, hard=limits.pids)],
    }
