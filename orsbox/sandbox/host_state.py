"""What a backend puts on the host outside its sandboxes, as plain data for the CLI.

The Docker backend guards networked sandboxes with firewall rules, allow-list proxies
and networks of its own (docs/network.md). A server killed with SIGKILL leaves them
behind; `orsbox gc` asks the backend to sweep them (`SandboxBackend.sweep_host_state`),
and `orsbox doctor` asks it to prove its guard holds (`check_network_guard`). A backend
that puts nothing on the host (the fake) answers None: nothing to sweep, no guard.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class HostStateSwept:
    """What one sweep removed of dead servers' host state. `rules_error` says why the
    firewall rules could not be looked at (no root, no iptables); the networks, which
    the rules guard, are then left too."""

    proxies: int
    rules: int = 0
    networks: int = 0
    rules_error: str | None = None


@dataclass(frozen=True)
class NetworkGuardReport:
    """The guard a server would put in place, installed under a throwaway owner, read
    back from the firewall and removed.

    `dropped`: the ranges its rules drop (IPv4, then IPv6), `missing`: IPv4 ranges
    meant to be dropped that were not; `host_dropped`: traffic to the host's own
    addresses is dropped; `ipv6`: IPv6 is guarded too; `resolvers`: the DNS servers
    left open; `allowed`: the ranges the operator opened (`ORSBOX_EGRESS_ALLOW`)."""

    dropped: tuple[str, ...]
    missing: tuple[str, ...]
    host_dropped: bool
    ipv6: bool
    resolvers: tuple[str, ...]
    allowed: tuple[str, ...]
