"""The guarded network: the bridge every networked sandbox of an engine joins.

Not Docker's default bridge (which passes traffic between containers and is shared with
everything else on the engine) but a user-defined bridge orsbox creates and owns:
`orsbox-guarded`, labelled `orsbox.network=guarded`, with inter-container traffic off
(`com.docker.network.bridge.enable_icc=false`) and a Linux bridge named after the engine
(`ob-<hash of the engine address>`, so private engines of one machine do not collide),
which the egress rules (`orsbox.sandbox.host.egress`) match on. Docker's embedded DNS resolver serves
user-defined networks, so names keep resolving.

Several servers on one engine share the network (a test run starts many at once, and a
bridge per server would soon exhaust Docker's address pools); each adds its own rules
for it, so the network is guarded while any of them runs. A server that closes removes
its rules and tries to remove the network, which Docker refuses while another server's
sandboxes are on it; a create that finds the network gone meanwhile makes it again.

The rules are installed the first time a sandbox needs the network (or when `ensure` is
called at server start) and removed at close; a server that cannot install them (no
iptables, no root) refuses networked sandboxes rather than start them unguarded.
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import logging
import tempfile
from collections.abc import Sequence
from pathlib import Path

import anyio

from orsbox.errors import SandboxError, SandboxGone
from orsbox.sandbox.docker.engine import Engine
from orsbox.sandbox.host import owner as L
from orsbox.sandbox.host.egress import EgressRules, host_resolvers
from orsbox.sandbox.host.state import Swept, sweep_guard

log = logging.getLogger("orsbox.sandbox.docker.guarded")

NETWORK = "orsbox-guarded"
# Servers of one host take turns creating the network (`_ensure_network`); the file stays
LOCK_FILE = Path(tempfile.gettempdir()) / "orsbox-guarded-network.lock"
LABEL = "orsbox.network"


def bridge_name(engine_address: str | None) -> str:
    """The Linux bridge of the guarded network of this engine (at most 15 characters)."""
    digest = hashlib.sha256((engine_address or "default").encode()).hexdigest()
    return f"ob-{digest[:10]}"


class GuardedNetwork:
    """One server's view of the guarded network of its engine."""

    def __init__(self, engine: Engine, server_id: str, allow: Sequence[str]) -> None:
        self.engine = engine
        self.name = NETWORK
        self.bridge = bridge_name(engine.address)
        self.rules = EgressRules(server_id, self.bridge, allow, host_resolvers())
        self._lock = anyio.Lock()
        self._used = False  # this server made sure of the network: it may remove it

    async def ensure(self) -> str:
        """The network's name, once it exists and this server's rules are in place.
        Raises `SandboxError` saying why when the guard cannot be put in place."""
        async with self._lock:
            self._used = True
            await self.engine.run("create the guarded network", self._ensure_network)
            if not self.rules.installed:
                await anyio.to_thread.run_sync(self.rules.install)
        return self.name

    def _ensure_network(self) -> None:
        # One create at a time on this host. Docker's duplicate check races: two servers
        # creating the network together can both pass it, one is refused ("networks have
        # same bridge name"), and Docker 20.10 keeps the refused one in its store without
        # addresses, so that dockerd panics at its next start (reservePools: index out of
        # range). Measured here with six creates at once.
        with LOCK_FILE.open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            self._ensure_network_unlocked()

    def _ensure_network_unlocked(self) -> None:
        api = self.engine.client.api
        if self._exists():
            return
        try:
            api.create_network(
                self.name,
                driver="bridge",
                options={
                    "com.docker.network.bridge.enable_icc": "false",
                    "com.docker.network.bridge.name": self.bridge,
                },
                labels={LABEL: "guarded", **L.owner_labels(self.rules.server_id)},
                check_duplicate=True,
            )
            log.info("created the guarded network %s (bridge %s)", self.name, self.bridge)
        except Exception:
            # Another server created it at the same moment: Docker answers "already
            # exists" or, when both creates passed its duplicate check, "networks have
            # same bridge name". Either way the network is there to join.
            if not self._exists():
                raise

    def _exists(self) -> bool:
        """Whether the engine has the network (its name filter matches substrings)."""
        found = self.engine.client.api.networks(names=[self.name])
        return any(n.get("Name") == self.name for n in found)

    async def close(self) -> None:
        """Remove this server's rules, then the network unless others still use it
        (a server that never needed the network leaves it alone)."""
        if self.rules.installed:
            await anyio.to_thread.run_sync(self.rules.remove)
        if not self._used:
            return
        try:
            await self.engine.run("remove the guarded network", self._remove_network)
        except SandboxGone:
            pass
        except SandboxError as e:
            log.debug("guarded network kept: %s", e)

    def _remove_network(self) -> None:
        remove_if_unused(self.engine, self.name)


def remove_if_unused(engine: Engine, name: str) -> bool:
    """Remove network `name` unless a container, in any state, names it (blocking).
    The network's own `Containers` lists running endpoints only, and Docker removes a
    network a created container is waiting to join: that start then fails with
    "network ... not found" (seen in a fresh-clone run). A create between this check
    and the removal can still lose it; `network_vanished` lets the starter retry."""
    api = engine.client.api
    if api.containers(all=True, quiet=True, filters={"network": name}):
        return False
    api.remove_network(name)
    return True


def network_vanished(error: Exception, network: str | None) -> bool:
    """Whether `error` says network `network` was removed under a create or a start."""
    message = str(error)
    return network is not None and "not found" in message and f"network {network}" in message


async def sweep_networks(engine: Engine) -> int:
    """Remove orsbox's networks (guarded and allow-list) whose creating server certainly
    died and that no container is on. A live server that still wants the shared
    guarded network makes it again at its next sandbox (`_create_on_network`)."""

    def sweep() -> int:
        removed = 0
        for network in engine.client.api.networks(filters={"label": LABEL}):
            if not L.owner_is_dead(network.get("Labels") or {}):
                continue
            try:
                removed += remove_if_unused(engine, network["Name"])
            except Exception as e:  # in use meanwhile, or already gone
                log.debug("network %s kept: %s", network["Name"], e)
        return removed

    return await engine.run("sweep orsbox networks", sweep)


async def sweep_host_state(engine: Engine, everything: bool = False) -> Swept:
    """Dead servers' proxies and guard rules (every server's with `everything`:
    `orsbox.sandbox.host.state.sweep_guard`), then the networks nothing is on any more;
    where the rules could not be looked at, the networks they guard are left too."""
    swept = await sweep_guard(everything)
    if swept.rules_error is not None:
        return swept
    return dataclasses.replace(swept, networks=await sweep_networks(engine))
