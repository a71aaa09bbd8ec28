"""The host's limits that live episodes use up, and how many more episodes each allows
(`orsbox doctor`; docs/operating/sizing.md).

Every live episode holds a little of several things the kernel bounds: tasks
(`kernel.pid_max`, `kernel.threads-max`), open files (`fs.file-max`, the server's
`ulimit -n`), memory maps, inotify instances, conntrack entries, mounts, keys. Each
`HostLimit` is one such bound, what is in use now and what one more episode costs, so
`headroom` is how many more episodes fit under it; the smallest headroom names the
limit that stops the host first. Reading goes through `Proc`, a root directory laid
out like /proc, so tests hand it fake files.

The server's own cost per episode is orsbox's (`SERVER_COST`); what a backend's
sandboxes cost the host beyond it (Docker's shims and containers) the backend says in
an `EpisodeCost` (`SandboxBackend.host_limits`). Costs are measured, not derived:
`python -m bench.episode_cost` reads them on a host.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

UNLIMITED = None
GOAL_EPISODES = 1000  # "the next thousand": one GRPO step's episodes (issue 36)


@dataclass(frozen=True)
class EpisodeCost:
    """What one live, idle episode holds host-wide. Figures are averages per episode
    (a sandbox's shim has ~12 threads, so `tasks` is fractional when measured)."""

    tasks: float = 0.0  # threads and processes (pid_max, threads-max)
    open_files: float = 0.0  # host-wide file handles (fs.file-max)
    inotify_instances: float = 0.0
    inotify_watches: float = 0.0
    conntrack: float = 0.0  # nf_conntrack entries
    mounts: float = 0.0  # mounts in the host's mount namespace (fs.mount-max)
    keys: float = 0.0  # kernel keys of root (a session keyring per container)

    def plus(self, other: EpisodeCost) -> EpisodeCost:
        return EpisodeCost(**{k: v + getattr(other, k) for k, v in vars(self).items()})


@dataclass(frozen=True)
class ServerCost:
    """What one live episode costs the orsbox server process itself."""

    fds: float
    threads: float
    maps: float


# Measured 2026-12-02 with `python -m bench.episode_cost 0 10 20` (bench's Shell
# environment, Docker 20.10.24/runc, cgroup v1): the server went from 25 to 53 fds
# (the attach socket of each sandbox's guest, plus pool and client sockets), 7 to 10
# threads and 401 to 413 memory maps over 20 idle sessions.
SERVER_COST = ServerCost(fds=1.4, threads=0.15, maps=0.6)


@dataclass(frozen=True)
class HostLimit:
    """One bound: `limit` (None: none), `in_use` now, `per_episode` one more episode
    costs, and `raise_with`, the setting that raises it."""

    name: str
    limit: int | None
    in_use: int
    per_episode: float
    raise_with: str
    networked_only: bool = False  # used only by episodes whose sandbox has a network

    @property
    def headroom(self) -> int | None:
        """How many more live episodes fit under this limit; None: it does not bound
        them (no limit, or episodes cost nothing of it)."""
        if self.limit is None or self.per_episode <= 0:
            return None
        return max(0, math.floor((self.limit - self.in_use) / self.per_episode))


def first_to_stop(limits: Sequence[HostLimit], networked: bool = False) -> HostLimit | None:
    """The limit with the least headroom (the first of equals) among those every
    episode uses (`networked`: those only networked episodes use), None if none binds."""
    bounded = [
        limit
        for limit in limits
        if limit.headroom is not None and limit.networked_only == networked
    ]
    return min(bounded, key=lambda limit: limit.headroom or 0) if bounded else None


class Proc:
    """Readings from a /proc laid out at `root` (tests: a tmp directory)."""

    def __init__(self, root: Path = Path("/proc")) -> None:
        self.root = root

    def text(self, path: str) -> str | None:
        try:
            return (self.root / path).read_text()
        except OSError:
            return None

    def sysctl(self, name: str) -> int | None:
        """`kernel.pid_max` read from sys/kernel/pid_max; None where absent."""
        text = self.text("sys/" + name.replace(".", "/"))
        return int(text.split()[0]) if text and text.split()[0].isdigit() else None

    def lines(self, path: str) -> int:
        text = self.text(path)
        return len(text.splitlines()) if text else 0

    def fds(self, pid: int | str) -> int:
        try:
            return len(os.listdir(self.root / str(pid) / "fd"))
        except OSError:
            return 0

    def open_files_limit(self, pid: int | str) -> int | None:
        """The soft RLIMIT_NOFILE of `pid` from its limits file (None: unlimited)."""
        for line in (self.text(f"{pid}/limits") or "").splitlines():
            if line.startswith("Max open files"):
                soft = line.split()[3]
                return None if soft == "unlimited" else int(soft)
        return None

    def tasks(self) -> int:
        """Threads and processes on the host now (loadavg's `running/total`)."""
        text = self.text("loadavg")
        return int(text.split()[3].split("/")[1]) if text else 0

    def inotify_instances(self) -> int:
        count = 0
        for pid in filter(str.isdigit, _listdir(self.root)):
            for fd in _listdir(self.root / pid / "fd"):
                with contextlib.suppress(OSError):
                    count += os.readlink(self.root / pid / "fd" / fd) == "anon_inode:inotify"
        return count

    def root_keys(self) -> int:
        for line in (self.text("key-users") or "").splitlines():
            if line.split(":")[0].strip() == "0":
                return int(line.split()[3].split("/")[0])
        return 0


def _listdir(path: Path) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def kernel_limits(backend: EpisodeCost, proc: Proc | None = None) -> list[HostLimit]:
    """The kernel's and this shell's limits that any backend's episodes use: the
    server's cost plus `backend`'s per episode. The server's `ulimit -n` and map count
    are this process's, as a server started from the same shell would have them."""
    proc = proc or Proc()
    cost, server = backend, SERVER_COST
    tasks = cost.tasks + server.threads
    found = [
        HostLimit(
            "server open files (ulimit -n)",
            proc.open_files_limit("self"),
            proc.fds("self"),
            server.fds,
            "`ulimit -n 65536` (LimitNOFILE= in a systemd unit) before `orsbox serve`",
        ),
        _sysctl(proc, "vm.max_map_count", proc.lines("self/maps"), server.maps, "262144"),
        _sysctl(proc, "kernel.pid_max", proc.tasks(), tasks, "4194304"),
        _sysctl(proc, "kernel.threads-max", proc.tasks(), tasks, "400000"),
        _sysctl(proc, "fs.file-max", _file_nr(proc), cost.open_files + server.fds, "4194304"),
        _sysctl(
            proc,
            "fs.inotify.max_user_instances",
            proc.inotify_instances(),
            cost.inotify_instances,
            "8192",
        ),
        _sysctl(proc, "fs.inotify.max_user_watches", 0, cost.inotify_watches, "1048576"),
        _sysctl(
            proc,
            "net.netfilter.nf_conntrack_max",
            proc.sysctl("net.netfilter.nf_conntrack_count") or 0,
            cost.conntrack,
            "1048576",
        ),
        _sysctl(proc, "fs.mount-max", proc.lines("self/mountinfo"), cost.mounts, "1000000"),
        _sysctl(proc, "kernel.keys.root_maxkeys", proc.root_keys(), cost.keys, "10000000"),
    ]
    return [limit for limit in found if limit is not None]


def _sysctl(
    proc: Proc, name: str, in_use: int, per_episode: float, raised: str
) -> HostLimit | None:
    limit = proc.sysctl(name)
    if limit is None:  # not on this kernel (nf_conntrack not loaded): nothing to bound
        return None
    fix = f"`sysctl -w {name}={raised}` (and in /etc/sysctl.d/ to keep it)"
    return HostLimit(name, limit, in_use, per_episode, fix)


def _file_nr(proc: Proc) -> int:
    text = proc.text("sys/fs/file-nr")
    return int(text.split()[0]) if text else 0
