"""The egress guard's firewall rules: what a networked sandbox may not reach.

A sandbox on a bridge network can open connections to everything the host can: the host
itself through the bridge's gateway (any service bound to 0.0.0.0, an orsbox server
included), the machines of the private networks the host is on (a cluster's cells and
routers), and on a cloud VM the instance metadata service at 169.254.169.254, which hands
out the machine's credentials. These rules, for traffic coming in on orsbox's guarded
bridge (`guarded.py`), drop:

  * everything addressed to the host itself (the INPUT chain: a packet to one of the
    host's own addresses is delivered locally, never forwarded), except replies to
    connections the host opened;
  * forwarded traffic to the link-local range (cloud metadata), RFC 1918, carrier-grade
    NAT (100.64/10), loopback and "this network", and in IPv6 the unique-local and
    link-local ranges;

except DNS to the host's own resolvers (Docker's embedded resolver forwards a sandbox's
queries from the sandbox's own address, and a VM's resolver is often private) and the
operator's `egress_allow` CIDRs (`ORSBOX_EGRESS_ALLOW`, e.g. an internal package mirror),
which are accepted before anything is dropped. Traffic between sandboxes is already off
(`enable_icc=false`), and their subnet is private too.

Each server adds two chains of its own (`ORSBOX-F-<id>` for forwarded traffic, jumped to
from `DOCKER-USER`; `ORSBOX-I-<id>` for traffic to the host, jumped to from `INPUT`);
the jump rules carry a comment naming the owner (server id, host, pid and its start
time, as the container labels do), so a later server's sweep or `orsbox gc` can tell a
dead owner's rules and remove them. Rules of several servers on one bridge all apply: a
packet passes only if every live server's chain lets it through, so where their
`egress_allow` lists differ the narrowest wins. A SIGKILLed server's rules stay until
removed, which only blocks more, never less.
"""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import json
import logging
import re
import shlex
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from orsbox.errors import SandboxError
from orsbox.sandbox.backend_config import parse_cidrs
from orsbox.sandbox.host import owner as L

log = logging.getLogger("orsbox.sandbox.host.egress")

BLOCKED = {
    "iptables": (
        "169.254.0.0/16",  # link-local: cloud instance metadata
        "10.0.0.0/8",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "100.64.0.0/10",  # carrier-grade NAT
        "127.0.0.0/8",
        "0.0.0.0/8",
    ),
    "ip6tables": ("fc00::/7", "fe80::/10", "::1/128"),
}
MARK = "orsbox-guard"
IPTABLES_TIMEOUT_S = 30.0
RESOLV_CONF = Path("/etc/resolv.conf")


@dataclass(frozen=True)
class GuardRule:
    """One jump rule into a server's chain, as `iptables -S` prints it."""

    tool: str  # iptables or ip6tables
    line: str  # "-A INPUT -i ob-… -m comment --comment "…" -j ORSBOX-I-…"
    owner: dict[str, str]

    @property
    def chain(self) -> str:
        return self.line.rsplit(" -j ", 1)[1].split()[0]


def chain_suffix(server_id: str) -> str:
    return hashlib.sha256(server_id.encode()).hexdigest()[:12].upper()


def owner_comment(server_id: str) -> str:
    """`orsbox-guard server=… host=… pid=… start=…`: read back by `owner_of`."""
    owner = L.owner_labels(server_id)
    fields = {
        "server": re.sub(r"[^\w.:-]", "_", server_id),
        "host": owner[L.HOST],
        "pid": owner[L.PID],
        "start": owner[L.PID_START],
    }
    return " ".join([MARK, *(f"{k}={v}" for k, v in fields.items())])


def owner_of(comment: str) -> dict[str, str]:
    """The owner labels (`labels.py`) written by `owner_comment`."""
    fields = dict(part.split("=", 1) for part in comment.split() if "=" in part)
    return {
        L.SERVER: fields.get("server", ""),
        L.HOST: fields.get("host", ""),
        L.PID: fields.get("pid", ""),
        L.PID_START: fields.get("start", ""),
    }


