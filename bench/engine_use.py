"""What the Docker engine and a set of its containers hold now, read from /proc and the
cgroup files: the one reading the benchmarks that count per-episode costs share
(`bench.episode_cost`: tasks and fds; `bench.scale`: memory too).

The engine is the default socket's: dockerd by the pid file it writes beside its socket,
containerd by the pid file dockerd writes for it (`orsbox doctor` finds them the same
way, `orsbox.sandbox.docker.engine_limits`); never by process name, as other engines
(gVisor's, a cluster's cells) may run beside it. A container's shim is the parent of the
container's init, so it is found from the container, not by name either.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from orsbox.sandbox.docker.engine_limits import containerd_pid, engine_pid
from orsbox.sandbox.host_limits import Proc

SOCKET = "/var/run/docker.sock"
CGROUP = Path("/sys/fs/cgroup")  # cgroup v1, as on this machine; v2 read too


def threads(pid: int) -> int:
    return _status_field(pid, "Threads:")


def parent(pid: int) -> int:
    return _status_field(pid, "PPid:")


def pss_bytes(pid: int) -> int:
    """Proportional set size: resident memory with each shared page divided among the
    processes that map it (a thousand shims share one binary: RSS would count it a
    thousand times)."""
    with contextlib.suppress(OSError), open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    return 0


def _status_field(pid: int, field: str) -> int:
    with contextlib.suppress(OSError), open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1])
    return 0


def engine_pids() -> tuple[int | None, int | None]:
    """(dockerd, containerd) of the default socket's engine; None where not found."""
    proc = Proc()
    return engine_pid(proc, SOCKET), containerd_pid(proc)


def container_memory(container_id: str) -> int:
    """A container's memory as `docker stats` counts it: the cgroup's usage less its
    inactive file cache (0 once the container is gone)."""
    for folder in (CGROUP / "memory/docker" / container_id, CGROUP / f"docker/{container_id}"):
        usage = _read_int(folder / "memory.usage_in_bytes") or _read_int(folder / "memory.current")
        if usage:
            inactive = 0
            with contextlib.suppress(OSError):
                for line in (folder / "memory.stat").read_text().splitlines():
                    key, _, value = line.partition(" ")
                    if key in ("total_inactive_file", "inactive_file"):
                        inactive = int(value)
                        break
            return max(0, usage - inactive)
    return 0


def container_tasks(container_id: str) -> int:
    for path in (CGROUP / "pids/docker" / container_id, CGROUP / f"docker/{container_id}"):
        value = _read_int(path / "pids.current")
        if value:
            return value
    return 0


def shim_pid(container_id: str) -> int | None:
    """The containerd shim of a running container: the parent, outside the container,
    of its first process (its init)."""
    for folder in (CGROUP / "pids/docker" / container_id, CGROUP / f"docker/{container_id}"):
        with contextlib.suppress(OSError, ValueError):
            pids = {int(p) for p in (folder / "cgroup.procs").read_text().split()}
            for pid in sorted(pids):
                outside = parent(pid)
                if outside and outside not in pids:
                    return outside
    return None


def _read_int(path: Path) -> int:
    with contextlib.suppress(OSError, ValueError):
        return int(path.read_text().split()[0])
    return 0


@dataclass
class EngineUse:
    """The engine's processes and the given containers, with their shims, at one
    moment."""

    dockerd_fds: int = 0
    dockerd_threads: int = 0
    dockerd_pss: int = 0
    containerd_fds: int = 0
    containerd_threads: int = 0
    containerd_pss: int = 0
    shim_fds: int = 0
    shim_threads: int = 0
    shim_pss: int = 0
    containers: int = 0
    container_memory: int = 0
    container_tasks: int = 0

    @property
    def engine_memory(self) -> int:
        """dockerd, containerd and the containers' shims: the engine's own memory."""
        return self.dockerd_pss + self.containerd_pss + self.shim_pss

    @classmethod
    def read(cls, container_ids: Iterable[str]) -> EngineUse:
        """Read now, for the containers of `container_ids`."""
        proc = Proc()
        dockerd, containerd = engine_pids()
        use = cls()
        if dockerd is not None:
            use.dockerd_fds, use.dockerd_threads = proc.fds(dockerd), threads(dockerd)
            use.dockerd_pss = pss_bytes(dockerd)
        if containerd is not None:
            use.containerd_fds, use.containerd_threads = proc.fds(containerd), threads(containerd)
            use.containerd_pss = pss_bytes(containerd)
        for container_id in container_ids:
            use.containers += 1
            use.container_memory += container_memory(container_id)
            use.container_tasks += container_tasks(container_id)
            shim = shim_pid(container_id)
            if shim is not None and shim > 1:
                use.shim_fds += proc.fds(shim)
                use.shim_threads += threads(shim)
                use.shim_pss += pss_bytes(shim)
        return use


def machine_memory_used() -> tuple[int, int]:
    """(used, total) bytes of the machine: MemTotal less MemAvailable."""
    info: dict[str, int] = {}
    with open("/proc/meminfo") as f:
        for line in f:
            key, _, rest = line.partition(":")
            info[key] = int(rest.split()[0]) * 1024
    return info["MemTotal"] - info["MemAvailable"], info["MemTotal"]


def fds(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0
