"""What a backend puts on the host outside its sandboxes, as plain data for the CLI.

A backend may guard networked sandboxes with things of its own on the host (Docker:
firewall rules, allow-list proxies and networks, docs/network.md). A server killed with
SIGKILL leaves them behind; `orsbox gc` asks the backend to sweep them
(`SandboxBackend.sweep_host_state`) and prints what it says. A backend that puts
nothing on the host (the fake) answers None: nothing to sweep.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class HostStateSwept:
    """What one sweep removed of dead servers' host state, in the backend's words: one
    line per kind of thing (`orsbox gc` prints them as they are)."""

    lines: tuple[str, ...]