def host_resolvers(path: Path = RESOLV_CONF) -> list[str]:
    """The host's name servers that a sandbox's DNS queries are forwarded to."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        words = line.split()
        if len(words) >= 2 and words[0] == "nameserver":
            try:
                address = ipaddress.ip_address(words[1].split("%")[0])
            except ValueError:
                continue
            if not address.is_loopback:
                found.append(str(address))
    return found


def _family(cidr: str) -> str:
    return "ip6tables" if ipaddress.ip_network(cidr).version == 6 else "iptables"


class EgressRules:
    """The rules of one server for one bridge: `install` at start, `remove` at close."""

    def __init__(
        self, server_id: str, bridge: str, allow: Sequence[str], resolvers: Sequence[str]
    ) -> None:
        self.server_id = server_id
        self.bridge = bridge
        self.allow = parse_cidrs(allow)
        self.resolvers = list(resolvers)
        suffix = chain_suffix(server_id)
        self.forward_chain = f"ORSBOX-F-{suffix}"
        self.input_chain = f"ORSBOX-I-{suffix}"
        self.installed = False

    def install(self) -> None:
        """Add this server's chains and jumps (replacing any it added before). Raises
        `SandboxError` when iptables is missing or refuses: a networked sandbox is then
        refused rather than started unguarded."""
        if shutil.which("iptables") is None:
            raise SandboxError("the egress guard needs iptables on the host, and it is missing")
        self.remove()
        comment = owner_comment(self.server_id)
        for tool in available_tools():
            self._chain(tool, self.forward_chain, self._forward_rules(tool))
            self._chain(tool, self.input_chain, self._input_rules(tool))
            forward_hook = "DOCKER-USER" if has_chain(tool, "DOCKER-USER") else "FORWARD"
            for hook, chain in ((forward_hook, self.forward_chain), ("INPUT", self.input_chain)):
                iptables(
                    tool, "-I", hook, "1", "-i", self.bridge,
                    "-m", "comment", "--comment", comment, "-j", chain,
                )  # fmt: skip
        self.installed = True
        log.info("egress guard on %s: chains %s, %s", self.bridge, *self.chains)

    @property
    def chains(self) -> tuple[str, str]:
        return self.forward_chain, self.input_chain

    def remove(self) -> None:
        """Remove this server's jumps and chains (those of a previous run with the same
        server id too). Never raises for rules already gone."""
        for rule in guard_rules():
            if rule.chain in self.chains:
                delete_rule(rule)
        for tool in available_tools():
            for chain in self.chains:
                drop_chain(tool, chain)
        self.installed = False

    def _forward_rules(self, tool: str) -> list[list[str]]:
        rules = [
            ["-d", server, "-p", proto, "--dport", "53", "-j", "RETURN"]
            for server in self.resolvers
            if _family(server) == tool
            for proto in ("udp", "tcp")
        ]
        rules += [["-d", cidr, "-j", "RETURN"] for cidr in self.allow if _family(cidr) == tool]
        rules += [["-d", cidr, "-j", "DROP"] for cidr in BLOCKED[tool]]
        return rules

    def _input_rules(self, tool: str) -> list[list[str]]:
        rules = [["-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "RETURN"]]
        rules += [["-d", cidr, "-j", "RETURN"] for cidr in self.allow if _family(cidr) == tool]
        return [*rules, ["-j", "DROP"]]

    @staticmethod
    def _chain(tool: str, chain: str, rules: list[list[str]]) -> None:
        iptables(tool, "-N", chain)
        for rule in rules:
            iptables(tool, "-A", chain, *rule)


def iptables(tool: str, *args: str, check: bool = True) -> str:
    """Run `tool -w args`; `SandboxError` with its message when it fails and `check`."""
    try:
        done = subprocess.run(
            [tool, "-w", *args], capture_output=True, text=True, timeout=IPTABLES_TIMEOUT_S
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise SandboxError(f"{tool} {' '.join(args)}: {e}") from None
    if check and done.returncode != 0:
        raise SandboxError(f"{tool} {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def available_tools() -> list[str]:
    """iptables, and ip6tables where the host has it working."""
    tools = ["iptables"]
    if shutil.which("ip6tables") is not None:
        try:
            iptables("ip6tables", "-S", "INPUT")
            tools.append("ip6tables")
        except SandboxError:
            pass
    return tools


def has_chain(tool: str, chain: str) -> bool:
    try:
        iptables(tool, "-S", chain)
    except SandboxError:
        return False
    return True


def chain_rules(tool: str, chain: str) -> list[str]:
    """The rules of `chain` as `iptables -S` prints them (empty if there is none)."""
    try:
        return [line for line in iptables(tool, "-S", chain).splitlines() if line.startswith("-A")]
    except SandboxError:
        return []


_COMMENT = re.compile(r'--comment "?(' + MARK + r' [^"]*)"?')


def guard_rules() -> list[GuardRule]:
    """Every orsbox guard jump rule on this host, of any server."""
    found: list[GuardRule] = []
    if shutil.which("iptables") is None:
        return found
    for tool in available_tools():
        for hook in ("INPUT", "FORWARD", "DOCKER-USER"):
            for line in chain_rules(tool, hook):
                match = _COMMENT.search(line)
                if match is not None:
                    found.append(GuardRule(tool, line, owner_of(match.group(1))))
    return found


def delete_rule(rule: GuardRule) -> None:
    args = shlex.split(rule.line)
    iptables(rule.tool, "-D", *args[1:], check=False)


def drop_chain(tool: str, chain: str) -> None:
    iptables(tool, "-F", chain, check=False)
    iptables(tool, "-X", chain, check=False)


def remove_stale(everything: bool = False) -> list[GuardRule]:
    """Remove the guard rules of servers that certainly died (every server's with
    `everything`); returns the jump rules removed."""
    doomed = [r for r in guard_rules() if everything or L.owner_is_dead(r.owner)]
    for rule in doomed:
        delete_rule(rule)
    still_jumped = {(r.tool, r.chain) for r in guard_rules()}
    for rule in doomed:
        if (rule.tool, rule.chain) not in still_jumped:
            drop_chain(rule.tool, rule.chain)
    return doomed


def host_addresses() -> list[str]:
    """Every address of this host's interfaces (`ip -j addr`), as /32 or /128 CIDRs."""
    try:
        done = subprocess.run(
            ["ip", "-j", "addr"], capture_output=True, text=True, timeout=IPTABLES_TIMEOUT_S
        )
        interfaces = json.loads(done.stdout or "[]")
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return []
    found = []
    for interface in interfaces:
        for info in interface.get("addr_info", []):
            local = str(info.get("local", "")).split("%")[0]
            with contextlib.suppress(ValueError):
                found.append(str(ipaddress.ip_network(local)))
    return found
