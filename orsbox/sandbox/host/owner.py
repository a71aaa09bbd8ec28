"""Labels that tie a container to the server process that started it.

Every sandbox container carries `orsbox=1`, the server id and session id, and the
owner's identity: host name, pid namespace, pid and the pid's start time
(`orsbox.sandbox.procfs`). A later server on the same host can then tell, without any
shared state, whether the owner is still running: a pid that is gone, or reused by a
process that started at another time, means the owner died and its containers may be
swept. Containers of other hosts are never judged (their pids mean nothing here), nor
those of another pid namespace: a server in a container (the `orsbox/server` image, a
Compose cell) shares the engine with servers elsewhere, and its host name can be theirs
(Compose's `hostname: cell-1` in two projects, `--uts host`), but its pids are not.

Values are valid Kubernetes label values (`orsbox.sandbox.labels`): the server and
session ids and the host name through `label_value`, the pid namespace as its number.
Older servers wrote the namespace as `pid:[4026531836]` and ids as they were; those
labels are still read (`owner_is_here`, `is_mine`) for one release, so a sweep finds
their containers, networks, proxies and images.
"""

from __future__ import annotations

import os
import re
import socket
from typing import Literal

from orsbox.sandbox.labels import label_value
from orsbox.sandbox.procfs import pid_namespace, process_start_time

ORSBOX = "orsbox"
SERVER = "orsbox.server"
SESSION = "orsbox.session"
HOST = "orsbox.host"
PID = "orsbox.pid"
PID_START = "orsbox.pid_start"
PID_NAMESPACE = "orsbox.pid_ns"


_FORMER_NAMESPACE = re.compile(r"pid:\[(\d+)\]")  # `pid:[4026531836]`, read for one release


def owner_labels(server_id: str) -> dict[str, str]:
    """The labels naming this process as the owner."""
    pid = os.getpid()
    return {
        ORSBOX: "1",
        SERVER: label_value(server_id),
        HOST: label_value(socket.gethostname()),
        PID_NAMESPACE: namespace_value(pid_namespace()),
        PID: str(pid),
        PID_START: process_start_time(pid) or "",
    }


def sandbox_labels(server_id: str, session_id: str, extra: dict[str, str]) -> dict[str, str]:
    """Labels for one sandbox; orsbox's own win over same-named extra labels."""
    return {**extra, **owner_labels(server_id), SESSION: label_value(session_id)}


def namespace_value(namespace: str) -> str:
    """A pid namespace (`pid:[4026531836]`, as /proc names it and older labels carry it)
    as a label value: its number."""
    former = _FORMER_NAMESPACE.fullmatch(namespace)
    return former.group(1) if former else label_value(namespace)


def is_mine(labels: dict[str, str], server_id: str) -> bool:
    """Labelled by the server `server_id` (in either format)."""
    return labels.get(SERVER) in (label_value(server_id), server_id)


def owner_is_here(labels: dict[str, str]) -> bool:
    """The owner ran on this host and in this pid namespace, so its pid means something
    here (labels from before the namespace was recorded have none: taken as this one)."""
    here = namespace_value(pid_namespace())
    same_namespace = namespace_value(labels.get(PID_NAMESPACE, here)) == here
    host = socket.gethostname()
    return labels.get(HOST) in (label_value(host), host) and same_namespace


def owner_is_dead(labels: dict[str, str]) -> bool:
    """True only when the owner certainly died: it is here (`owner_is_here`), and its
    pid is gone or now belongs to a process that started at another time."""
    if not owner_is_here(labels):
        return False
    try:
        pid = int(labels.get(PID, ""))
    except ValueError:
        return False
    started = process_start_time(pid)
    return started is None or started != labels.get(PID_START)


def owner_state(labels: dict[str, str]) -> Literal["alive", "dead", "elsewhere"]:
    """alive, dead (safe to remove), or elsewhere (another host or pid namespace: cannot
    tell)."""
    if not owner_is_here(labels):
        return "elsewhere"
    return "dead" if owner_is_dead(labels) else "alive"
