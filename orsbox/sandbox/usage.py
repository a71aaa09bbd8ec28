"""What a sandbox has used: CPU time and peak memory, as the kernel counts them.

Read from the sandbox's control group, found through the `/proc/<pid>/cgroup` of its
first process, so cgroup v1 (cpuacct + memory controllers) and v2 (the unified tree)
and every cgroup driver (cgroupfs, systemd) are read the same way. Where the files are
out of reach (a remote engine, a runtime that keeps its own accounting) a backend
falls back to what its engine reports (`from_docker_stats`).

`tally` counts the commands run on behalf of one tool call: a server sets
`CALL_TALLY` for the call's task and every sandbox verb that ran a command adds its
result, so the server learns in-sandbox time, output and caps without the tools
reporting them.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orsbox.sandbox.base import ExecResult

CGROUP_ROOT = Path("/sys/fs/cgroup")


@dataclass(frozen=True, slots=True)
class ResourceUsage:
    """CPU seconds (user + system, every process) and the highest memory use seen
    (bytes, page cache included, as the memory limit counts it); None when unknown."""

    cpu_s: float | None
    peak_memory_bytes: int | None
    source: str = "cgroup"


def cgroup_usage(
    pid: int, root: Path = CGROUP_ROOT, proc: Path = Path("/proc")
) -> ResourceUsage | None:
    """Usage of the control group holding `pid`, or None when it cannot be read."""
    try:
        lines = (proc / str(pid) / "cgroup").read_text().splitlines()
    except OSError:
        return None
    groups: dict[str, str] = {}
    for line in lines:
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            groups[controller] = path.lstrip("/")
    if "memory" in groups or "cpuacct" in groups:
        return _v1_usage(root, groups)
    if "" in groups:
        return _v2_usage(root / groups[""])
    return None


def _v1_usage(root: Path, groups: dict[str, str]) -> ResourceUsage | None:
    cpu_ns = _read_int(root / "cpuacct" / groups.get("cpuacct", "") / "cpuacct.usage")
    peak = _read_int(root / "memory" / groups.get("memory", "") / "memory.max_usage_in_bytes")
    if cpu_ns is None and peak is None:
        return None
    return ResourceUsage(None if cpu_ns is None else cpu_ns / 1e9, peak, "cgroup v1")


def _v2_usage(group: Path) -> ResourceUsage | None:
    cpu_us = None
    try:
        for line in (group / "cpu.stat").read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "usage_usec":
                cpu_us = int(value)
    except (OSError, ValueError):
        pass
    peak = _read_int(group / "memory.peak")  # Linux 5.19+; older kernels have none
    if cpu_us is None and peak is None:
        return None
    return ResourceUsage(None if cpu_us is None else cpu_us / 1e6, peak, "cgroup v2")


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def from_docker_stats(stats: dict[str, Any]) -> ResourceUsage | None:
    """Usage from a Docker stats answer: total CPU, and the peak memory where the
    engine keeps one (cgroup v1), else the current use."""
    cpu = (stats.get("cpu_stats") or {}).get("cpu_usage", {}).get("total_usage")
    memory = stats.get("memory_stats") or {}
    peak = memory.get("max_usage") or memory.get("usage")
    if cpu is None and peak is None:
        return None
    return ResourceUsage(None if cpu is None else cpu / 1e9, peak, "engine stats")


@dataclass
class ExecTally:
    """The commands one tool call ran in its sandbox."""

    durations_s: list[float] = field(default_factory=list)
    output_bytes: int = 0
    capped_bytes: int = 0
    timed_out: bool = False
    truncated: bool = False

    def add(self, result: ExecResult) -> None:
        self.durations_s.append(result.duration_s)
        self.output_bytes += result.output_bytes
        if result.truncated:
            self.truncated = True
            self.capped_bytes += max(0, result.output_bytes - len(result.data))
        self.timed_out = self.timed_out or result.timed_out


CALL_TALLY: contextvars.ContextVar[ExecTally | None] = contextvars.ContextVar(
    "orsbox_call_tally", default=None
)


def tally(result: ExecResult) -> ExecResult:
    """Add `result` to the running call's tally (if a server is counting); returns it."""
    counting = CALL_TALLY.get()
    if counting is not None:
        counting.add(result)
    return result
