"""This host's processes as `/proc` shows them, for telling one process from another
without any shared state.

A pid alone names a process only while it runs: once it ends, the kernel may give the
number to an unrelated one. The pid's start time (`/proc/PID/stat` field 22) tells the
two apart, so whoever recorded both can later say whether the process it meant still
runs: a server judging another's sandboxes (`orsbox.sandbox.host.owner`), or a
cluster stopping the engines it started (`orsbox.cluster.processes`). A pid means
something only in its pid namespace, which `pid_namespace` names.
"""

from __future__ import annotations

import os


def process_start_time(pid: int) -> str | None:
    """The pid's start time in clock ticks since boot, or None if there is no such pid."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    return raw[raw.rfind(b")") + 2 :].split()[19].decode()


def pid_namespace() -> str:
    """This process's pid namespace (`pid:[4026531836]`), or "" where /proc cannot say."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""
