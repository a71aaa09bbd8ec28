"""The allow-list network: where a sandbox whose only way out is its egress proxy lives.

Per server, an internal Docker network (`internal=True`: Docker drops whatever its
sandboxes send past the bridge, and gives them no default route), created the first time
a sandbox needs it and removed at close, with inter-container traffic off. The host is
still reachable on the bridge's gateway address, so an INPUT chain of the server's own
(`ORSBOX-P-<id>`, its jump carrying the owner comment that `orsbox gc` reads, as in
`egress.py`) drops everything from the bridge except, per sandbox, a connection from its
address to its own proxy's port (`proxy.py`). A sandbox therefore reaches exactly the
hosts its proxy lets through, and nothing on the host or of another sandbox's list.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import anyio

from orsbox.errors import SandboxError, SandboxGone
from orsbox.sandbox.docker import labels as L
from orsbox.sandbox.docker.egress import (
    available_tools,
    chain_suffix,
    delete_rule,
    drop_chain,
    guard_rules,
    host_addresses,
    iptables,
    owner_comment,
)
from orsbox.sandbox.docker.engine import Engine
from orsbox.sandbox.docker.proxy import EgressProxy

log = logging.getLogger("orsbox.sandbox.docker.allowlist")


def proxy_env(url: str) -> dict[str, str]:
    """What a sandbox's processes need to go out through `url` (apt, curl, pip and
    Python's urllib all read these)."""
    local = "localhost,127.0.0.1,::1"
    return {
        "http_proxy": url,
        "https_proxy": url,
        "HTTP_PROXY": url,
        "HTTPS_PROXY": url,
        "no_proxy": local,
        "NO_PROXY": local,
    }


class AllowlistNetwork:
    """One server's allow-list network, its INPUT rules and its sandboxes' proxies."""

    def __init__(
        self, engine: Engine, server_id: str, allow_cidrs: Sequence[str], hosts_file: str | None
    ) -> None:
        suffix = chain_suffix(server_id)
        self.engine = engine
        self.server_id = server_id
        self.name = f"orsbox-allowlist-{suffix.lower()}"
        self.bridge = f"oa-{suffix[:10].lower()}"
        self.chain = f"ORSBOX-P-{suffix}"
        self.allow_cidrs = list(allow_cidrs)
        self.hosts_file = hosts_file
        self.gateway: str | None = None
        self._lock = anyio.Lock()
        self._proxies: dict[str, EgressProxy] = {}  # container id -> its proxy

    async def ensure(self) -> str:
        """The network's name, once it and its INPUT rules exist."""
        async with self._lock:
            if self.gateway is None:
                self.gateway = await self.engine.run("create the allow-list network", self._create)
                await anyio.to_thread.run_sync(self._install_rules)
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
                    "com.docker.network.bridge.name": self.bridge,
                },
                labels={"orsbox.network": "allowlist", **L.owner_labels(self.server_id)},
            )
        config = api.inspect_network(self.name)["IPAM"]["Config"]
        gateways = [c["Gateway"] for c in config if "." in c.get("Gateway", "")]
        if not gateways:
            raise SandboxError(f"the allow-list network {self.name} has no IPv4 gateway")
        return gateways[0]

    def _install_rules(self) -> None:
        self._remove_rules()
        comment = owner_comment(self.server_id)
        for tool in available_tools():
            iptables(tool, "-N", self.chain)
            iptables(tool, "-A", self.chain, "-m", "conntrack", "--ctstate",
                     "ESTABLISHED,RELATED", "-j", "RETURN")  # fmt: skip
            iptables(tool, "-A", self.chain, "-j", "DROP")
            iptables(tool, "-I", "INPUT", "1", "-i", self.bridge,
                     "-m", "comment", "--comment", comment, "-j", self.chain)  # fmt: skip

    def _remove_rules(self) -> None:
        for rule in guard_rules():
            if rule.chain == self.chain:
                delete_rule(rule)
        for tool in available_tools():
            drop_chain(tool, self.chain)

    async def open(self, container_id: str, address: str, hosts: Sequence[str]) -> str:
        """Start the proxy of the sandbox at `address`, let it (only it) reach it, and
        return its URL."""
        await self.close_proxy(container_id)
        gateway = self.gateway
        if gateway is None:
            raise SandboxError("the allow-list network is not set up")
        proxy = await anyio.to_thread.run_sync(
            lambda: EgressProxy.start(
                gateway,
                address,
                hosts,
                allow_cidrs=self.allow_cidrs,
                host_addresses=host_addresses(),
                hosts_file=self.hosts_file,
                owner=self.server_id,
            )
        )
        self._proxies[container_id] = proxy
        try:
            await anyio.to_thread.run_sync(
                lambda: iptables("iptables", "-I", self.chain, "1", *self._way_to(proxy))
            )
        except BaseException:
            await self.close_proxy(container_id)
            raise
        return proxy.url

    def _way_to(self, proxy: EgressProxy) -> list[str]:
        """The rule letting the proxy's sandbox, and only it, connect to the proxy."""
        return [
            "-s", proxy.client, "-d", str(self.gateway),
            "-p", "tcp", "--dport", str(proxy.port), "-j", "RETURN",
        ]  # fmt: skip

    def proxy_of(self, container_id: str) -> EgressProxy | None:
        return self._proxies.get(container_id)

    async def close_proxy(self, container_id: str) -> None:
        """Stop the sandbox's proxy and close its way to it. Idempotent."""
        proxy = self._proxies.pop(container_id, None)
        if proxy is None:
            return

        def stop() -> None:
            iptables("iptables", "-D", self.chain, *self._way_to(proxy), check=False)
            proxy.stop()

        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(stop)

    async def close(self) -> None:
        """Stop every proxy, remove the rules, then the network."""
        for container_id in list(self._proxies):
            await self.close_proxy(container_id)
        if self.gateway is None:
            return
        await anyio.to_thread.run_sync(self._remove_rules)
        self.gateway = None
        try:
            await self.engine.run(
                "remove the allow-list network", self.engine.client.api.remove_network, self.name
            )
        except SandboxGone:
            pass
        except SandboxError as e:
            log.warning("allow-list network %s not removed: %s", self.name, e)
