"""The guard's state on the host outside the sandboxes: swept after dead servers
(`orsbox gc`, `orsbox.sandbox.host_state`), and proven for `orsbox doctor` (`checks.py`).

A networked sandbox is guarded by a server's iptables chains (`egress.py`) on the bridge
its backend made for it (Docker: `orsbox.sandbox.docker.guarded`) and, with an
allow-list, talks through a squid of its own (`proxy.py`, `allowlist.py`). Each carries
its owner's identity (`owner.py`), so whatever a killed server left is found and removed
by another. A backend that makes networks of its own sweeps them itself and counts them
in `Swept.networks`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import anyio

from orsbox.errors import SandboxError
from orsbox.sandbox.host.egress import (
    BLOCKED,
    EgressRules,
    chain_rules,
    host_resolvers,
    remove_stale,
)
from orsbox.sandbox.host.proxy import sweep_proxies
from orsbox.sandbox.host_state import HostStateSwept


@dataclass(frozen=True)
class Swept:
    """What one sweep removed of dead servers' host state. `rules_error` says why the
    firewall rules could not be looked at (no root, no iptables); the networks, which
    the rules guard, are then left too (the backend's own, counted in `networks`)."""

    proxies: int
    rules: int = 0
    networks: int = 0
    rules_error: str | None = None

    def report(self) -> HostStateSwept:
        """For people (`orsbox gc`)."""
        lines = [f"{self.proxies} egress proxy(ies) of dead servers stopped."]
        if self.rules_error is not None:
            lines.append(f"egress guard rules not looked at: {self.rules_error}")
        else:
            lines.append(f"{self.rules} egress guard rule(s) of dead servers removed.")
            lines.append(f"{self.networks} network(s) of dead servers removed.")
        return HostStateSwept(tuple(lines))


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


async def sweep_guard(everything: bool = False) -> Swept:
    """Stop dead servers' proxies and remove their guard rules (every server's with
    `everything`). Rules that cannot be listed (no root, no iptables) are reported, not
    raised: such a host has none of ours."""
    proxies = await anyio.to_thread.run_sync(sweep_proxies)
    try:
        rules = await anyio.to_thread.run_sync(remove_stale, everything)
    except SandboxError as e:
        return Swept(proxies, rules_error=str(e))
    return Swept(proxies, len(rules))


def check_guard(bridge: str, allow: Sequence[str]) -> NetworkGuardReport:
    """Install the rules a server would for the guarded `bridge`, under a doctor id;
    read them back; remove them. Raises `SandboxError` when they cannot be put in
    place."""
    resolvers = host_resolvers()
    rules = EgressRules(f"doctor-{os.getpid()}", bridge, allow, resolvers)
    try:
        rules.install()
        listed = chain_rules("iptables", rules.forward_chain)
        host = chain_rules("iptables", rules.input_chain)
        listed6 = chain_rules("ip6tables", rules.forward_chain)
    finally:
        rules.remove()
    dropped = [c for c in BLOCKED["iptables"] if any(f"-d {c} -j DROP" in r for r in listed)]
    ipv6 = [c for c in BLOCKED["ip6tables"] if any(f"-d {c} -j DROP" in r for r in listed6)]
    return NetworkGuardReport(
        dropped=(*dropped, *ipv6),
        missing=tuple(sorted(set(BLOCKED["iptables"]) - set(dropped))),
        host_dropped=any(r.endswith("-j DROP") for r in host),
        ipv6=bool(ipv6),
        resolvers=tuple(resolvers),
        allowed=tuple(allow),
    )
