"""`orsbox doctor`'s network checks: can this host guard networked sandboxes, and what
does the guard block (docs/network.md)?

The guard is proven, not assumed: the checks install a server's rules under a doctor id
(for the guarded bridge of the configured engine), read them back from iptables, say
which ranges they drop and what they let through, and remove them. Allow-lists need
squid on the host; it is a failure only where the operator allows them.
"""

from __future__ import annotations

import os
import shutil
import subprocess

from orsbox.cli.doctor import Check
from orsbox.errors import SandboxError

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
    from orsbox.settings import Settings

    settings = Settings()
    return [_guard_check(settings), _proxy_check(settings)]


def _guard_check(settings: object) -> Check:
    from orsbox.sandbox.config import DockerConfig, engine_address
    from orsbox.sandbox.docker.egress import BLOCKED, EgressRules, chain_rules, host_resolvers
    from orsbox.sandbox.docker.guarded import bridge_name

    backend = getattr(settings, "backend", None)
    config = backend if isinstance(backend, DockerConfig) else DockerConfig()
    name = "egress guard"
    try:
        address = engine_address(config)
    except SandboxError as e:
        return Check(name, False, str(e))
    rules = EgressRules(f"doctor-{os.getpid()}", bridge_name(address), config.egress_allow,
                        host_resolvers())  # fmt: skip
    try:
        rules.install()
        listed = chain_rules("iptables", rules.forward_chain)
        host = chain_rules("iptables", rules.input_chain)
        listed6 = chain_rules("ip6tables", rules.forward_chain)
    except SandboxError as e:
        fix = "run the server as root on a host with iptables (Debian: apt-get install iptables)"
        return Check(name, False, f"cannot put the rules in place: {e}", fix)
    finally:
        rules.remove()
    dropped = [c for c in BLOCKED["iptables"] if any(f"-d {c} -j DROP" in r for r in listed)]
    missing = sorted(set(BLOCKED["iptables"]) - set(dropped))
    host_dropped = any(r.endswith("-j DROP") for r in host)
    if missing or not host_dropped:
        what = ", ".join(missing) + ("" if host_dropped else " the host's own addresses")
        return Check(name, False, f"rules did not hold: {what} not dropped")
    allowed = ", ".join(config.egress_allow) or "none (ORSBOX_EGRESS_ALLOW)"
    ipv6 = [c for c in BLOCKED["ip6tables"] if any(f"-d {c} -j DROP" in r for r in listed6)]
    detail = (
        "networked sandboxes cannot reach the host, "
        + ", ".join(RANGE_NAMES.get(c, c) for c in [*dropped, *ipv6])
        + ("" if ipv6 else " (IPv6 not guarded: ip6tables does not work here)")
        + f"; DNS to {', '.join(host_resolvers()) or 'no resolver'} stays open; "
        + f"allowed: {allowed}"
    )
    return Check(name, True, detail)


def _proxy_check(settings: object) -> Check:
    from orsbox.server.policy import allows_allowlist

    needed = allows_allowlist(settings)  # type: ignore[arg-type]
    name = "egress proxy (allow-lists)"
    found = shutil.which("squid") or shutil.which("squid", path="/usr/sbin:/sbin")
    if found is None:
        detail = "squid is not installed" + ("" if needed else "; allow-lists are not enabled")
        return Check(name, not needed, detail, "apt-get install squid")
    version = subprocess.run([found, "-v"], capture_output=True, text=True, timeout=30)
    first = (version.stdout.splitlines() or ["squid"])[0]
    return Check(name, True, f"{first.strip()} ({found})")
