"""The allow-list network: where a sandbox whose only way out is its egress proxy lives.

Per server, an internal Docker network (`internal=True`: Docker drops whatever its
sandboxes send past the bridge, and gives them no default route), created the first time
a sandbox needs it and removed at close, with inter-container traffic off. The host is
still reachable on the bridge's gateway address; the gate there (INPUT rules and a proxy
per sandbox) is the host's part, shared with any backend: `orsbox.sandbox.host.allowlist`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import anyio

from orsbox.errors import SandboxError, SandboxGone
from orsbox.sandbox.docker.engine import Engine
from orsbox.sandbox.host import owner as L
from orsbox.sandbox.host.allowlist import ProxyGate
from orsbox.sandbox.host.egress import chain_suffix
from orsbox.sandbox.host.proxy import EgressProxy

log = logging.getLogger("orsbox.sandbox.docker.allowlist")


class AllowlistNetwork:
    """One server's allow-list network and its gate (`ProxyGate`)."""

    def __init__(
        self, engine: Engine, server_id: str, allow_cidrs: Sequence[str], hosts_file: str | None
    ) -> None:
        suffix = chain_suffix(server_id)
        self.engine = engine
        self.server_id = server_id
        self.name = f"orsbox-allowlist-{suffix.lower()}"
        self.gate = ProxyGate(server_id, f"oa-{suffix[:10].lower()}", allow_cidrs, hosts_file)
        self._lock = anyio.Lock()

    @property
    def chain(self) -> str:
        return self.gate.chain

    @property
    def gateway(self) -> str | None:
        return self.gate.gateway

    async def ensure(self) -> str:
        """The network's name, once it and its INPUT rules exist."""
        async with self._lock:
            if self.gate.gateway is None:
                self.gate.gateway = await self.engine.run(
                    "create the allow-list network", self._create
                )
                await anyio.to_thread.run_sync(self.gate.install)
        return self.name

    def _create(self) -> str:
        api = self.engine.client.api
        if not api.networks(names=[self.name]):
            api.create_network(
                self.name,
                driver="bridge",
                internal=True,
                options={
                    "com.docker.network.bridge.enable_icc": "false",
                    "com.docker.network.bridge.name": self.gate.bridge,
                },
                labels={"orsbox.network": "allowlist", **L.owner_labels(self.server_id)},
            )
        config = api.inspect_network(self.name)["IPAM"]["Config"]
        gateways = [c["Gateway"] for c in config if "." in c.get("Gateway", "")]
        if not gateways:
            raise SandboxError(f"the allow-list network {self.name} has no IPv4 gateway")
        return gateways[0]

    async def open(self, container_id: str, address: str, hosts: Sequence[str]) -> str:
        """Start the proxy of the sandbox at `address`, let it (only it) reach it, and
        return its URL."""
        return await self.gate.open(container_id, address, hosts)

    def proxy_of(self, container_id: str) -> EgressProxy | None:
        return self.gate.proxy_of(container_id)

    async def close_proxy(self, container_id: str) -> None:
        """Stop the sandbox's proxy and close its way to it. Idempotent."""
        await self.gate.close_proxy(container_id)

    async def close(self) -> None:
        """Stop every proxy, remove the rules, then the network."""
        created = self.gate.gateway is not None
        await self.gate.close()
        if not created:
            return
        try:
            await self.engine.run(
                "remove the allow-list network", self.engine.client.api.remove_network, self.name
            )
        except SandboxGone:
            pass
        except SandboxError as e:
            log.warning("allow-list network %s not removed: %s", self.name, e)
