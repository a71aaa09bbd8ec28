"""What one live episode costs in each host limit `orsbox doctor` checks: run
`python -m bench.episode_cost [N...]` (default 0 10 20; keep N small on a shared machine).

One server (bench's `Shell` environment, a real container sandbox with its guest) holds
N idle sessions at a time; at each N the script reads, from /proc, the server's file
descriptors, threads and memory maps; the engine's fds and threads, each sandbox's
containerd shim and the container's own tasks (`bench.engine_use`, which `bench.scale`
reads too); and host-wide counters
(open files, inotify instances and watches, conntrack entries, mounts, keys of uid 0).
The per-episode cost is the growth from the smallest N to the largest divided by the
sessions added. The figures in `orsbox.sandbox.host_limits` come from this script.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import tempfile
from pathlib import Path

import docker

from bench import servers
from bench.engine_use import EngineUse, fds, threads
from bench.idle import check_and_delete, ready_session


def _lines(path: str) -> int:
    with contextlib.suppress(OSError), open(path) as f:
        return sum(1 for _ in f)
    return 0


def _inotify() -> tuple[int, int]:
    """Inotify instances and watches of every process on the host."""
    instances = watches = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{pid}/fd/{fd}") == "anon_inode:inotify":
                        instances += 1
                        with open(f"/proc/{pid}/fdinfo/{fd}") as info:
                            watches += sum(line.startswith("inotify wd:") for line in info)
    return instances, watches


def _root_keys() -> int:
    with contextlib.suppress(OSError), open("/proc/key-users") as f:
        for line in f:
            if line.split(":")[0].strip() == "0":
                return int(line.split()[3].split("/")[0])
    return 0


def _sys(name: str) -> int:
    with contextlib.suppress(OSError):
        return int(Path("/proc/sys", name).read_text().split()[0])
    return 0


def readings(server_pid: int, server_id: str) -> dict[str, int]:
    client = docker.from_env()
    ours = client.api.containers(filters={"label": f"orsbox.server={server_id}"})
    client.close()
    engine = EngineUse.read(c["Id"] for c in ours)
    instances, watches = _inotify()
    return {
        "containers": engine.containers,
        "server fds": fds(server_pid),
        "server threads": threads(server_pid),
        "server maps": _lines(f"/proc/{server_pid}/maps"),
        "dockerd fds": engine.dockerd_fds,
        "dockerd threads": engine.dockerd_threads,
        "containerd fds": engine.containerd_fds,
        "containerd threads": engine.containerd_threads,
        "shim fds": engine.shim_fds,
        "shim threads": engine.shim_threads,
        "container tasks": engine.container_tasks,
        "host open files": _sys("fs/file-nr"),
        "host inotify instances": instances,
        "host inotify watches": watches,
        "host conntrack": _sys("net/netfilter/nf_conntrack_count"),
        "host mounts": _lines("/proc/self/mountinfo"),
        "root keys": _root_keys(),
        "host ptys": _sys("kernel/pty/nr"),
    }


async def measure(steps: list[int]) -> None:
    server_id = f"episode-cost-{os.getpid()}"
    with tempfile.TemporaryDirectory() as logs:
        server = servers.start(
            "orsbox", ["Shell"], Path(logs), server_id=server_id, sandbox_start_concurrency=4
        )
        sids: list[str] = []
        try:
            await check_and_delete(server.url, [await ready_session(server)])  # warm-up
            table = []
            for n in steps:
                while len(sids) < n:
                    sids += await asyncio.gather(
                        *(ready_session(server) for _ in range(min(5, n - len(sids))))
                    )
                table.append((n, readings(server.pid, server_id)))
            _print(table)
        finally:
            with contextlib.suppress(Exception):
                await check_and_delete(server.url, sids)
            server.stop()


def _print(table: list[tuple[int, dict[str, int]]]) -> None:
    (n0, first), (n1, last) = table[0], table[-1]
    print("reading".ljust(24) + "".join(f"N={n}".rjust(10) for n, _ in table) + "  per episode")
    for key in first:
        row = "".join(str(r[key]).rjust(10) for _, r in table)
        per = (last[key] - first[key]) / max(1, n1 - n0)
        print(f"{key:<24}{row}  {per:.2f}")


if __name__ == "__main__":
    asyncio.run(measure([int(a) for a in sys.argv[1:]] or [0, 10, 20]))
