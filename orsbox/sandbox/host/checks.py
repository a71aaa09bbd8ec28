"""`orsbox doctor`'s network checks on the Docker backend (`SandboxBackend.network_checks`):
can this host guard networked sandboxes, and what does the guard block (docs/network.md)?

The guard is proven, not assumed: the rules a server would install for the guarded
bridge of the configured engine are installed under a doctor id, read back from the
firewall and removed (`host_state.check_guard`); the check says which ranges they drop
and what they let through. Allow-lists need squid on the host; it is a failure only
where the operator allows them.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Awaitable, Callable, Sequence

import anyio

from orsbox.errors import SandboxError
from orsbox.sandbox.base import NO_GUARD_NEEDED
from orsbox.sandbox.diagnosis import EngineCheck
from orsbox.sandbox.host.state import NetworkGuardReport, check_guard

GUARD = "egress guard"
RANGE_NAMES = {
    "169.254.0.0/16": "link-local (cloud metadata)",
    "10.0.0.0/8": "10/8",
    "172.16.0.0/12": "172.16/12",
    "192.168.0.0/16": "192.168/16",
    "100.64.0.0/10": "carrier-grade NAT",
    "127.0.0.0/8": "loopback",
    "0.0.0.0/8": "0/8",
}


async def network_checks(
    bridge: str,
    allow: Sequence[str],
    *,
    allowlists: bool,
    guarded: Callable[[], Awaitable[bool]],
) -> list[EngineCheck]:
    """The guard of `bridge` with the operator's `allow`ed ranges, where the engine's
    sandboxes get networks to guard (`guarded`: not on Podman), and squid (a failure
    when missing only where `allowlists` are allowed)."""
    try:
        needed = await guarded()
    except SandboxError as e:
        guard = unplaceable(e)
    else:
        guard = (
            await anyio.to_thread.run_sync(guard_check, bridge, allow)
            if needed
            else NO_GUARD_NEEDED
        )
    return [guard, await anyio.to_thread.run_sync(proxy_check, allowlists)]


def guard_check(bridge: str, allow: Sequence[str]) -> EngineCheck:
    try:
        report = check_guard(bridge, allow)
    except SandboxError as e:
        return unplaceable(e)
    if report.missing or not report.host_dropped:
        host = "" if report.host_dropped else " the host's own addresses"
        return EngineCheck(
            GUARD, False, f"rules did not hold: {', '.join(report.missing)}{host} not dropped"
        )
    return EngineCheck(GUARD, True, guard_detail(report))


def unplaceable(error: SandboxError) -> EngineCheck:
    fix = "run the server as root on a host with iptables (Debian: apt-get install iptables)"
    return EngineCheck(GUARD, False, f"cannot put the rules in place: {error}", fix)


def guard_detail(report: NetworkGuardReport) -> str:
    allowed = ", ".join(report.allowed) or "none (ORSBOX_EGRESS_ALLOW)"
    return (
        "networked sandboxes cannot reach the host, "
        + ", ".join(RANGE_NAMES.get(c, c) for c in report.dropped)
        + ("" if report.ipv6 else " (IPv6 not guarded: ip6tables does not work here)")
        + f"; DNS to {', '.join(report.resolvers) or 'no resolver'} stays open; "
        + f"allowed: {allowed}"
    )


def proxy_check(needed: bool) -> EngineCheck:
    name = "egress proxy (allow-lists)"
    found = shutil.which("squid") or shutil.which("squid", path="/usr/sbin:/sbin")
    if found is None:
        detail = "squid is not installed" + ("" if needed else "; allow-lists are not enabled")
        return EngineCheck(name, not needed, detail, "apt-get install squid")
    version = subprocess.run([found, "-v"], capture_output=True, text=True, timeout=30)
    first = (version.stdout.splitlines() or ["squid"])[0]
    return EngineCheck(name, True, f"{first.strip()} ({found})")
