"""What a live episode costs a Docker engine's host, and the engine's own limits, for
`orsbox doctor`'s table of host limits (`orsbox.sandbox.host_limits`).

A sandbox is a container, and each container brings a containerd shim (~12 threads,
~30 fds), its own tasks (docker-init, the guest, bash), an attach stream in dockerd
and its fifos in containerd. The engine processes are found by the pid file dockerd
writes beside its socket or, failing that, as the process that listens on the socket
(never by name); an engine not on this host (tcp://) has no rows of its own.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

from orsbox.sandbox.docker.guarded import bridge_name
from orsbox.sandbox.host_limits import EpisodeCost, HostLimit, Proc

# Measured 2026-12-02 with `python -m bench.episode_cost 0 10 20` (bench's Shell
# environment: one idle session = one container with its guest; Docker 20.10.24, runc,
# cgroup v1, 20 sessions): each shim 11.8 threads and 30 fds, 3 tasks in the container,
# dockerd +8.35 fds (its threads stayed at 73), containerd +4.0 fds (threads 38),
# host-wide +70.6 open files (the server's 1.4 among them), +2 mounts, +1 root key (the
# container's session keyring), +2.2 conntrack entries (the bench client's connections
# in TIME_WAIT and other users of the machine: an idle sandbox has no network).
# Inotify: none on cgroup v1; on cgroup v2 every shim holds an inotify instance
# watching memory.events (containerd/containerd#10468; not measured here).
SHIM_THREADS = 11.8
CONTAINER_TASKS = 3.0
DOCKERD_FDS = 8.35
CONTAINERD_FDS = 4.0
EPISODE_COST = EpisodeCost(
    tasks=SHIM_THREADS + CONTAINER_TASKS,
    open_files=70.6 - 1.4,
    conntrack=2.2,
    mounts=2.0,
    keys=1.0,
)
CGROUP_V2_INOTIFY = EpisodeCost(inotify_instances=1.0, inotify_watches=1.0)
BRIDGE_PORTS = 1023  # a Linux bridge's ports (BR_MAX_PORTS 1024, port 0 unused)
CONTAINERD_PIDFILE = Path("/run/docker/containerd/containerd.pid")  # dockerd-managed
CONTAINERD_SOCKET = "/run/containerd/containerd.sock"  # a system containerd
ENGINE_FILES_FIX = (
    "LimitNOFILE=1048576 in a systemd drop-in for {unit} "
    "(/etc/systemd/system/{unit}.d/limits.conf), or `ulimit -n 1048576` in the shell "
    "that starts it; then restart it"
)


def episode_cost(cgroup_root: Path = Path("/sys/fs/cgroup")) -> EpisodeCost:
    """One container sandbox's cost to the host; on cgroup v2 its shim's inotify too."""
    if (cgroup_root / "cgroup.controllers").exists():
        return EPISODE_COST.plus(CGROUP_V2_INOTIFY)
    return EPISODE_COST


def engine_limits(
    address: str, proc: Proc | None = None, sys: Path = Path("/sys")
) -> list[HostLimit]:
    """The open files dockerd and containerd may hold, the tasks the engine's cgroup
    allows (systemd's TasksMax), and the ports of the guarded network's bridge."""
    proc = proc or Proc()
    found: list[HostLimit] = []
    socket = urlsplit(address).path if urlsplit(address).scheme == "unix" else None
    dockerd = engine_pid(proc, socket) if socket else None
    if dockerd is not None:
        found.append(_open_files(proc, "dockerd", dockerd, DOCKERD_FDS, "docker.service"))
        found += _tasks_max(proc, dockerd, sys)
    containerd = containerd_pid(proc)
    if containerd is not None:
        found.append(
            _open_files(proc, "containerd", containerd, CONTAINERD_FDS, "containerd.service")
        )
    bridge = sys / "class/net" / bridge_name(address) / "brif"
    in_use = len(os.listdir(bridge)) if bridge.is_dir() else 0
    fix = "none: one Linux bridge takes 1023 ports; spread networked episodes over engines"
    found.append(HostLimit("guarded bridge ports", BRIDGE_PORTS, in_use, 1.0, fix, True))
    return found


def engine_pid(proc: Proc, socket: str) -> int | None:
    """dockerd behind the unix `socket`: the pid file dockerd writes beside it
    (docker.sock, docker.pid), else the process listening on it."""
    pidfile = Path(socket).with_suffix(".pid")
    pid = _pid_from(pidfile)
    if pid is not None and (proc.root / str(pid)).is_dir():
        return pid
    return listener(proc, socket)


def containerd_pid(proc: Proc) -> int | None:
    pid = _pid_from(CONTAINERD_PIDFILE)
    if pid is not None and (proc.root / str(pid)).is_dir():
        return pid
    return listener(proc, CONTAINERD_SOCKET)


def listener(proc: Proc, socket: str) -> int | None:
    """The process (not init: systemd holds activated sockets too) with the listening
    unix socket bound at `socket` among its fds."""
    inodes = {
        f"socket:[{fields[6]}]"
        for fields in (line.split() for line in (proc.text("net/unix") or "").splitlines()[1:])
        if len(fields) == 8 and fields[7] == socket
    }
    for pid in sorted(filter(str.isdigit, _listdir(proc.root)), key=int):
        if pid == "1" or not inodes:
            continue
        for fd in _listdir(proc.root / pid / "fd"):
            try:
                if os.readlink(proc.root / pid / "fd" / fd) in inodes:
                    return int(pid)
            except OSError:
                continue
    return None


def _open_files(proc: Proc, who: str, pid: int, per_episode: float, unit: str) -> HostLimit:
    limit = proc.open_files_limit(pid)
    fix = ENGINE_FILES_FIX.format(unit=unit)
    return HostLimit(f"{who} open files", limit, proc.fds(pid), per_episode, fix)


def _tasks_max(proc: Proc, pid: int, sys: Path) -> list[HostLimit]:
    """The pids limit of the cgroup dockerd runs in (TasksMax under systemd), which its
    shims' threads count against; none when it runs in the root cgroup."""
    for line in (proc.text(f"{pid}/cgroup") or "").splitlines():
        number, controllers, path = line.split(":", 2)
        if (controllers == "pids" or (number == "0" and controllers == "")) and path != "/":
            folder = sys / "fs/cgroup" / ("pids" if controllers else "") / path.lstrip("/")
            limit, current = _read(folder / "pids.max"), _read(folder / "pids.current")
            fix = "TasksMax=infinity in a systemd drop-in for docker.service; restart it"
            return [
                HostLimit("engine cgroup tasks (TasksMax)", limit, current or 0, SHIM_THREADS, fix)
            ]
    return []


def _read(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _pid_from(path: Path) -> int | None:
    try:
        text = path.read_text().split()
    except OSError:
        return None
    return int(text[0]) if text and text[0].isdigit() else None


def _listdir(path: Path) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []
