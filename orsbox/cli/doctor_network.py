"""`orsbox doctor`'s network checks: can this host guard networked sandboxes, and what
does the guard block (docs/network.md)?

The guard is proven, not assumed: the configured backend installs a server's rules under
a doctor id (`SandboxBackend.check_network_guard`; Docker: for the guarded bridge of the
configured engine), reads them back from the firewall and removes them; the check says which ranges they
drop and what they let through. Allow-lists need squid on the host; it is a failure
only where the operator allows them.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess

from orsbox.cli.doctor import Check
from orsbox.errors import SandboxError
from orsbox.sandbox.base import SandboxBackend
from orsbox.sandbox.config import create_backend
from orsbox.sandbox.host_state import NetworkGuardReport
from orsbox.settings import Settings

RANGE_NAMES = {
    "169.254.0.0/16": "link-local (cloud metadata)",
    "10.0.0.0/8": "10/8",
    "172.16.0.0/12": "172.16/12",
    "192.168.0.0/16": "192.168/16",
    "100.64.0.0/10": "carrier-grade NAT",
    "127.0.0.0/8": "loopback",
    "0.0.0.0/8": "0/8",
}


def network_checks() -> list[Check]:
    settings = Settings()
    return [_guard_check(settings), _proxy_check(settings)]


def _guard_check(settings: Settings) -> Check:
    name = "egress guard"
    try:
        backend = create_backend(settings.backend, server_id=f"doctor-{os.getpid()}")
    except SandboxError as e:  # an engine address that cannot work
        return Check(name, False, str(e))
    try:
        report = asyncio.run(_guard_report(backend))
    except SandboxError as e:
        fix = "run the server as root on a host with iptables (Debian: apt-get install iptables)"
        return Check(name, False, f"cannot put the rules in place: {e}", fix)
    if report is None:
        return Check(name, True, "not needed: the backend gives sandboxes no network of theirs")
    if report.missing or not report.host_dropped:
        host = "" if report.host_dropped else " the host's own addresses"
        return Check(
            name, False, f"rules did not hold: {', '.join(report.missing)}{host} not dropped"
        )
    return Check(name, True, _guard_detail(report))


async def _guard_report(backend: SandboxBackend) -> NetworkGuardReport | None:
    """The backend's guard, put in place under a throwaway id and removed."""
    try:
        return await backend.check_network_guard()
    finally:
        await backend.close()


def _guard_detail(report: NetworkGuardReport) -> str:
    allowed = ", ".join(report.allowed) or "none (ORSBOX_EGRESS_ALLOW)"
    return (
        "networked sandboxes cannot reach the host, "
        + ", ".join(RANGE_NAMES.get(c, c) for c in report.dropped)
        + ("" if report.ipv6 else " (IPv6 not guarded: ip6tables does not work here)")
        + f"; DNS to {', '.join(report.resolvers) or 'no resolver'} stays open; "
        + f"allowed: {allowed}"
    )


def _proxy_check(settings: Settings) -> Check:
    from orsbox.server.policy import allows_allowlist

    needed = allows_allowlist(settings)
    name = "egress proxy (allow-lists)"
    found = shutil.which("squid") or shutil.which("squid", path="/usr/sbin:/sbin")
    if found is None:
        detail = "squid is not installed" + ("" if needed else "; allow-lists are not enabled")
        return Check(name, not needed, detail, "apt-get install squid")
    version = subprocess.run([found, "-v"], capture_output=True, text=True, timeout=30)
    first = (version.stdout.splitlines() or ["squid"])[0]
    return Check(name, True, f"{first.strip()} ({found})")
